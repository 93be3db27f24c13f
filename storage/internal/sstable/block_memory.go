package sstable

import (
	"math"
	"math/bits"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// blockArena hands out the buffers decoded data blocks live in: the
// decompressed bytes, the packed cells, the expanded row keys and shaped
// values (see loadedBlock). A Cache's arena maps them from the OS
// (block_memory_mmap.go), outside the Go heap: the garbage collector
// neither scans them nor counts them towards its heap goal, which is twice
// the live heap at GOGC=100, so a full 32 MiB cache on the heap cost up
// to 64 MiB of resident memory and made every collection cycle come
// sooner. Where there is no mmap, or a mapping fails, and for a Reader
// without a Cache, buffers are Go allocations recycled the same way.
//
// Buffers come in size classes (two per power of two, from 64 bytes to
// 1 MiB, so at most a third of a buffer is slack), carved from slabs of
// 64 to 256 KiB (see arenaSlabFor) mapped on demand, a buffer's pages
// faulted in with one call when it is first carved (Linux,
// prefaultBlockMemory); a released buffer goes on its class's
// free list for the next block of that size. A buffer whose class has no
// free chunk and could only come from memory not resident (a fresh or
// non-prefaulted slab, a decommitted chunk) takes a free chunk of one of
// the next two classes instead, if there is one (borrow): a full cache
// frees the classes of the blocks it evicts, and the blocks read next may
// need the classes just below. Larger buffers (a block of
// one huge cell) are mapped and unmapped one by one.
//
// Lifetime: a buffer is put back only when the block it belongs to has no
// reference left (loadedBlock.release): the cache holds one, and every
// iterator or scanner that may still hand out cells of the block another.
// Nothing outside the package sees buffers, only cells aliasing them, and
// a cell is valid only while its iterator holds the block (see the package
// doc). With poisoning on (Cache.PoisonReleased) a buffer is overwritten
// with poisonByte when it is put back, so a reader that broke that rule
// reads garbage at once instead of the right bytes until the buffer is
// reused. Slabs are never unmapped while the arena lives (a slab's chunks
// may be anywhere on the free lists), so the arena's mapped bytes are
// bounded by what its blocks held at their peak, in each class: the
// cache's capacity plus the blocks pinned by open iterators. What it keeps
// resident is bounded tighter: once the free chunks exceed retainFree
// bytes, a chunk of whole pages put back is first handed back to the OS
// (madvise MADV_DONTNEED; it stays mapped and is faulted in again, zeroed,
// when reused), so a shift from one size class to another does not keep
// both resident. Once the Cache is unreachable (the store closed), every
// slab is unmapped.
//
// Prefaulting (Cache.Prefault and PrefaultNow, storage.Open unless
// storage.Options.LazyBlockCacheMemory):
// a fresh buffer's page faults were about 9 of a cold read's ~24 µs on
// the 2-core test VM while the cache fills (BENCHMARKS.md, s11-read), 3.8
// faults per query of loadtest/peers' 90%-expired read. A prefaulted
// arena, when it first needs a slab (or at once, PrefaultNow: storage
// calls it when the store opens, so that no read pays it), maps one
// region of the cache's capacity, asks for transparent huge pages on it
// and faults it all in with one MADV_POPULATE_WRITE (pages touched one
// by one where that is refused): a few milliseconds per 32 MiB;
// from then on new slabs are cut from this reserve, already resident,
// before any is mapped, and their buffers need no prefault. The reserve
// is the memory a full cache holds anyway, resident from the start
// instead of as the cache fills. What of it is not cut into slabs yet is
// bounded per process (prefaultBudget: a region takes what is left of
// it, or nothing under a MiB), and is unmapped when the store closes
// (Cache.ReleaseReserve), so a process that opens many stores, or drops
// them without closing them (crash tests), holds at most that much memory
// no block uses.
type blockArena struct {
	classes [arenaClasses]arenaClass
	// mmap: buffers are mapped from the OS (a Cache's arena); otherwise
	// they are Go allocations.
	mmap   bool
	poison bool
	// retainFree is how many bytes of free chunks stay resident (0:
	// all); beyond it, freed chunks of whole pages are decommitted.
	retainFree int64
	mu         sync.Mutex
	slabs      [][]byte // mapped slabs, to unmap at release
	// resv is the prefaulted region (Cache.Prefault), unmapped at
	// release, of which resvCut bytes are cut into slabs; the rest is
	// the reserve new slabs are cut from before any is mapped.
	resv    []byte
	resvCut int
	// prefaultBytes is the region the next new slab maps and faults in
	// first (armed by Cache.Prefault; 0 once done).
	prefaultBytes int64
	large         map[unsafe.Pointer][]byte // large buffers (mapped one by one) in use
	// mapped counts the bytes mapped (or allocated) for buffers: slabs,
	// large buffers and the prefaulted region; idle the bytes of free
	// chunks, of slabs not carved yet and of the reserve; warm the bytes
	// of free chunks not decommitted; reserved the bytes of the
	// prefaulted region not carved into buffers yet (resident: the
	// reserve, and the uncarved rest of the slabs cut from it).
	mapped, idle, warm, reserved atomic.Int64
	// resvLeft is the bytes of the reserve not cut into slabs yet (or
	// the size of an armed prefault not done yet); borrowed counts the
	// buffers taken from a larger class (see borrow).
	resvLeft, borrowed atomic.Int64
}

// arenaClass is one size class: its free chunks and the rest of the slab
// being carved.
type arenaClass struct {
	mu   sync.Mutex
	free []unsafe.Pointer // resident
	cold []unsafe.Pointer // decommitted
	cur  []byte           // the uncarved rest of the newest slab
	// curResident: cur was cut from the prefaulted reserve, so its
	// buffers need no prefault.
	curResident bool
}

const (
	arenaMinClassShift = 6 // 64 bytes
	arenaMaxClassShift = 20
	arenaMaxClassBytes = 1 << arenaMaxClassShift
	// Two classes per power of two (2^k and 3*2^(k-1)) from 2^6 to 2^17.
	arenaClasses   = 2*(arenaMaxClassShift-arenaMinClassShift) + 1
	arenaSlabBytes = 256 << 10
)

// arenaSlabFor is the size of the slabs class size's buffers are carved
// from: 16 buffers, but at least 64 KiB and at most arenaSlabBytes, and
// one buffer for the largest classes (fewer mappings, and little of a
// slab mapped but never used).
func arenaSlabFor(size int) int {
	if size >= arenaSlabBytes/2 {
		return size
	}
	return min(max(16*size, 64<<10), arenaSlabBytes)
}

// arenaClassOf returns the class of a buffer of n bytes (n <= arenaMaxClassBytes).
func arenaClassOf(n int) int {
	if n <= 1<<arenaMinClassShift {
		return 0
	}
	e := bits.Len(uint(n - 1)) // 2^(e-1) < n <= 2^e
	if n <= 3<<(e-2) {
		return 2*(e-arenaMinClassShift) - 1
	}
	return 2 * (e - arenaMinClassShift)
}

// arenaClassBytes is the size of class c's buffers.
func arenaClassBytes(c int) int {
	if c%2 == 0 {
		return 1 << (arenaMinClassShift + c/2)
	}
	return 3 << (arenaMinClassShift + c/2 - 1)
}

// newMappedArena returns an arena that maps its buffers from the OS where
// it can, keeps up to retainFree bytes of free buffers resident, and
// unmaps them once owner is unreachable.
func newMappedArena(owner *Cache, retainFree int64) *blockArena {
	a := &blockArena{mmap: mmapBlocks, retainFree: retainFree}
	if a.mmap {
		runtime.AddCleanup(owner, func(a *blockArena) { a.releaseAll() }, a)
	}
	return a
}

// alloc returns a buffer of length n whose capacity is its class's size
// (or n rounded up to whole pages beyond the largest class). Its bytes
// are not zeroed.
func (a *blockArena) alloc(n int) []byte {
	if n > arenaMaxClassBytes {
		b := a.mapOrMake(n)
		a.mu.Lock()
		if a.large == nil {
			a.large = map[unsafe.Pointer][]byte{}
		}
		a.large[unsafe.Pointer(unsafe.SliceData(b))] = b
		a.mu.Unlock()
		a.mapped.Add(int64(cap(b)))
		return b[:n]
	}
	c := arenaClassOf(n)
	size := arenaClassBytes(c)
	cl := &a.classes[c]
	cl.mu.Lock()
	if p := popChunk(&cl.free); p != nil {
		cl.mu.Unlock()
		a.idle.Add(-int64(size))
		a.warm.Add(-int64(size))
		return unsafe.Slice((*byte)(p), size)[:n]
	}
	if a.mmap && !(len(cl.cur) >= size && cl.curResident) && a.resvLeft.Load() < int64(arenaSlabFor(size)) {
		// Every other way to a buffer of this class touches memory not
		// resident (a fresh slab's or a decommitted chunk's pages): take
		// a resident free buffer of one of the next two classes (at most
		// twice the size) if there is one. A full cache's evictions
		// free buffers of the classes its old blocks had, and the blocks
		// read next may need the classes below them.
		cl.mu.Unlock()
		if b := a.borrow(c, n); b != nil {
			return b
		}
		cl.mu.Lock()
	}
	if p := popChunk(&cl.cold); p != nil {
		cl.mu.Unlock()
		a.idle.Add(-int64(size))
		b := unsafe.Slice((*byte)(p), size)[:n]
		prefaultBlockMemory(b)
		return b
	}
	if len(cl.cur) < size {
		// What was left of the previous slab is smaller than a chunk and
		// stays unused.
		cl.cur, cl.curResident = a.newSlab(arenaSlabFor(size))
	}
	b := cl.cur[:size:size]
	cl.cur = cl.cur[size:]
	resident := cl.curResident
	cl.mu.Unlock()
	a.idle.Add(-int64(size))
	if resident {
		a.reserved.Add(-int64(size))
	} else if a.mmap {
		prefaultBlockMemory(b[:n])
	}
	return b[:n]
}

// borrowClasses is how many classes above its own a buffer may be taken
// from (see alloc): two, at most twice the size asked for.
const borrowClasses = 2

// borrow returns a resident free buffer of one of the borrowClasses
// classes above c, of length n, or nil. The buffer keeps its class (its
// capacity), which free puts it back to.
func (a *blockArena) borrow(c, n int) []byte {
	for up := c + 1; up <= c+borrowClasses && up < arenaClasses; up++ {
		ucl := &a.classes[up]
		ucl.mu.Lock()
		p := popChunk(&ucl.free)
		ucl.mu.Unlock()
		if p != nil {
			size := arenaClassBytes(up)
			a.idle.Add(-int64(size))
			a.warm.Add(-int64(size))
			a.borrowed.Add(1)
			return unsafe.Slice((*byte)(p), size)[:n]
		}
	}
	return nil
}

// popChunk takes the last chunk off a free list, or returns nil if it is
// empty.
func popChunk(list *[]unsafe.Pointer) unsafe.Pointer {
	k := len(*list)
	if k == 0 {
		return nil
	}
	p := (*list)[k-1]
	(*list)[k-1] = nil
	*list = (*list)[:k-1]
	return p
}

// mapOrMake maps n bytes outside the Go heap, or allocates them on it
// where the arena does not map (or the mapping failed).
func (a *blockArena) mapOrMake(n int) []byte {
	if a.mmap {
		if b := mapBlockMemory(n); b != nil {
			return b
		}
	}
	return make([]byte, n)
}

// newSlab cuts a slab of n bytes from the prefaulted reserve if it holds
// that much (resident: its pages are faulted in), else maps (or
// allocates) one.
func (a *blockArena) newSlab(n int) (slab []byte, resident bool) {
	a.mu.Lock()
	a.prefaultArmedLocked()
	if rest := len(a.resv) - a.resvCut; rest >= n {
		b := a.resv[a.resvCut : a.resvCut+n : a.resvCut+n]
		a.resvCut += n
		a.resvLeft.Store(int64(len(a.resv) - a.resvCut))
		a.mu.Unlock()
		prefaultBudget.Add(int64(n))
		return b, true // idle and reserved until carved
	}
	a.mu.Unlock()
	b := a.mapOrMake(n)
	a.mu.Lock()
	a.slabs = append(a.slabs, b) // keeps Go-allocated slabs alive too
	a.mu.Unlock()
	a.mapped.Add(int64(len(b)))
	a.idle.Add(int64(len(b)))
	return b, false
}

// hugePageBytes is the size of a transparent huge page on the platforms
// that have them (x86-64, arm64 with 4 KiB pages): the prefaulted region
// is aligned to it so that it can be backed by huge pages.
const hugePageBytes = 2 << 20

// prefaultBudget is what is left of the bytes the process's arenas may
// hold prefaulted and not cut into slabs (see blockArena): taken by
// prefault, given back as slabs are cut and when a reserve is released.
var prefaultBudget atomic.Int64

// maxPrefaultBytes is prefaultBudget's whole: eight default caches.
const maxPrefaultBytes = 256 << 20

// minPrefaultBytes: a region smaller than this (the budget nearly spent)
// is not worth a mapping of its own.
const minPrefaultBytes = 1 << 20

func init() { prefaultBudget.Store(maxPrefaultBytes) }

// armPrefault makes the arena's next new slab map a region of n bytes and
// fault it in first (see prefaultLocked).
func (a *blockArena) armPrefault(n int64) {
	a.mu.Lock()
	if a.mmap && a.resv == nil {
		a.prefaultBytes = max(n, 0)
		a.resvLeft.Store(a.prefaultBytes)
	}
	a.mu.Unlock()
}

// prefaultArmed does an armed prefault now (see armPrefault) instead of
// at the next new slab, and returns the bytes it faulted in.
func (a *blockArena) prefaultArmed() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.prefaultArmedLocked()
}

