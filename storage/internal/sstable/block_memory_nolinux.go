//go:build !linux

package sstable

// decommitBlockMemory does nothing: free buffers are decommitted on Linux
// only.
func decommitBlockMemory([]byte) bool { return false }
