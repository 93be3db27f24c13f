package sstable

import "syscall"

// mapPopulate makes mapBlockMemory fault a slab's pages in at once: a slab
// is carved because blocks need it now, and one populating mmap costs far
// less than a page fault per 4 KiB of each block read into it (a cold
// read's latency, against the Go heap's already resident spans).
const mapPopulate = syscall.MAP_POPULATE

// decommitBlockMemory hands the pages of b (whole pages of a mapping from
// mapBlockMemory) back to the OS, keeping the mapping: they read as zeros
// when next touched. It reports whether it did.
func decommitBlockMemory(b []byte) bool {
	return syscall.Madvise(b, syscall.MADV_DONTNEED) == nil
}
