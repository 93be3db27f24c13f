//go:build !linux

package sstable

// mapPopulate: MAP_POPULATE is Linux's.
const mapPopulate = 0

// decommitBlockMemory does nothing: free buffers are decommitted on Linux
// only.
func decommitBlockMemory([]byte) bool { return false }
