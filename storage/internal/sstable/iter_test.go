package sstable

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/eventide/eventide/storage/internal/base"
)

var seedFlag = flag.Uint64("seed", 0, "seed for the randomized tests (0 = time-based)")

func testSeed(t *testing.T) uint64 {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("reproduce with: go test ./storage/internal/sstable -run '%s' -seed %d", t.Name(), seed)
		}
	})
	return seed
}

// bruteForce filters cells to [start, end] and orders them for the
// direction.
func bruteForce(cells []base.Cell, start, end base.Bound, reverse bool) []base.Cell {
	var out []base.Cell
	for _, c := range cells {
		if base.InRange(c.Clustering, start, end) {
			out = append(out, c)
		}
	}
	if reverse {
		slices.Reverse(out)
	}
	return out
}

// randomBound picks an unbounded, inclusive or exclusive bound on a key
// that is present, absent between two present keys, or outside the range.
func randomBound(rng *rand.Rand, cells []base.Cell) base.Bound {
	if rng.IntN(5) == 0 || len(cells) == 0 {
		return base.Unbounded
	}
	k := slices.Clone(cells[rng.IntN(len(cells))].Clustering)
	switch rng.IntN(4) {
	case 0: // just after a present key: absent
		k = append(k, 0)
	case 1: // before everything
		k = []byte{}
	case 2: // after everything
		k = bytes.Repeat([]byte{0xff}, 17)
	}
	return base.Bound{Key: k, Inclusive: rng.IntN(2) == 0}
}

func TestIterBoundsRandomized(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	for round := 0; round < 6; round++ {
		comp := allCompressions[round%len(allCompressions)]
		blockSize := []int{200, 700, 4096}[rng.IntN(3)]
		parts := randomTable(rng, 6, 300)
		f, _ := writeTable(t, parts, WriterOptions{Compression: comp, BlockSize: blockSize})
		var cache *Cache
		if round%2 == 0 {
			cache = NewCache(64 << 10)
		}
		r := openTable(t, f, cache)
		for _, p := range parts {
			info, ok := r.Partition(p.key)
			if !ok {
				t.Fatalf("partition %x missing", p.key)
			}
			for q := 0; q < 60; q++ {
				start, end := randomBound(rng, p.cells), randomBound(rng, p.cells)
				for _, reverse := range []bool{false, true} {
					got := collect(t, r.NewPartitionIter(info, IterOptions{Start: start, End: end, Reverse: reverse}))
					want := bruteForce(p.cells, start, end, reverse)
					if d := diffCells(got, want); d != "" {
						t.Fatalf("round %d %v block %d partition %x [%v %x, %v %x] reverse=%v: %s",
							round, comp, blockSize, p.key, start.Inclusive, start.Key, end.Inclusive, end.Key, reverse, d)
					}
				}
			}
		}
	}
}

// TestIterBoundCombinations walks every combination of unbounded,
// inclusive and exclusive bounds on fixed keys, both directions.
func TestIterBoundCombinations(t *testing.T) {
	var cells []base.Cell
	for i := 0; i < 40; i++ {
		ck := []byte(fmt.Sprintf("k%02d", i*2)) // even keys present, odd absent
		cells = append(cells, cell(string(ck), "a", base.KindLive, int64(i), "v"), cell(string(ck), "b", base.KindTombstone, int64(i), ""))
	}
	parts := []testPartition{{key: []byte("p"), del: liveDel(), cells: cells}}
	f, _ := writeTable(t, parts, WriterOptions{BlockSize: 128, Compression: CompressionZstd})
	r := openTable(t, f, nil)
	info, _ := r.Partition([]byte("p"))
	keys := []string{"", "k00", "k01", "k10", "k11", "k40", "k78", "k79", "z"}
	var bounds []base.Bound
	bounds = append(bounds, base.Unbounded)
	for _, k := range keys {
		bounds = append(bounds, base.Bound{Key: []byte(k), Inclusive: true}, base.Bound{Key: []byte(k), Inclusive: false})
	}
	for _, start := range bounds {
		for _, end := range bounds {
			for _, reverse := range []bool{false, true} {
				name := fmt.Sprintf("start=%q/%v end=%q/%v reverse=%v", start.Key, start.Inclusive, end.Key, end.Inclusive, reverse)
				got := collect(t, r.NewPartitionIter(info, IterOptions{Start: start, End: end, Reverse: reverse}))
				if d := diffCells(got, bruteForce(cells, start, end, reverse)); d != "" {
					t.Errorf("%s: %s", name, d)
				}
			}
		}
	}
}

