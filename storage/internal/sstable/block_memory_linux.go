package sstable

import (
	"syscall"
	"unsafe"
)

// mapPopulate would make mapBlockMemory fault a whole slab in at once;
// slabs are instead faulted in a buffer at a time (prefaultBlockMemory),
// so that no read pays for a slab's worth of pages it does not use.
const mapPopulate = 0

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14), absent from
// package syscall.
const madvPopulateWrite = 23

// prefaultBlockMemory faults in the whole pages of b, a buffer about to be
// written for the first time (carved from a fresh slab, or decommitted):
// one system call instead of a page fault per 4 KiB of the block read
// into it, which made cold reads slower than on the Go heap, whose spans
// are already resident. A kernel without MADV_POPULATE_WRITE refuses it,
// and the pages fault in as they are written.
func prefaultBlockMemory(b []byte) {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	end := start + uintptr(len(b))
	page := uintptr(pageBytes)
	start = (start + page - 1) &^ (page - 1)
	end &^= page - 1
	if end <= start {
		return
	}
	syscall.Syscall(syscall.SYS_MADVISE, start, end-start, madvPopulateWrite) // a hint
}

// decommitBlockMemory hands the pages of b (whole pages of a mapping from
// mapBlockMemory) back to the OS, keeping the mapping: they read as zeros
// when next touched. It reports whether it did.
func decommitBlockMemory(b []byte) bool {
	return syscall.Madvise(b, syscall.MADV_DONTNEED) == nil
}
