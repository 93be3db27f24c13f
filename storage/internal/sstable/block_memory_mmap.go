//go:build linux || darwin || freebsd

package sstable

import "syscall"

// mmapBlocks says a Cache's block buffers are mapped from the OS, outside
// the Go heap.
const mmapBlocks = true

// mapBlockMemory maps n bytes (rounded up to whole pages) of anonymous
// memory, or returns nil if the mapping fails (the caller then allocates
// on the Go heap).
func mapBlockMemory(n int) []byte {
	page := syscall.Getpagesize()
	n = (n + page - 1) / page * page
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|mapPopulate)
	if err != nil {
		return nil
	}
	return b
}

// unmapBlockMemory returns a mapping from mapBlockMemory to the OS. It
// cannot fail for one; for anything else (a Go allocation) it does
// nothing.
func unmapBlockMemory(b []byte) { _ = syscall.Munmap(b) }
