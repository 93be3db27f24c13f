//go:build !linux

package sstable

// mapPopulate: slabs are not populated when mapped (see the Linux file).
const mapPopulate = 0

// prefaultBlockMemory does nothing: pages fault in as they are written.
func prefaultBlockMemory([]byte) {}

// decommitBlockMemory does nothing: free buffers are decommitted on Linux
// only.
func decommitBlockMemory([]byte) bool { return false }

// populateBlockMemory faults in b, a fresh mapping, by writing to each
// of its pages.
func populateBlockMemory(b []byte) { touchPages(b) }

// prefaultSupported: no prefaulted reserve outside Linux (the pages fault
// in as buffers are written).
const prefaultSupported = false

func mapRegion(int) []byte { return nil }

func unmapRegion([]byte) {}
