package memtable

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// slabs owns the memory of one skiplist's slabs. Where the platform has
// anonymous mmap (arena_mmap.go), slabs are mapped from the OS, outside
// the Go heap, and unmapped together once the skiplist is unreachable
// (runtime.AddCleanup): the garbage collector neither scans them nor
// counts them towards its heap goal, which otherwise doubles the
// memtables' cost in resident memory (GOGC=100), and a released memtable
// goes back to the OS at once rather than when the scavenger gets to it.
// A memtable whose owner counts its references (Memtable.Ref) is unmapped
// as soon as the last one is dropped (on a goroutine of its own), without
// waiting for a collection. Full-size slabs (2 MiB) are aligned to a huge
// page and advised MADV_HUGEPAGE on Linux (arena_mmap_linux.go): a 32 MiB
// memtable is then 16 TLB entries and 16 page faults instead of 8,192.
// Elsewhere (arena_heap.go), or if a mapping fails, a slab is an ordinary
// Go allocation.
//
// Lifetime: slab memory is never reused for another memtable. Anything
// holding a slice of a slab (a cell's key or value) must also keep the
// skiplist reachable, as memtable iterators do (see the package doc);
// once it is unmapped, a stray slice faults rather than reads other data.
type slabs struct {
	mu       sync.Mutex
	mapped   [][]byte // regions to unmap
	huge     [][]byte // huge-page regions to unmap (mapHugeSlab)
	released bool
	account  *atomic.Int64 // bytes mapped, shared with the owner's other memtables; may be nil
}

// keep records a mapped slab.
func (a *slabs) keep(b []byte, huge bool) {
	a.mu.Lock()
	if a.released {
		a.mu.Unlock()
		panic("BUG: memtable written after its arena was released")
	}
	if huge {
		a.huge = append(a.huge, b)
	} else {
		a.mapped = append(a.mapped, b)
	}
	a.mu.Unlock()
	if a.account != nil {
		a.account.Add(int64(len(b)))
	}
}

// mapAny maps a slab of at least n bytes: huge pages for whole huge
// pages, else ordinary ones; nil if mapping failed or there is no mmap.
func (a *slabs) mapAny(n int) []byte {
	if n%hugePageBytes == 0 {
		if b := mapHugeSlab(n); b != nil {
			a.keep(b, true)
			return b
		}
	}
	if b := mapSlab(n); b != nil {
		a.keep(b, false)
		return b
	}
	return nil
}

// byteSlab returns a zeroed slab of n bytes. Writer only.
func (a *slabs) byteSlab(n int) []byte {
	if b := a.mapAny(n); b != nil {
		return b[:n:n]
	}
	return make([]byte, n)
}

// wordSlab returns a zeroed slab of n words. Writer only.
func (a *slabs) wordSlab(n int) []uint64 {
	if b := a.mapAny(8 * n); b != nil {
		// Mappings are page-aligned, so the words are aligned for
		// atomic access.
		return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), n)
	}
	return make([]uint64, n)
}

// release unmaps every mapped slab: when the memtable's last reference is
// dropped, or else when its skiplist is unreachable. Later calls do
// nothing.
func (a *slabs) release() {
	a.mu.Lock()
	mapped, huge := a.mapped, a.huge
	a.mapped, a.huge, a.released = nil, nil, true
	a.mu.Unlock()
	for _, b := range mapped {
		unmapSlab(b)
		if a.account != nil {
			a.account.Add(-int64(len(b)))
		}
	}
	for _, b := range huge {
		unmapHugeSlab(b)
		if a.account != nil {
			a.account.Add(-int64(len(b)))
		}
	}
}

// releaseWhenUnreachable arranges for s's slabs to be unmapped once s is
// unreachable.
func (s *skiplist) releaseWhenUnreachable() {
	runtime.AddCleanup(s, func(a *slabs) { a.release() }, s.slabs)
}
