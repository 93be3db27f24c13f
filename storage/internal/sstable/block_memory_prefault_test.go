package sstable

import (
	"bytes"
	"testing"
	"unsafe"
)

// TestArenaPrefaultAccounting checks the arena's counters through a
// prefaulted reserve's life: mapped and reserved at the first buffer after
// Prefault, carved into
// buffers (reserved falls by each buffer, in use rises), freed and
// reused, the rest released, everything unmapped at releaseAll.
func TestArenaPrefaultAccounting(t *testing.T) {
	if !mmapBlocks {
		t.Skip("block buffers are on the Go heap on this platform: nothing to prefault")
	}
	const capacity = 3<<20 + 100 // not a whole number of pages
	c := NewCache(capacity)
	a := c.blocks.arena
	defer a.releaseAll()
	budget := prefaultBudget.Load()
	c.Prefault()
	if m := c.Metrics(); m.MappedBytes != 0 || m.ReservedBytes != 0 {
		t.Fatalf("Prefault mapped memory before any was needed: %+v", m)
	}
	want := int64(roundUp(capacity, pageBytes))

	const size = 24 << 10 // the expiry store's head blocks' class
	var bufs [][]byte
	var carved int64
	for i := range 40 {
		b := a.alloc(size - 100)
		carved += int64(cap(b))
		if i == 0 {
			if p := uintptr(unsafe.Pointer(unsafe.SliceData(a.resv))); p%uintptr(pageBytes) != 0 {
				t.Fatalf("reserve at %#x is not page aligned", p)
			}
			m := c.Metrics()
			if m.MappedBytes != want || m.ReservedBytes != want-carved || a.resident() != want {
				t.Fatalf("after the first buffer: %+v, resident %d; want %d mapped and resident", m, a.resident(), want)
			}
			if left := prefaultBudget.Load(); left != budget-want+int64(arenaSlabFor(size)) {
				t.Fatalf("budget %d left of %d after a %d-byte reserve and a slab cut", left, budget, want)
			}
		}
		start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		resvStart := uintptr(unsafe.Pointer(unsafe.SliceData(a.resv[:1])))
		if start < resvStart || start+uintptr(cap(b)) > resvStart+uintptr(cap(a.resv)) {
			t.Fatalf("buffer %d at %#x is not in the reserve", i, start)
		}
		for j := range b {
			b[j] = byte(i)
		}
		bufs = append(bufs, b)
		m := c.Metrics()
		if m.ReservedBytes != want-carved || m.InUseBytes != carved || m.MappedBytes != want {
			t.Fatalf("after %d buffers of %d bytes: %+v, want %d reserved, %d in use, %d mapped", i+1, cap(b), m, want-carved, carved, want)
		}
	}
	for i, b := range bufs {
		if b[0] != byte(i) || b[len(b)-1] != byte(i) {
			t.Fatalf("buffer %d was overwritten", i)
		}
	}
	for _, b := range bufs {
		a.free(b)
	}
	if a.inUse() != 0 || a.resident() != want {
		t.Fatalf("after freeing all: %d in use, %d resident, want 0 and %d", a.inUse(), a.resident(), want)
	}
	reused := a.alloc(size)
	if unsafe.SliceData(reused) != unsafe.SliceData(bufs[len(bufs)-1]) {
		t.Fatal("a freed reserve buffer was not reused first")
	}
	a.free(reused)

	// Close: the uncut rest of the reserve is unmapped; the slab cut for
	// the buffers stays (idle, and reserved for its uncarved rest).
	slab := int64(arenaSlabFor(size))
	cut := (carved + slab - 1) / slab * slab
	if n := c.ReleaseReserve(); n != want-cut {
		t.Fatalf("ReleaseReserve unmapped %d bytes, want %d", n, want-cut)
	}
	m := c.Metrics()
	if m.MappedBytes != cut || m.ReservedBytes != cut-carved || m.InUseBytes != 0 {
		t.Fatalf("after ReleaseReserve: %+v, want %d mapped, %d reserved, none in use", m, cut, cut-carved)
	}
	if n := c.ReleaseReserve(); n != 0 {
		t.Fatalf("a second ReleaseReserve unmapped %d bytes", n)
	}
	if left := prefaultBudget.Load(); left != budget {
		t.Fatalf("budget %d left after the reserve's release, want all %d back", left, budget)
	}
	// The cache goes on working: past the free buffers and the cut
	// slabs, new slabs are mapped.
	for range int64(len(bufs)) + 2*slab/size {
		a.alloc(size)
	}
	if m := c.Metrics(); m.MappedBytes <= cut {
		t.Fatalf("no slab mapped after the reserve was released: %+v", m)
	}
	a.releaseAll()
	if m := c.Metrics(); m.MappedBytes != 0 || m.ReservedBytes != 0 {
		t.Fatalf("after releaseAll: %+v", m)
	}
}

