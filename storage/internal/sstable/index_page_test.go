package sstable

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/eventide/eventide/storage/internal/base"
)

// manyPartitions is a table of n small partitions, as the fan-out's
// timelines are: enough for many index pages.
func manyPartitions(rng *rand.Rand, n int) []testPartition {
	parts := make([]testPartition, n)
	for i := range parts {
		parts[i] = randomPartition(rng, []byte(fmt.Sprintf("user-%08d|timeline", i*2)), 1+rng.IntN(3))
		if i%97 == 0 {
			parts[i].del = randomDeletions(rng)
		}
	}
	return parts
}

// TestIndexPages writes a file of many index pages and checks that every
// partition is found in its page, that keys between and around them are
// not, that scans cross pages, and that only the page index is resident.
func TestIndexPages(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 0))
	parts := manyPartitions(rng, 4000)
	for _, comp := range allCompressions {
		t.Run(comp.String(), func(t *testing.T) {
			f, _ := writeTable(t, parts, WriterOptions{Compression: comp})
			cache := NewCache(64 << 20)
			r := openTable(t, f, cache)
			defer r.Close()
			if len(r.top.pages) < 10 {
				t.Fatalf("%d index pages for %d partitions, want many", len(r.top.pages), len(parts))
			}
			if r.top.pages[0].resident != nil {
				t.Fatal("a version 4 file has a resident index")
			}
			// What stays resident is the page index: a key and a few
			// integers per page, not per partition.
			if resident := len(r.top.keys) + len(r.top.pages)*48; resident > len(parts)*8 {
				t.Fatalf("resident page index of %d bytes for %d partitions", resident, len(parts))
			}
			checkTable(t, r, parts, comp)
			for i, p := range parts {
				odd := []byte(fmt.Sprintf("user-%08d|timeline", i*2+1))
				if _, ok := r.Partition(odd); ok {
					t.Fatalf("found absent partition %q", odd)
				}
				if _, ok := r.Partition(append(bytes.Clone(p.key), 0)); ok {
					t.Fatalf("found absent partition %q+0", p.key)
				}
			}
			for _, k := range []string{"", "a", "user-", "zzz"} {
				if _, ok := r.Partition([]byte(k)); ok {
					t.Fatalf("found absent partition %q", k)
				}
			}
			if m := cache.Metrics(); m.Blocks < int64(len(r.top.pages)) {
				t.Fatalf("cache holds %d entries after reading all %d pages", m.Blocks, len(r.top.pages))
			}
			if err := r.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestIndexPageCorruption damages an index page: reading a partition in it
// fails with a corruption error (the checksum), the other pages still
// read, and Check reports it; a page damaged behind its checksum is
// rejected by the page's own validation.
func TestIndexPageCorruption(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 0))
	parts := manyPartitions(rng, 3000)
	f, _ := writeTable(t, parts, WriterOptions{Compression: CompressionNone})
	r := openTable(t, f, nil)
	ref := r.top.pages[3]
	victim, other := r.top.key(3), r.top.key(5)
	r.Close()
	for _, fixSum := range []bool{false, true} {
		data := bytes.Clone(f.data)
		// The first partition entry's suffix, past the length prefixes.
		data[ref.offset()+6] ^= 0x40
		if fixSum {
			payload := data[ref.offset() : ref.offset()+ref.storedLen]
			sum := blockChecksum(payload, CompressionNone)
			at := ref.offset() + ref.storedLen + 1
			data[at], data[at+1], data[at+2], data[at+3] = byte(sum), byte(sum>>8), byte(sum>>16), byte(sum>>24)
		}
		r, err := Open(&memFile{data: data}, corruptPath, 9, NewCache(1<<20))
		if err != nil {
			t.Fatalf("fixSum=%v: open read a page: %v", fixSum, err)
		}
		if _, _, err := r.FindPartition(victim); !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("fixSum=%v: FindPartition in the damaged page: got %v, want corruption", fixSum, err)
		}
		if _, ok, err := r.FindPartition(other); err != nil || !ok {
			t.Fatalf("fixSum=%v: FindPartition in another page: %v, %v", fixSum, ok, err)
		}
		if err := r.Check(); !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("fixSum=%v: Check: got %v, want corruption", fixSum, err)
		}
		s := r.NewScanner()
		for s.NextPartition() {
		}
		if !errors.Is(s.Err(), base.ErrCorruption) {
			t.Fatalf("fixSum=%v: scan: got %v, want corruption", fixSum, s.Err())
		}
		r.Close()
	}
}