func TestSkipBlock(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 7))
	// One cell per row, so blocks hold disjoint clustering ranges.
	p := testPartition{key: []byte("p"), del: liveDel()}
	for i := 0; i < 2000; i++ {
		p.cells = append(p.cells, cell(string(timeUUIDKey(uint64(i*3), 1)), "data", base.KindExpiring, int64(i)*1000, string(randomValue(rng, 30))))
	}
	f, _ := writeTable(t, []testPartition{p}, WriterOptions{BlockSize: 512, Compression: CompressionS2})
	r := openTable(t, f, NewCache(1<<20))
	info, _ := r.Partition(p.key)
	for q := 0; q < 50; q++ {
		start, end := randomBound(rng, p.cells), randomBound(rng, p.cells)
		reverse := rng.IntN(2) == 0
		var skipped []BlockMeta
		var offered int
		it := r.NewPartitionIter(info, IterOptions{Start: start, End: end, Reverse: reverse, SkipBlock: func(m BlockMeta) bool {
			offered++
			if m.Cells <= 0 || m.MinTimestamp > m.MaxTimestamp || m.MaxLocalDeletionTime == base.NoDeletionTime {
				t.Errorf("SkipBlock got a bad BlockMeta %+v", m)
			}
			if rng.IntN(3) == 0 {
				skipped = append(skipped, BlockMeta{MinClustering: slices.Clone(m.MinClustering), MaxClustering: slices.Clone(m.MaxClustering)})
				return true
			}
			return false
		}})
		got := collect(t, it)
		var want []base.Cell
		for _, c := range bruteForce(p.cells, start, end, reverse) {
			if !slices.ContainsFunc(skipped, func(m BlockMeta) bool {
				return bytes.Compare(c.Clustering, m.MinClustering) >= 0 && bytes.Compare(c.Clustering, m.MaxClustering) <= 0
			}) {
				want = append(want, c)
			}
		}
		if d := diffCells(got, want); d != "" {
			t.Fatalf("query %d: %s", q, d)
		}
		if it.BlocksSkipped() != len(skipped) || it.BlocksRead()+it.BlocksSkipped() != offered {
			t.Fatalf("query %d: read %d skipped %d, SkipBlock offered %d and skipped %d", q, it.BlocksRead(), it.BlocksSkipped(), offered, len(skipped))
		}
		// Only blocks overlapping the bounds may be offered.
		all := bruteForce(p.cells, start, end, false)
		if maxBlocks := len(all)/5 + 3; offered > maxBlocks && len(all) < len(p.cells) {
			// A 512-byte block holds well over 5 of these cells.
			t.Fatalf("query %d: %d blocks offered for %d cells in range", q, offered, len(all))
		}
	}
}

// TestLatestReadsOneBlock checks the main read of the workload: the first
// 50 cells of a big partition decode a single block, its head block (of
// at most headBlockSize bytes). The last 50 cells,
// read in reverse, take one block or two when the last block is short.
func TestLatestReadsOneBlock(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	parts := []testPartition{eventPartition(rng, []byte("01012415|click"), 5000)}
	for _, comp := range allCompressions {
		f, _ := writeTable(t, parts, WriterOptions{Compression: comp})
		r := openTable(t, f, NewCache(8<<20))
		info, _ := r.Partition(parts[0].key)
		for _, reverse := range []bool{false, true} {
			it := r.NewPartitionIter(info, IterOptions{Reverse: reverse})
			for i := 0; i < 50 && it.Next(); i++ {
			}
			want := 1
			if reverse {
				want = 2
			}
			if it.Err() != nil || it.BlocksRead() > want {
				t.Errorf("%v reverse=%v: first 50 cells read %d blocks (err %v), want at most %d", comp, reverse, it.BlocksRead(), it.Err(), want)
			}
			it.Close()
		}
		head, next := info.pg.blocks.handle(info.firstBlock), info.pg.blocks.handle(info.firstBlock+1)
		if head.meta.Cells < 50 || head.meta.Cells > next.meta.Cells*11/10 {
			t.Errorf("%v: head block of %d cells, next %d: want at least 50 and at most as many", comp, head.meta.Cells, next.meta.Cells)
		}
		// Starting in the middle reads one or two blocks.
		mid := parts[0].cells[2500].Clustering
		it := r.NewPartitionIter(info, IterOptions{Start: base.Bound{Key: mid, Inclusive: true}})
		for i := 0; i < 50 && it.Next(); i++ {
		}
		if it.BlocksRead() > 2 {
			t.Errorf("%v: 50 cells from the middle read %d blocks, want <= 2", comp, it.BlocksRead())
		}
	}
}