// prefaultArmedLocked is prefaultArmed with a.mu held (newSlab does an
// armed prefault this way at the first slab).
func (a *blockArena) prefaultArmedLocked() int64 {
	if a.prefaultBytes <= 0 {
		return 0
	}
	n := a.prefaultLocked(a.prefaultBytes)
	a.prefaultBytes = 0
	a.resvLeft.Store(int64(len(a.resv) - a.resvCut))
	return n
}

// prefaultLocked maps a region of n bytes (whole pages, fewer if the
// process's budget has less left), aligned to a huge page where the
// mapping allows, faults it all in and makes it the reserve new slabs are
// cut from. It does nothing for an arena that does not map, that already
// has a reserve, if less than minPrefaultBytes of the budget is left, or
// if the mapping fails. It returns the bytes it faulted in. The caller
// holds a.mu.
func (a *blockArena) prefaultLocked(n int64) int64 {
	if !prefaultSupported || !a.mmap || a.resv != nil || n <= 0 {
		return 0
	}
	size := int64(roundUp(int(min(n, math.MaxInt32)), pageBytes))
	for {
		left := prefaultBudget.Load()
		size = min(size, left&^int64(pageBytes-1))
		if size < minPrefaultBytes {
			return 0
		}
		if prefaultBudget.CompareAndSwap(left, left-size) {
			break
		}
	}
	b := mapAligned(int(size), hugePageBytes)
	if b == nil {
		prefaultBudget.Add(size)
		return 0
	}
	populateBlockMemory(b)
	a.resv, a.resvCut = b, 0
	a.mapped.Add(size)
	a.idle.Add(size)
	a.reserved.Add(size)
	return size
}

