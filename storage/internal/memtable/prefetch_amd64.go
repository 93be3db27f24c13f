package memtable

// prefetch asks the CPU to bring the cache line holding addr into its
// caches without waiting for it (PREFETCHT0); it never faults, so addr
// may be anything.
//
//go:noescape
func prefetch(addr uintptr)