// TestCacheKeepsIndexPages checks that data blocks are evicted before
// index pages, until the pages take more than half the capacity.
func TestCacheKeepsIndexPages(t *testing.T) {
	c := NewCache(100 << 10) // one shard
	page := func() *indexPage { return &indexPage{size: 10 << 10} }
	blk := func() *loadedBlock {
		b := &loadedBlock{block: &block{size: 10 << 10}}
		b.refs.Store(1)
		return b
	}
	for i := range 3 {
		c.addPage(1, uint64(i), page())
	}
	for i := range 50 {
		b := blk()
		c.add(1, 1000+uint64(i), b)
		b.release()
	}
	for i := range 3 {
		if c.getPage(1, uint64(i)) == nil {
			t.Fatalf("index page %d evicted by data blocks", i)
		}
	}
	if b := c.get(1, 1049); b == nil {
		t.Fatal("the newest data block is not cached")
	} else {
		b.release()
	}
	// Pages beyond half the capacity are evicted, oldest first.
	for i := 3; i < 20; i++ {
		c.addPage(1, uint64(i), page())
	}
	if c.getPage(1, 0) != nil || c.getPage(1, 19) == nil {
		t.Fatal("pages past half the capacity: want the oldest evicted, the newest kept")
	}
	if m := c.Metrics(); m.Bytes > m.Capacity {
		t.Fatalf("cache holds %d bytes, capacity %d", m.Bytes, m.Capacity)
	}
}

// TestScannerSmallBlocksAllocateLittle checks that compaction's scan of
// one-row partitions allocates about what their blocks hold: its blocks
// are never released, and giving each a pooled, rounded-up buffer cost
// ~2 KiB per partition (36 KiB buffers once the pool ran dry).
func TestScannerSmallBlocksAllocateLittle(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocations")
	}
	parts := oneRowPartitions(20000)
	f, _ := writeTable(t, parts, WriterOptions{Compression: CompressionS2})
	r := openTable(t, f, NewCache(32<<20))
	defer r.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s := r.NewScanner()
	n := 0
	for s.NextPartition() {
		for s.NextCell() {
			n++
		}
	}
	runtime.ReadMemStats(&after)
	if s.Err() != nil || n != len(parts) {
		t.Fatalf("scanned %d cells: %v", n, s.Err())
	}
	perPartition := float64(after.TotalAlloc-before.TotalAlloc) / float64(n)
	t.Logf("%.0f bytes allocated per one-row partition scanned", perPartition)
	if perPartition > 1024 {
		t.Fatalf("scanning allocates %.0f bytes per one-row partition, want at most 1024", perPartition)
	}
}

// TestReaderWithoutCacheKeepsPages checks that a reader without a cache
// keeps the pages its lookups read, instead of reading and validating a
// page again for every lookup.
func TestReaderWithoutCacheKeepsPages(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 0))
	parts := manyPartitions(rng, 2000)
	f, _ := writeTable(t, parts, WriterOptions{Compression: CompressionZstd})
	r := openTable(t, f, nil)
	defer r.Close()
	key := parts[1000].key
	first, ok := r.Partition(key)
	if !ok {
		t.Fatal("partition missing")
	}
	again, _ := r.Partition(key)
	if first.pg != again.pg {
		t.Fatal("a reader without a cache read the same index page twice")
	}
}

