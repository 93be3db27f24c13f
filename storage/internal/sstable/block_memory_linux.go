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

// madvHugepage is MADV_HUGEPAGE: back the range with transparent huge
// pages where the system allows it (in "madvise" mode, only such ranges).
const madvHugepage = 14

// populateBlockMemory faults in b, a fresh mapping from mapBlockMemory
// whose start and length are multiples of the page size: it asks for
// transparent huge pages first (fewer faults and TLB entries; refused
// where THP are off, which is fine), then one MADV_POPULATE_WRITE, or a
// write to every page where the kernel refuses it (before Linux 5.14).
func populateBlockMemory(b []byte) {
	if len(b) == 0 {
		return
	}
	_ = syscall.Madvise(b, madvHugepage) // a hint
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, start, uintptr(len(b)), madvPopulateWrite); errno == 0 {
		return
	}
	touchPages(b)
}

// prefaultSupported: an arena can prefault a reserve (see blockArena).
const prefaultSupported = true

// mapRegion maps n bytes (whole pages) of anonymous memory for a
// prefaulted reserve, or returns nil if the mapping fails. It calls mmap
// directly, not syscall.Mmap, whose munmap takes only whole mappings as
// it returned them: a reserve is unmapped in parts (its alignment slack
// at once, its unused rest at ReleaseReserve).
func mapRegion(n int) []byte {
	p, _, errno := syscall.Syscall6(syscall.SYS_MMAP, 0, uintptr(n), syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANON, ^uintptr(0), 0)
	if errno != 0 {
		return nil
	}
	// p is outside the Go heap: reading it as a pointer is safe (written
	// so to spare go vet's check of uintptr conversions).
	return unsafe.Slice(*(**byte)(unsafe.Pointer(&p)), n)
}

// unmapRegion unmaps b, whole pages of a mapping from mapRegion.
func unmapRegion(b []byte) {
	if len(b) > 0 {
		syscall.Syscall(syscall.SYS_MUNMAP, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), 0)
	}
}
