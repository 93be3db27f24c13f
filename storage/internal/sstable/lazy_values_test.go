package sstable

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/eventide/eventide/storage/internal/base"
)

// lazyValuesPartition is a partition of JSON events in 32 KiB blocks of
// shaped values, with other kinds of values mixed in (more than one
// shape a block, and cells without a value), as the lazy rebuild has to
// handle them.
func lazyValuesPartition(rng *rand.Rand, mixed bool) testPartition {
	p := eventPartition(rng, []byte("p"), 900)
	if mixed {
		for i := range p.cells {
			switch c := &p.cells[i]; rng.IntN(8) {
			case 0:
				c.Value = fmt.Appendf(nil, `[%d,%d]`, rng.IntN(1000), rng.IntN(10))
			case 1:
				c.Value = []byte("not json \xff")
			case 2:
				c.Kind, c.Value, c.TTL = base.KindTombstone, nil, 0
				c.LocalDeletionTime = writeSecond(c.Timestamp)
			}
		}
	}
	return p
}

// TestLazyValues reads a bounded slice of every partition from the file,
// so that only the shaped values it returns are rebuilt, then, while it
// still holds its blocks and reads its cells again, the whole partition
// from the cache, which must rebuild the rest (lazyValues.complete) without
// touching what the first reader reads (under -race, the reads of the
// first and the writes of the completion are checked too).
func TestLazyValues(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 16))
	for _, tc := range []struct {
		name    string
		mixed   bool
		reverse bool
	}{
		{"events", false, false},
		{"events reverse", false, true},
		{"mixed values", true, false},
		{"mixed values reverse", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := lazyValuesPartition(rng, tc.mixed)
			f, _ := writeTable(t, []testPartition{p}, WriterOptions{Compression: CompressionZstd, BlockSize: 32 << 10})
			partial := 0
			for q := 0; q < 20; q++ {
				r := openTable(t, f, NewCache(64<<20))
				info, ok := r.Partition(p.key)
				if !ok {
					t.Fatal("partition missing")
				}
				i := rng.IntN(len(p.cells) - 1)
				j := i + 1 + rng.IntN(min(len(p.cells)-i-1, 300))
				start := base.Bound{Key: p.cells[i].Clustering, Inclusive: true}
				end := base.Bound{Key: p.cells[j].Clustering, Inclusive: rng.IntN(2) == 0}
				want := bruteForce(p.cells, start, end, tc.reverse)
				it := r.NewPartitionIter(info, IterOptions{Start: start, End: end, Reverse: tc.reverse})
				var got []base.Cell // aliasing the blocks, as it holds them
				for it.Next() {
					c := *it.Cell()
					got = append(got, c)
				}
				if err := it.Err(); err != nil {
					t.Fatal(err)
				}
				for _, b := range it.held {
					if b.lazy != nil {
						partial++
					}
				}
				if d := diffCells(got, want); d != "" {
					t.Fatalf("seed %d query %d, slice read from the file: %s", seed, q, d)
				}
				// Another reader takes the blocks from the cache while
				// the first reads its cells again.
				var done atomic.Bool
				var wg sync.WaitGroup
				var all []base.Cell
				wg.Go(func() {
					defer done.Store(true)
					whole := r.NewPartitionIter(info, IterOptions{})
					defer whole.Close()
					all = collect(t, whole)
				})
				for !done.Load() {
					if d := diffCells(got, want); d != "" {
						t.Errorf("seed %d query %d, slice while another reader completes its blocks: %s", seed, q, d)
						break
					}
				}
				wg.Wait()
				if d := diffCells(all, p.cells); d != "" {
					t.Fatalf("seed %d query %d, whole partition from the cache: %s", seed, q, d)
				}
				if d := diffCells(got, want); d != "" {
					t.Fatalf("seed %d query %d, slice after another reader completed its blocks: %s", seed, q, d)
				}
				it.Close()
			}
			if partial == 0 {
				t.Fatal("no block was read with only some of its values rebuilt")
			}
		})
	}
}
