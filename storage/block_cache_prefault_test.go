package storage

import (
	"runtime"
	"testing"
	"time"
)

// TestBlockCachePrefault checks Options.LazyBlockCacheMemory's wiring: by
// default Open maps and faults in the block cache's whole capacity, so
// that no read pays for it (the cold reads that follow decode into
// resident memory; the sstable package's
// TestPrefaultedCacheReadsWithoutFaults counts their page faults), and
// Close unmaps what no block used; with the option set, the cache maps
// only what its blocks take.
func TestBlockCachePrefault(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the block cache is prefaulted on Linux only")
	}
	const capacity = 8 << 20
	read := func(lazy bool) (opened, open, closed int64, reserved int64) {
		db := openTestDBIn(t, t.TempDir(), &fakeClock{now: time.Unix(1_800_000_000, 0)}, func(o *Options) {
			o.BlockCacheSize = capacity
			o.LazyBlockCacheMemory = lazy
		}, TableDef{Name: "t"})
		opened = db.Metrics().BlockCacheMappedBytes
		apply(t, db, func(b *Batch) {
			b.Put("t", []byte("p"), []byte("c"), []byte("v"), []byte("value"), 1)
		})
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		if rows, _ := readAll(t, db, SliceQuery{Table: "t", Partition: []byte("p")}); len(rows) != 1 {
			t.Fatalf("read %d rows, want 1", len(rows))
		}
		m := db.Metrics()
		reserved = db.cache.Metrics().ReservedBytes
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		return opened, m.BlockCacheMappedBytes, db.cache.Metrics().MappedBytes, reserved
	}
	// The process's budget of unused prefaulted memory may be held by
	// stores other tests dropped without closing them until a collection
	// finds them unreachable: retry after collections for a while.
	deadline := time.Now().Add(10 * time.Second)
	var opened, open, closed, reserved int64
	for {
		opened, open, closed, reserved = read(false)
		if opened >= capacity || time.Now().After(deadline) {
			break
		}
		runtime.GC()
	}
	if opened < capacity {
		t.Fatalf("by default Open left the cache with %d bytes mapped, want its capacity %d faulted in before any read", opened, capacity)
	}
	if open < capacity || reserved < capacity*3/4 {
		t.Fatalf("by default the cache mapped %d bytes (%d unused) after its first block, want its capacity %d", open, reserved, capacity)
	}
	if closed > 1<<20 {
		t.Fatalf("after Close the cache still maps %d bytes", closed)
	}
	opened, open, _, reserved = read(true)
	if opened != 0 || open > 1<<20 || reserved != 0 {
		t.Fatalf("with LazyBlockCacheMemory the cache mapped %d bytes at Open and %d (%d reserved) for one block", opened, open, reserved)
	}
}
