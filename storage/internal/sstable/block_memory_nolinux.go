//go:build !linux

package sstable

// mapPopulate: slabs are not populated when mapped (see the Linux file).
const mapPopulate = 0

// prefaultBlockMemory does nothing: pages fault in as they are written.
func prefaultBlockMemory([]byte) {}

// decommitBlockMemory does nothing: free buffers are decommitted on Linux
// only.
func decommitBlockMemory([]byte) bool { return false }