// TestArenaPrefaultPoisons checks that buffers carved from a prefaulted
// reserve are poisoned when freed, like any other.
func TestArenaPrefaultPoisons(t *testing.T) {
	if !mmapBlocks {
		t.Skip("block buffers are on the Go heap on this platform")
	}
	c := NewCache(1 << 20)
	c.PoisonReleased()
	defer c.blocks.arena.releaseAll()
	c.Prefault()
	for _, n := range []int{100, 5000, 40 << 10} {
		b := c.blocks.arena.alloc(n)
		for i := range b {
			b[i] = 1
		}
		full := b[:cap(b)]
		if c.Metrics().ReservedBytes == 0 {
			t.Fatal("nothing prefaulted")
		}
		c.blocks.arena.free(b)
		if !bytes.Equal(full, bytes.Repeat([]byte{poisonByte}, len(full))) {
			t.Fatalf("freed reserve buffer of %d bytes not poisoned", n)
		}
	}
}

// TestArenaPrefaultLarger checks that a reserve smaller than what the
// blocks need is used up and the arena then maps slabs as before, and
// that a large buffer (beyond the classes) never comes from the reserve.
func TestArenaPrefaultLarger(t *testing.T) {
	if !mmapBlocks {
		t.Skip("block buffers are on the Go heap on this platform")
	}
	c := NewCache(512 << 10)
	a := c.blocks.arena
	defer a.releaseAll()
	c.Prefault()
	big := a.alloc(arenaMaxClassBytes + 1)
	if m := c.Metrics(); m.ReservedBytes != 0 {
		t.Fatalf("a large buffer made or took from the reserve: %+v", m)
	}
	a.free(big)
	var bufs [][]byte
	for range 64 {
		b := a.alloc(32 << 10)
		for i := range b {
			b[i] = 7
		}
		bufs = append(bufs, b)
	}
	if m := c.Metrics(); m.ReservedBytes != 0 || m.InUseBytes != 64*32<<10 || m.MappedBytes != 64*32<<10 {
		t.Fatalf("after 2 MiB of buffers from a 512 KiB reserve: %+v", m)
	}
	for _, b := range bufs {
		if b[0] != 7 || b[len(b)-1] != 7 {
			t.Fatal("buffers overlap")
		}
		a.free(b)
	}
}

// TestArenaPrefaultBudget checks that the memory prefaulted and not cut
// into slabs stays within the process's budget however many caches are
// prefaulted and never closed: a cache that finds less than
// minPrefaultBytes left prefaults nothing, one that finds some gets what
// is left, and released reserves give the budget back.
func TestArenaPrefaultBudget(t *testing.T) {
	if !mmapBlocks {
		t.Skip("block buffers are on the Go heap on this platform")
	}
	saved := prefaultBudget.Load()
	prefaultBudget.Store(5 << 20)
	defer prefaultBudget.Store(saved)
	var caches []*Cache
	defer func() {
		for _, c := range caches {
			c.blocks.arena.releaseAll()
		}
	}()
	var reserved []int64
	for range 4 {
		c := NewCache(2 << 20)
		c.Prefault()
		c.blocks.arena.alloc(100)
		caches = append(caches, c)
		reserved = append(reserved, c.Metrics().MappedBytes)
	}
	slab := int64(arenaSlabFor(arenaClassBytes(arenaClassOf(100))))
	// 5 MiB: 2 MiB each for the first two (a slab cut from each is given
	// back), what is left for the third, nothing for the fourth.
	want := []int64{2 << 20, 2 << 20, 1<<20 + 2*slab, slab}
	for i := range want {
		if reserved[i] != want[i] {
			t.Fatalf("caches prefaulted %v bytes, want %v", reserved, want)
		}
	}
	if left := prefaultBudget.Load(); left != slab {
		t.Fatalf("%d bytes of budget left, want %d", left, slab)
	}
	caches[0].ReleaseReserve()
	caches[1].blocks.arena.releaseAll()
	if left := prefaultBudget.Load(); left != slab+2*(2<<20-slab) {
		t.Fatalf("%d bytes of budget left after two releases, want %d", left, slab+2*(2<<20-slab))
	}
}