func TestIterAllocations(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	parts := []testPartition{eventPartition(rng, []byte("p"), 2000)}
	f, _ := writeTable(t, parts, WriterOptions{Compression: CompressionZstd})
	r := openTable(t, f, NewCache(64<<20))
	info, _ := r.Partition(parts[0].key)
	collect(t, r.NewPartitionIter(info, IterOptions{})) // warm the cache
	allocs := testing.AllocsPerRun(10, func() {
		it := r.NewPartitionIter(info, IterOptions{})
		n := 0
		for it.Next() {
			n++
		}
		if n != len(parts[0].cells) {
			t.Fatalf("got %d cells", n)
		}
	})
	if allocs > 5 {
		t.Errorf("a cached full-partition iteration allocates %.0f times, want a constant handful", allocs)
	}
}

func TestCache(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	parts := []testPartition{eventPartition(rng, []byte("p"), 3000)}
	f, props := writeTable(t, parts, WriterOptions{Compression: CompressionZstd})
	t.Run("bounded", func(t *testing.T) {
		c := NewCache(256 << 10)
		r := openTable(t, f, c)
		info, _ := r.Partition(parts[0].key)
		collect(t, r.NewPartitionIter(info, IterOptions{}))
		m := c.Metrics()
		if m.Bytes > m.Capacity || m.Blocks == 0 || m.Blocks >= props.DataBlocks {
			t.Fatalf("metrics %+v for %d blocks", m, props.DataBlocks)
		}
		// The newest blocks are cached: reading the end again hits.
		before := c.Metrics()
		collect(t, r.NewPartitionIter(info, IterOptions{Reverse: true, End: base.Bound{Key: parts[0].cells[2990].Clustering, Inclusive: true}}))
		if after := c.Metrics(); after.Hits == before.Hits {
			t.Fatalf("re-reading the last block did not hit the cache: %+v -> %+v", before, after)
		}
	})
	t.Run("scanner does not fill", func(t *testing.T) {
		c := NewCache(64 << 20)
		r := openTable(t, f, c)
		s := r.NewScanner()
		for s.NextPartition() {
			for s.NextCell() {
			}
		}
		if m := c.Metrics(); m.Blocks != 0 {
			t.Fatalf("scanner filled the cache: %+v", m)
		}
	})
	t.Run("nil", func(t *testing.T) {
		var c *Cache
		if m := c.Metrics(); m != (CacheMetrics{}) {
			t.Fatalf("nil cache metrics %+v", m)
		}
		r := openTable(t, f, nil)
		info, _ := r.Partition(parts[0].key)
		if d := diffCells(collect(t, r.NewPartitionIter(info, IterOptions{})), parts[0].cells); d != "" {
			t.Fatal(d)
		}
	})
	t.Run("blocks outlive the buffers they were read into", func(t *testing.T) {
		// Cells alias their block, and a block stored uncompressed
		// aliases the buffer its frame was read into: reading more
		// blocks must never reuse that buffer.
		for _, comp := range allCompressions {
			f, _ := writeTable(t, parts, WriterOptions{Compression: comp})
			for _, cache := range []*Cache{nil, NewCache(64 << 20)} {
				r := openTable(t, f, cache)
				info, _ := r.Partition(parts[0].key)
				var got []base.Cell
				it := r.NewPartitionIter(info, IterOptions{})
				for it.Next() {
					got = append(got, *it.Cell()) // not cloned
				}
				if d := diffCells(got, parts[0].cells); d != "" || it.Err() != nil {
					t.Errorf("%v, cache %v: %s %v", comp, cache != nil, d, it.Err())
				}
			}
		}
	})
	t.Run("concurrent readers", func(t *testing.T) {
		c := NewCache(128 << 10)
		r := openTable(t, f, c)
		info, _ := r.Partition(parts[0].key)
		var wg sync.WaitGroup
		errs := make(chan string, 8)
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(g), 1))
				for q := 0; q < 30; q++ {
					start := base.Bound{Key: parts[0].cells[rng.IntN(3000)].Clustering, Inclusive: true}
					it := r.NewPartitionIter(info, IterOptions{Start: start, Reverse: g%2 == 0})
					var got []base.Cell
					for it.Next() && len(got) < 100 {
						got = append(got, it.Cell().Clone())
					}
					want := bruteForce(parts[0].cells, start, base.Unbounded, g%2 == 0)
					want = want[:min(len(want), len(got))]
					if d := diffCells(got, want); d != "" || it.Err() != nil {
						errs <- fmt.Sprintf("goroutine %d: %s %v", g, d, it.Err())
						return
					}
				}
			}(g)
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	})
}