// mapAligned maps n bytes (whole pages) starting at a multiple of align
// (a multiple of the page size) with mapRegion: it maps n+align bytes and
// unmaps what lies before and after the aligned part. Where the first
// mapping fails it maps n bytes as they come, and returns nil if that
// fails too.
func mapAligned(n, align int) []byte {
	b := mapRegion(n + align)
	if b == nil {
		return mapRegion(n)
	}
	skip := (align - int(uintptr(unsafe.Pointer(unsafe.SliceData(b))))%align) % align
	if skip > 0 {
		unmapRegion(b[:skip])
	}
	if tail := b[skip+n:]; len(tail) > 0 {
		unmapRegion(tail)
	}
	return b[skip : skip+n : skip+n]
}

// releaseReserve unmaps what is left of the prefaulted reserve (nothing
// was cut from it, so nothing refers to it); slabs cut from it stay until
// releaseAll. It returns the bytes it unmapped.
func (a *blockArena) releaseReserve() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.prefaultBytes = 0
	a.resvLeft.Store(0)
	rest := a.resv[a.resvCut:]
	if len(rest) == 0 {
		return 0
	}
	unmapRegion(rest)
	a.resv = a.resv[:a.resvCut:a.resvCut]
	n := int64(len(rest))
	a.mapped.Add(-n)
	a.idle.Add(-n)
	a.reserved.Add(-n)
	prefaultBudget.Add(n)
	return n
}