// TestArenaBorrowsLargerFreeBuffer checks that a buffer whose class has
// no free chunk and could only be carved from memory not resident takes
// a resident free chunk of one of the next two classes (which keeps its
// class: freeing it puts it back there), that it takes none further up,
// and none while a resident slab or reserve could serve the class.
func TestArenaBorrowsLargerFreeBuffer(t *testing.T) {
	if !mmapBlocks {
		t.Skip("block buffers are on the Go heap on this platform: nothing to fault in")
	}
	if arenaClassBytes(arenaClassOf(3000)) != 3072 || arenaClassBytes(arenaClassOf(3000)+2) != 6144 {
		t.Fatal("the test's sizes no longer fit the classes")
	}
	a := &blockArena{mmap: true}
	defer a.releaseAll()
	big := a.alloc(6000) // class 6144, two classes above 3072's
	for i := range big {
		big[i] = 5
	}
	a.free(big)
	b := a.alloc(3000)
	if unsafe.SliceData(b) != unsafe.SliceData(big) || len(b) != 3000 || cap(b) != 6144 {
		t.Fatalf("alloc(3000) did not take the free 6144-byte buffer: len %d cap %d", len(b), cap(b))
	}
	if a.inUse() != 6144 || a.borrowed.Load() != 1 {
		t.Fatalf("%d bytes in use, %d borrowed, want 6144 and 1", a.inUse(), a.borrowed.Load())
	}
	a.free(b)
	if again := a.alloc(6000); unsafe.SliceData(again) != unsafe.SliceData(big) {
		t.Fatal("a borrowed buffer did not go back to its own class")
	} else {
		a.free(again)
	}
	if a.inUse() != 0 {
		t.Fatalf("%d bytes in use after everything was freed", a.inUse())
	}

	// Three classes up is too far.
	far := a.alloc(8000)
	a.free(far)
	a.alloc(6000) // takes big back, so only far is free above
	if b := a.alloc(2000); unsafe.SliceData(b) == unsafe.SliceData(far) {
		t.Fatal("alloc(2000) took a buffer four classes above its own")
	}

	// With a prefaulted reserve left, the class is carved from it instead.
	c := NewCache(4 << 20)
	defer c.blocks.arena.releaseAll()
	c.Prefault()
	ca := c.blocks.arena
	big2 := ca.alloc(6000)
	ca.free(big2)
	if b := ca.alloc(3000); unsafe.SliceData(b) == unsafe.SliceData(big2) || cap(b) != 3072 {
		t.Fatalf("alloc(3000) borrowed (cap %d) while the reserve had room", cap(b))
	}
}

// TestPrefaultNow checks that PrefaultNow maps and faults in the reserve
// before any buffer is asked for, and that the first buffer is cut from
// it without mapping anything more.
func TestPrefaultNow(t *testing.T) {
	if !mmapBlocks {
		t.Skip("block buffers are on the Go heap on this platform: nothing to prefault")
	}
	const capacity = 2 << 20
	c := NewCache(capacity)
	a := c.blocks.arena
	defer a.releaseAll()
	if n := c.PrefaultNow(); n != capacity {
		t.Fatalf("PrefaultNow faulted in %d bytes, want %d", n, capacity)
	}
	if m := c.Metrics(); m.MappedBytes != capacity || m.ReservedBytes != capacity {
		t.Fatalf("after PrefaultNow: %+v, want the capacity mapped and reserved", m)
	}
	a.free(a.alloc(5000))
	if m := c.Metrics(); m.MappedBytes != capacity {
		t.Fatalf("the first buffer mapped more than the reserve: %+v", m)
	}
	if n := c.PrefaultNow(); n != 0 {
		t.Fatalf("a second PrefaultNow faulted in %d bytes", n)
	}
}
