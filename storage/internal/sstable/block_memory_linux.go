package sstable

import "syscall"

// decommitBlockMemory hands the pages of b (whole pages of a mapping from
// mapBlockMemory) back to the OS, keeping the mapping: they read as zeros
// when next touched. It reports whether it did.
func decommitBlockMemory(b []byte) bool {
	return syscall.Madvise(b, syscall.MADV_DONTNEED) == nil
}
