package sstable

import (
	"encoding/binary"
	"testing"

	"github.com/eventide/eventide/storage/internal/base"
)

// TestRangeCache checks that a partition with many row tombstones is
// looked up the same from the cache as decoded, that a partition with few
// is not cached, and that closing the reader returns the budget.
func TestRangeCache(t *testing.T) {
	many := liveDel()
	for i := 0; i < 3*minCachedRanges; i++ {
		k := binary.BigEndian.AppendUint64(nil, uint64(i))
		many.Ranges = append(many.Ranges, base.RangeTombstone{Start: base.Bound{Key: k, Inclusive: true}, End: base.Bound{Key: k, Inclusive: true},
			Deletion: base.DeletionTime{MarkedForDeleteAt: int64(i), LocalDeletionTime: 7}})
	}
	few := liveDel()
	few.Ranges = many.Ranges[:2]
	parts := []testPartition{{key: []byte("few"), del: few}, {key: []byte("many"), del: many}}
	f, _ := writeTable(t, parts, DefaultWriterOptions())
	cache := NewCache(1 << 20)
	budget := cache.rangeBudget.Load()
	r := openTable(t, f, cache)
	for round := 0; round < 2; round++ {
		for _, p := range parts {
			info, ok := r.Partition(p.key)
			if !ok || !deletionsEqual(info.Deletions, p.del) || string(info.Key) != string(p.key) {
				t.Fatalf("round %d: Partition(%s) = %+v, %v", round, p.key, info, ok)
			}
		}
	}
	cached := 0
	r.ranges.entries.Range(func(any, any) bool { cached++; return true })
	if cached != 1 {
		t.Fatalf("%d partitions cached, want 1 (the one with many ranges)", cached)
	}
	if used := budget - cache.rangeBudget.Load(); used != int64(len(many.Ranges))*rangeTombstoneCost {
		t.Fatalf("budget used %d, want %d", used, int64(len(many.Ranges))*rangeTombstoneCost)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := cache.rangeBudget.Load(); got != budget {
		t.Fatalf("budget after Close = %d, want %d", got, budget)
	}
	// Without budget left, lookups still work, uncached.
	cache.rangeBudget.Store(0)
	r = openTable(t, f, cache)
	defer r.Close()
	if info, ok := r.Partition([]byte("many")); !ok || !deletionsEqual(info.Deletions, many) {
		t.Fatal("lookup without budget differs")
	}
	if cache.rangeBudget.Load() != 0 {
		t.Fatal("a lookup without budget took some")
	}
}