// free puts back a buffer from alloc that nothing refers to any more,
// poisoning it first if the arena poisons.
func (a *blockArena) free(b []byte) {
	size := cap(b)
	if size == 0 {
		return
	}
	b = b[:size]
	if a.poison {
		for i := range b {
			b[i] = poisonByte
		}
	}
	if size > arenaMaxClassBytes {
		a.mapped.Add(-int64(size))
		a.mu.Lock()
		delete(a.large, unsafe.Pointer(unsafe.SliceData(b)))
		a.mu.Unlock()
		if a.mmap {
			unmapBlockMemory(b) // one that fell back to the Go heap is not unmapped: left to the GC
		}
		return
	}
	c := arenaClassOf(size)
	if arenaClassBytes(c) != size {
		panic("BUG: sstable block buffer freed with a capacity that is no size class")
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	cold := a.mmap && a.retainFree > 0 && !a.poison && size%pageBytes == 0 && a.warm.Load() >= a.retainFree &&
		decommitBlockMemory(b)
	cl := &a.classes[c]
	cl.mu.Lock()
	if cold {
		cl.cold = append(cl.cold, p)
	} else {
		cl.free = append(cl.free, p)
	}
	cl.mu.Unlock()
	a.idle.Add(int64(size))
	if !cold {
		a.warm.Add(int64(size))
	}
}

// pageBytes is the OS page size: chunks of whole pages can be decommitted.
var pageBytes = os.Getpagesize()

// releaseAll unmaps every slab and large buffer. Only for an arena
// nothing can use any more.
func (a *blockArena) releaseAll() {
	a.mu.Lock()
	slabs, large := a.slabs, a.large
	a.slabs, a.large = nil, nil
	if len(a.resv) > 0 {
		// releaseReserve already unmapped anything past len(a.resv).
		unmapRegion(a.resv)
		a.mapped.Add(-int64(len(a.resv)))
		prefaultBudget.Add(int64(len(a.resv) - a.resvCut))
	}
	a.resv, a.resvCut, a.prefaultBytes = nil, 0, 0
	a.reserved.Store(0)
	a.resvLeft.Store(0)
	a.mu.Unlock()
	for _, b := range slabs {
		unmapBlockMemory(b)
		a.mapped.Add(-int64(len(b)))
	}
	for _, b := range large {
		unmapBlockMemory(b)
		a.mapped.Add(-int64(cap(b)))
	}
}

// inUse is the bytes of buffers handed out and not put back.
func (a *blockArena) inUse() int64 { return a.mapped.Load() - a.idle.Load() }

// resident is an upper bound of the bytes the arena keeps resident: the
// buffers in use, the free ones not decommitted and the prefaulted
// memory not carved yet.
func (a *blockArena) resident() int64 { return a.inUse() + a.warm.Load() + a.reserved.Load() }

// cellsIn returns n packed cells laid over the start of buf, which must
// hold them and be aligned for them (arena buffers are: slabs are page
// aligned, and classes are multiples of 32 bytes).
func cellsIn(buf []byte, n int) []packedCell {
	if n == 0 {
		return nil
	}
	if uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%unsafe.Alignof(packedCell{}) != 0 || int64(len(buf)) < int64(n)*cellStructSize {
		panic("BUG: packed cells laid over a misaligned or short buffer")
	}
	return unsafe.Slice((*packedCell)(unsafe.Pointer(unsafe.SliceData(buf))), n)
}

// touchPages faults in the pages of b, fresh (zero) memory, by writing a
// zero to each.
func touchPages(b []byte) {
	for i := 0; i < len(b); i += pageBytes {
		b[i] = 0
	}
}
