package sstable

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/eventide/eventide/storage/internal/base"
)

// TestRecycledBlocksNeverReuseHeldBuffers keeps cells of an open iterator
// (uncloned) while other iterators evict and recycle many blocks through a
// small cache, then checks the held cells are intact: a block must not be
// recycled while an iterator or the cache still references it.
func TestRecycledBlocksNeverReuseHeldBuffers(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var parts []testPartition
	for i := 0; i < 6; i++ {
		parts = append(parts, eventPartition(rng, fmt.Appendf(nil, "p%d", i), 1500))
	}
	for _, comp := range allCompressions {
		for _, cacheBytes := range []int64{0, 96 << 10, 64 << 20} {
			t.Run(fmt.Sprintf("%v/cache-%d", comp, cacheBytes), func(t *testing.T) {
				f, _ := writeTable(t, parts, WriterOptions{Compression: comp})
				var cache *Cache
				if cacheBytes > 0 {
					cache = NewCache(cacheBytes)
				}
				r := openTable(t, f, cache)
				info := func(p int) PartitionInfo {
					i, ok := r.Partition(parts[p].key)
					if !ok {
						t.Fatalf("partition %d missing", p)
					}
					return i
				}
				// The held iterator reads partition 0 halfway, twice over
				// (the second pass hits the cache when there is one).
				var held []*PartitionIter
				var got [][]base.Cell
				for pass := 0; pass < 2; pass++ {
					it := r.NewPartitionIter(info(0), IterOptions{})
					var cells []base.Cell
					for len(cells) < 750 && it.Next() {
						cells = append(cells, *it.Cell()) // not cloned
					}
					held, got = append(held, it), append(got, cells)
				}
				// Others read everything else, several times, and close.
				for round := 0; round < 3; round++ {
					for p := 1; p < len(parts); p++ {
						it := r.NewPartitionIter(info(p), IterOptions{Reverse: round%2 == 1})
						for it.Next() {
						}
						if it.Err() != nil {
							t.Fatal(it.Err())
						}
						it.Close()
					}
				}
				for i, cells := range got {
					if d := diffCells(cells, parts[0].cells[:750]); d != "" {
						t.Fatalf("held iterator %d: %s", i, d)
					}
					held[i].Close()
				}
				// Closing twice must not release twice.
				held[0].Close()
				it := r.NewPartitionIter(info(0), IterOptions{})
				if d := diffCells(collect(t, it), parts[0].cells); d != "" {
					t.Fatalf("after recycling: %s", d)
				}
				it.Close()
			})
		}
	}
}

// TestUncachedReadsRecycleBlocks checks that, with blocks released by
// their iterators, a stream of cache misses reuses the buffers of evicted
// blocks instead of allocating a new block's worth of memory each time.
func TestUncachedReadsRecycleBlocks(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops pooled items at random")
	}
	rng := rand.New(rand.NewPCG(8, 8))
	var parts []testPartition
	for i := 0; i < 40; i++ {
		parts = append(parts, eventPartition(rng, fmt.Appendf(nil, "p%02d", i), 300))
	}
	// 32 KiB blocks without a dictionary (version 4's default): the
	// bound below is one compressed block, and smaller blocks are smaller
	// than the allocations an iterator makes besides its buffers.
	f, props := writeTable(t, parts, WriterOptions{Compression: CompressionZstd, BlockSize: 32 << 10, NoDictionary: true})
	// Room for a few blocks only: nearly every read misses.
	cache := NewCache(4 * (props.DataBytes / props.DataBlocks) * 3)
	r := openTable(t, f, cache)
	read := func(p int) {
		info, _ := r.Partition(parts[p].key)
		it := r.NewPartitionIter(info, IterOptions{})
		for n := 0; n < 50 && it.Next(); n++ {
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
		it.Close()
	}
	for p := range parts {
		read(p)
	}
	const reads = 400
	misses := cache.Metrics().Misses
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < reads; i++ {
		read((i * 7) % len(parts))
	}
	runtime.ReadMemStats(&after)
	missed := cache.Metrics().Misses - misses
	if missed < reads/2 {
		t.Fatalf("only %d of %d reads missed the cache; the test needs misses", missed, reads)
	}
	perMiss := float64(after.TotalAlloc-before.TotalAlloc) / float64(missed)
	rawPerBlock := float64(props.DataBytes) / float64(props.DataBlocks) // compressed: well below a block's decoded size
	if perMiss > rawPerBlock {
		t.Errorf("an uncached read allocates %.0f bytes, want less than one compressed block (%.0f): buffers are not recycled", perMiss, rawPerBlock)
	}
	t.Logf("%d misses, %.0f bytes allocated per miss", missed, perMiss)
}

