package memtable

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventide/eventide/storage/internal/base"
)

// waitForMapped runs the garbage collector until *mapped is want, or fails
// after a deadline: cleanups run on their own goroutine after the cycle
// that found the skiplist unreachable.
func waitForMapped(t *testing.T, mapped *atomic.Int64, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for mapped.Load() != want {
		if time.Now().After(deadline) {
			t.Fatalf("mapped arena bytes: got %d, want %d", mapped.Load(), want)
		}
		runtime.GC()
		runtime.Gosched()
	}
}

func fillMemtable(m *Memtable, cells int) {
	for i := range cells {
		c := base.Cell{Kind: base.KindLive, Clustering: fmt.Appendf(nil, "ck%08d", i), Column: []byte("data"),
			Value: fmt.Appendf(nil, "value of cell %d, long enough to need a few slabs", i), Timestamp: int64(i)}
		m.ApplyCell(1, fmt.Appendf(nil, "p%d", i%7), &c)
	}
}

// TestArenaReleasedWhenUnreachable checks that a memtable's slabs are
// mapped outside the Go heap, counted, and unmapped once nothing refers to
// the memtable or its iterators.
func TestArenaReleasedWhenUnreachable(t *testing.T) {
	if !mmapSlabs {
		t.Skip("slabs are on the Go heap on this platform")
	}
	var mapped atomic.Int64
	m := NewAccounted(&mapped)
	fillMemtable(m, 20000)
	if got := mapped.Load(); got < m.SizeBytes() {
		t.Fatalf("mapped %d bytes for a memtable holding %d", got, m.SizeBytes())
	}
	it := m.NewIter(1, []byte("p3"), base.Bound{}, base.Bound{}, false)
	m = nil
	// The iterator keeps the arena mapped: its cells must stay readable.
	for range 3 {
		runtime.GC()
	}
	n := 0
	for it.Next() {
		want := fmt.Sprintf("ck%08d", 3+7*n)
		if got := string(it.Cell().Clustering); got != want {
			t.Fatalf("cell %d: clustering %q, want %q", n, got, want)
		}
		n++
	}
	if n != (20000-3+6)/7 {
		t.Fatalf("read %d cells of partition p3, want %d", n, (20000-3+6)/7)
	}
	if mapped.Load() == 0 {
		t.Fatal("arena unmapped while an iterator held it")
	}
	runtime.KeepAlive(it)
	waitForMapped(t, &mapped, 0)
}

// TestSpareSlab: after a full-size slab is mapped, the next one is
// prepared off the writer (mapped and its pages touched) and served to the
// writer's next full-size request, zeroed; a spare never taken is unmapped
// with the rest, and one still being prepared at release is unmapped by
// its goroutine.
func TestSpareSlab(t *testing.T) {
	if !mmapSlabs {
		t.Skip("slabs are on the Go heap on this platform")
	}
	var mapped atomic.Int64
	a := &slabs{account: &mapped}
	first := a.byteSlab(prefaultSlabBytes)
	first[0] = 1
	waitForSpare := func() []byte {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			a.mu.Lock()
			spare := a.spare
			a.mu.Unlock()
			if spare != nil {
				return spare
			}
			if time.Now().After(deadline) {
				t.Fatal("no spare slab prepared after a full-size one was mapped")
			}
			runtime.Gosched()
		}
	}
	spare := waitForSpare()
	if got := mapped.Load(); got != 2*prefaultSlabBytes {
		t.Fatalf("mapped %d bytes with one slab and a spare, want %d", got, 2*prefaultSlabBytes)
	}
	second := a.byteSlab(prefaultSlabBytes)
	if &second[0] != &spare[0] || a.spareHits.Load() != 1 {
		t.Fatalf("the second full-size slab was not the spare (%d spare hits)", a.spareHits.Load())
	}
	for i, c := range second {
		if c != 0 {
			t.Fatalf("spare slab byte %d is %d, want zero", i, c)
		}
	}
	waitForSpare() // prepared after the second was taken
	a.release()
	if got := mapped.Load(); got != 0 {
		t.Fatalf("mapped %d bytes after release, want 0 (the untaken spare too)", got)
	}

	// A release while the spare is being prepared.
	var mapped2 atomic.Int64
	b := &slabs{account: &mapped2}
	b.byteSlab(prefaultSlabBytes)
	b.release()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		preparing, spare := b.preparing, b.spare
		b.mu.Unlock()
		if !preparing {
			if spare != nil || mapped2.Load() != 0 {
				t.Fatalf("after a release during preparation: spare kept %v, %d bytes mapped", spare != nil, mapped2.Load())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("spare preparation never ended")
		}
		runtime.Gosched()
	}
}
