package storage

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestSliceNoCacheFill: a slice with NoCacheFill returns the same rows as
// one without, uses the blocks the cache already holds, and adds none it
// reads from an SSTable, data blocks and index pages alike; the same
// slice without it fills the cache. Its
// blocks go back to the arena when it closes (poisoned here, so a row
// kept from them would show).
func TestSliceNoCacheFill(t *testing.T) {
	db := openTestDBIn(t, t.TempDir(), &fakeClock{now: time.Unix(1_800_000_000, 0)}, func(o *Options) {
		o.PoisonReleasedBlocks = true
	}, TableDef{Name: "t"})
	apply(t, db, func(b *Batch) { putMemoryTestRows(b, "p", 0, 5000) })
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	read := func(noFill bool) ([]string, ReadStats) {
		t.Helper()
		it, err := db.Slice(context.Background(), SliceQuery{Table: "t", Partition: []byte("p"), NoCacheFill: noFill})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for it.Next() {
			keys = append(keys, string(it.Row().Clustering))
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		return keys, it.Stats()
	}
	cached := func() int64 { return db.Metrics().BlockCacheBytes }
	noFill, st := read(true)
	if len(noFill) != 5000 || noFill[0] != "ck00000000" || noFill[4999] != fmt.Sprintf("ck%08d", 4999) {
		t.Fatalf("NoCacheFill slice read %d rows (%q .. %q), want ck00000000 .. ck00004999", len(noFill), noFill[0], noFill[len(noFill)-1])
	}
	if st.BlocksRead < 2 {
		t.Fatalf("the slice read %d blocks; the test needs several", st.BlocksRead)
	}
	if got := cached(); got != 0 {
		t.Fatalf("a NoCacheFill slice of %d blocks left %d bytes (data blocks or index pages) in the empty cache", st.BlocksRead, got)
	}
	before := cached()
	filled, _ := read(false)
	if !slices.Equal(filled, noFill) {
		t.Fatal("the slices with and without NoCacheFill returned different rows")
	}
	full := cached()
	if full <= before {
		t.Fatalf("a slice without NoCacheFill left the cache at %d bytes (before %d): the test cannot tell the two apart", full, before)
	}
	// Now cached, the blocks serve a NoCacheFill slice too.
	hits := db.Metrics().BlockCacheHits
	if again, _ := read(true); !slices.Equal(again, noFill) || db.Metrics().BlockCacheHits == hits {
		t.Fatalf("a NoCacheFill slice over cached blocks: %d rows, %d cache hits", len(again), db.Metrics().BlockCacheHits-hits)
	}
	if got := cached(); got != full {
		t.Fatalf("a NoCacheFill slice over cached blocks changed the cache from %d to %d bytes", full, got)
	}
}