// TestBlockReadKeysOffHeap checks that reading a data block from the file
// does not allocate its expanded row keys on the Go heap: they are
// expanded into a pooled buffer and copied into the block's arena memory
// (they used to be a fresh Go allocation per block read, ~16 bytes a row).
func TestBlockReadKeysOffHeap(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocations")
	}
	rng := rand.New(rand.NewPCG(61, 62))
	p := eventPartition(rng, []byte("p"), 4000)
	for _, comp := range []Compression{CompressionS2, CompressionZstd} {
		f, _ := writeTable(t, []testPartition{p}, WriterOptions{Compression: comp, NoDictionary: true})
		r := openTable(t, f, NewCache(32<<20))
		info, ok := r.Partition(p.key)
		if !ok {
			t.Fatal("partition missing")
		}
		load := func() int {
			rows := 0
			for i := info.firstBlock; i < info.firstBlock+info.numBlocks; i++ {
				b, err := r.loadBlock(info.pg, i, fromDisk)
				if err != nil {
					t.Fatal(err)
				}
				rows += b.len()
				b.release()
			}
			return rows
		}
		load() // fills the pools
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const rounds = 5
		rows := 0
		for range rounds {
			rows += load()
		}
		runtime.ReadMemStats(&after)
		r.Close()
		perRow := float64(after.TotalAlloc-before.TotalAlloc) / float64(rows)
		t.Logf("%s: %.1f bytes allocated per row read from the file", comp, perRow)
		// The keys alone are 16 bytes a row.
		if perRow >= 8 {
			t.Fatalf("%s: reading blocks allocates %.1f bytes per row, want under 8 (row keys off the Go heap)", comp, perRow)
		}
	}
}

// TestFirstReadOfAFileRecyclesFrames checks that the buffer a compressed
// block is read into is recycled across files: the first uncached read of
// a file the process has not read before takes the frame buffer another
// file's read left (it used to come from a pool per Reader, empty for a
// file not read yet, so every file's first read allocated a compressed
// block's worth).
func TestFirstReadOfAFileRecyclesFrames(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops pooled items at random")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	cache := NewCache(64 << 20)
	const files = 24
	var readers []*Reader
	var keys [][]byte
	var framePerBlock float64
	for i := range files {
		key := fmt.Appendf(nil, "p%02d", i)
		f, props := writeTable(t, []testPartition{eventPartition(rng, key, 300)},
			WriterOptions{Compression: CompressionZstd, BlockSize: 32 << 10, NoDictionary: true})
		r, err := Open(&memFile{data: f.data}, fmt.Sprintf("%06d.sst", i+1), uint64(i+1), cache)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		readers, keys = append(readers, r), append(keys, key)
		framePerBlock = float64(props.DataBytes) / float64(props.DataBlocks)
	}
	read := func(i int) {
		info, _ := readers[i].Partition(keys[i])
		it := readers[i].NewPartitionIter(info, IterOptions{})
		for n := 0; n < 50 && it.Next(); n++ {
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
		it.Close()
	}
	// One P and no collection while measuring: a sync.Pool's last Put
	// sits in its P's private slot, which a Get on another P cannot take
	// (the goroutine moving between Ps under load allocated a frame now
	// and then: the test failed with 2,551 bytes per file against a
	// bound of 4,524), and a collection empties the pool.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	read(0) // one frame buffer into the pool
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 1; i < files; i++ {
		read(i)
	}
	runtime.ReadMemStats(&after)
	perFile := float64(after.TotalAlloc-before.TotalAlloc) / float64(files-1)
	t.Logf("%.0f bytes allocated per first read of a file (a compressed block is %.0f)", perFile, framePerBlock)
	if perFile > framePerBlock/2 {
		t.Errorf("the first read of a file allocates %.0f bytes, want well under a compressed block (%.0f): frame buffers are not shared by readers", perFile, framePerBlock)
	}
}