func TestPartitionIterForeignInfo(t *testing.T) {
	f, _ := writeTable(t, []testPartition{{key: []byte("p"), del: liveDel(), cells: []base.Cell{cell("a", "b", base.KindLive, 1, "v")}}}, WriterOptions{})
	r := openTable(t, f, nil)
	it := r.NewPartitionIter(PartitionInfo{firstBlock: 5, numBlocks: 2}, IterOptions{})
	if it.Next() || it.Err() == nil {
		t.Fatal("an out-of-range PartitionInfo iterated without error")
	}
	if it := r.NewPartitionIter(PartitionInfo{}, IterOptions{}); it.Next() || it.Err() != nil {
		t.Fatal("a zero PartitionInfo yielded cells or an error")
	}
}

// eventPartition makes a partition shaped like the workload: one "data"
// cell per event with a ~200-byte JSON value, TimeUUID-like clustering keys
// in order, close timestamps, one TTL.
func eventPartition(rng *rand.Rand, key []byte, events int) testPartition {
	p := testPartition{key: key, del: liveDel()}
	ts := int64(1_718_000_000_000_000)
	node := rng.Uint64()
	for i := 0; i < events; i++ {
		ts += 1000 + rng.Int64N(50000)
		ck := timeUUIDKey(uint64(ts*10), node)
		p.cells = append(p.cells, base.Cell{
			Clustering: ck, Column: []byte("data"), Kind: base.KindExpiring, Timestamp: ts,
			TTL: 7 * 86400, LocalDeletionTime: writeSecond(ts) + 7*86400 + rng.Int64N(2),
			Value: jsonEvent(rng, ts),
		})
	}
	return p
}

var (
	eventTypes = []string{"click", "view", "purchase", "signup", "login"}
	pages      = []string{"/", "/pricing", "/docs/getting-started", "/blog/launch", "/account/settings", "/checkout"}
	agents     = []string{"Mozilla/5.0 (X11; Linux x86_64)", "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5)", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5)"}
)

// jsonEvent is a ~200-byte JSON event with realistic entropy: ids, numbers
// and a few categorical fields.
func jsonEvent(rng *rand.Rand, ts int64) []byte {
	return fmt.Appendf(nil, `{"type":%q,"user_id":"u%07d","session":"%016x","page":%q,"ua":%q,"ts":%d,"amount":%d.%02d,"ok":%v}`,
		eventTypes[rng.IntN(len(eventTypes))], rng.IntN(2_000_000), rng.Uint64(), pages[rng.IntN(len(pages))],
		agents[rng.IntN(len(agents))], ts/1000, rng.IntN(500), rng.IntN(100), rng.IntN(10) != 0)
}
