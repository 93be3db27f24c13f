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
