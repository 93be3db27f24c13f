//go:build linux || darwin || freebsd

package memtable

import "syscall"

// mmapSlabs says slabs are mapped from the OS, outside the Go heap.
const mmapSlabs = true

// mapSlab maps n bytes (rounded up to whole pages) of anonymous, zeroed
// memory, or returns nil if the mapping fails (the caller then allocates
// on the Go heap).
func mapSlab(n int) []byte {
	page := syscall.Getpagesize()
	n = (n + page - 1) / page * page
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil
	}
	return b
}

// unmapSlab returns a slab from mapSlab to the OS. It cannot fail for a
// mapping mapSlab made; if it did, the memory would only stay mapped.
func unmapSlab(b []byte) { _ = syscall.Munmap(b) }