// TestOpenPinsIndexPages checks that a Reader with a cache reads and keeps
// every index page at Open when the cache's pinning budget has room, so
// that no lookup reads a page from the file; that the pinned bytes are
// counted against the cache's capacity and given back by Close; and that
// a file whose pages do not fit the budget is read on demand.
func TestOpenPinsIndexPages(t *testing.T) {
	rng := rand.New(rand.NewPCG(44, 0))
	parts := manyPartitions(rng, 3000)
	f, _ := writeTable(t, parts, WriterOptions{Compression: CompressionZstd})

	cache := NewCache(64 << 20)
	r := openTable(t, f, cache)
	if len(r.top.pages) < 10 {
		t.Fatalf("%d index pages, want many", len(r.top.pages))
	}
	pinned := r.PinnedIndexBytes()
	if pinned <= 0 {
		t.Fatal("a reader with room in its cache's budget pinned no index pages")
	}
	if m := cache.Metrics(); m.PinnedIndexBytes != pinned || m.Blocks != 0 {
		t.Fatalf("cache metrics: %d pinned bytes and %d entries, want %d and 0", m.PinnedIndexBytes, m.Blocks, pinned)
	}
	var raw int64
	for i := range r.top.pages {
		raw += int64(r.top.pages[i].rawLen)
	}
	if pinned < raw || pinned > 2*raw+int64(len(r.top.pages))*indexPageOverhead*2 {
		t.Fatalf("pinned %d bytes for %d bytes of decompressed pages", pinned, raw)
	}
	for _, p := range parts {
		info, ok, err := r.FindPartition(p.key)
		if err != nil || !ok {
			t.Fatalf("FindPartition(%q): %v, %v", p.key, ok, err)
		}
		if info.IndexPageRead() {
			t.Fatalf("FindPartition(%q) read its index page from the file", p.key)
		}
	}
	checkTable(t, r, parts, CompressionZstd)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if m := cache.Metrics(); m.PinnedIndexBytes != 0 {
		t.Fatalf("after Close the cache still counts %d pinned bytes", m.PinnedIndexBytes)
	}

	// Two readers share the budget: the second pins only if both fit.
	small := NewCache(pinned * pinnedIndexShare * 3 / 2)
	r1 := openTable(t, f, small)
	defer r1.Close()
	r2 := openTable(t, f, small)
	defer r2.Close()
	if r1.PinnedIndexBytes() == 0 || r2.PinnedIndexBytes() != 0 {
		t.Fatalf("budget for 1.5 files' pages: pinned %d and %d bytes, want the first file only", r1.PinnedIndexBytes(), r2.PinnedIndexBytes())
	}
	if m := small.Metrics(); m.PinnedIndexBytes > m.Capacity/pinnedIndexShare {
		t.Fatalf("%d bytes pinned, budget %d", m.PinnedIndexBytes, m.Capacity/pinnedIndexShare)
	}
	info, ok, err := r2.FindPartition(parts[1500].key)
	if err != nil || !ok || !info.IndexPageRead() {
		t.Fatalf("unpinned reader: FindPartition: %v, %v, read its page from the file %v; want found, from the file", ok, err, info.IndexPageRead())
	}
}

// TestPinnedPagesCheckReadsTheFile damages an index page after Open pinned
// it: lookups use the pinned copy, but Check still reads and verifies every
// page from the file.
func TestPinnedPagesCheckReadsTheFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 0))
	parts := manyPartitions(rng, 3000)
	f, _ := writeTable(t, parts, WriterOptions{Compression: CompressionNone})
	file := &memFile{data: bytes.Clone(f.data)}
	r, err := Open(file, corruptPath, 9, NewCache(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.PinnedIndexBytes() == 0 {
		t.Fatal("no pages pinned")
	}
	ref := r.top.pages[3]
	file.data[ref.offset()+6] ^= 0x40
	if _, ok, err := r.FindPartition(r.top.key(3)); err != nil || !ok {
		t.Fatalf("FindPartition in the pinned page: %v, %v", ok, err)
	}
	if err := r.Check(); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("Check: got %v, want corruption", err)
	}
}

// TestCacheCapacityLessPinned checks that pinned index pages are taken out
// of the cache's capacity: blocks are evicted down to the rest.
func TestCacheCapacityLessPinned(t *testing.T) {
	c := NewCache(160 << 10) // one shard
	budget := int64(160<<10) / pinnedIndexShare
	if !c.reservePin(budget - 100) {
		t.Fatal("a pin within the budget was refused")
	}
	if c.reservePin(200) {
		t.Fatal("a pin beyond the budget was granted")
	}
	for i := range 50 {
		b := &loadedBlock{block: &block{size: 5 << 10}}
		b.refs.Store(1)
		c.add(1, uint64(i), b)
		b.release()
	}
	if m := c.Metrics(); m.Bytes > m.Capacity-m.PinnedIndexBytes {
		t.Fatalf("cache holds %d bytes with %d pinned, capacity %d", m.Bytes, m.PinnedIndexBytes, m.Capacity)
	}
}
