package sstable

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/eventide/eventide/storage/internal/base"
)

func TestArenaClasses(t *testing.T) {
	prev := 0
	for c := range arenaClasses {
		size := arenaClassBytes(c)
		if size <= prev || size%32 != 0 {
			t.Fatalf("class %d: %d bytes after %d, want ascending multiples of 32", c, size, prev)
		}
		for _, n := range []int{prev + 1, size} {
			if got := arenaClassOf(n); got != c {
				t.Fatalf("arenaClassOf(%d) = %d (%d bytes), want %d (%d bytes)", n, got, arenaClassBytes(got), c, size)
			}
		}
		if prev > 0 && size > prev*3/2+1 {
			t.Fatalf("class %d: %d bytes after %d wastes more than a third", c, size, prev)
		}
		prev = size
	}
	if prev != arenaMaxClassBytes {
		t.Fatalf("largest class %d bytes, want %d", prev, arenaMaxClassBytes)
	}
	if arenaClassOf(1) != 0 {
		t.Fatal("a 1-byte buffer is not in the smallest class")
	}
}

func TestArenaRecyclesAndPoisons(t *testing.T) {
	for _, mapped := range []bool{false, true} {
		t.Run(fmt.Sprintf("mmap=%v", mapped && mmapBlocks), func(t *testing.T) {
			a := &blockArena{mmap: mapped && mmapBlocks, poison: true}
			defer a.releaseAll()
			for _, n := range []int{1, 100, 5000, 40 << 10, arenaMaxClassBytes, arenaMaxClassBytes + 1, 1 << 20} {
				b := a.alloc(n)
				if len(b) != n || cap(b) < n {
					t.Fatalf("alloc(%d): len %d cap %d", n, len(b), cap(b))
				}
				for i := range b {
					b[i] = 1
				}
				if a.inUse() < int64(n) {
					t.Fatalf("alloc(%d): %d bytes in use", n, a.inUse())
				}
				full := b[:cap(b)]
				a.free(b)
				if a.inUse() != 0 {
					t.Fatalf("free(%d): %d bytes still in use", n, a.inUse())
				}
				if n > arenaMaxClassBytes {
					continue // large buffers go back to the OS (or the GC)
				}
				if want := bytes.Repeat([]byte{poisonByte}, len(full)); !bytes.Equal(full, want) {
					t.Fatalf("freed buffer of %d bytes not poisoned", n)
				}
				again := a.alloc(n)
				if &again[:1][0] != &full[0] {
					t.Fatalf("alloc(%d) after free did not reuse the freed buffer", n)
				}
				a.free(again)
			}
			if a.mapped.Load() <= 0 {
				t.Fatal("no slab counted as mapped")
			}
			// A large buffer still in use when the arena goes is
			// unmapped (or dropped) with it.
			a.alloc(arenaMaxClassBytes + 1)
			a.releaseAll()
			if got := a.mapped.Load(); got != 0 {
				t.Fatalf("%d bytes mapped after releaseAll", got)
			}
		})
	}
}

// TestCachedBlocksOffHeap fills a cache and checks that what it holds is in
// its arena, mapped outside the Go heap, rather than on the heap.
func TestCachedBlocksOffHeap(t *testing.T) {
	if !mmapBlocks {
		t.Skip("block buffers are on the Go heap on this platform")
	}
	rng := rand.New(rand.NewPCG(9, 9))
	var parts []testPartition
	for i := 0; i < 40; i++ {
		parts = append(parts, eventPartition(rng, fmt.Appendf(nil, "p%02d", i), 1000))
	}
	for _, comp := range allCompressions {
		t.Run(comp.String(), func(t *testing.T) {
			f, _ := writeTable(t, parts, WriterOptions{Compression: comp})
			cache := NewCache(64 << 20)
			r := openTable(t, f, cache)
			infos := make([]PartitionInfo, len(parts))
			for i, p := range parts {
				infos[i], _ = r.Partition(p.key)
			}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for _, info := range infos {
				it := r.NewPartitionIter(info, IterOptions{})
				for it.Next() {
				}
				if it.Err() != nil {
					t.Fatal(it.Err())
				}
				it.Close()
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			m := cache.Metrics()
			if m.Blocks == 0 || m.Bytes < 1<<20 {
				t.Fatalf("the cache holds too little for the test: %+v", m)
			}
			if m.InUseBytes > m.Bytes || m.InUseBytes < m.Bytes*3/4 {
				t.Fatalf("arena has %d bytes in use for %d bytes of cached blocks", m.InUseBytes, m.Bytes)
			}
			heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			if heap > m.Bytes/4 {
				t.Fatalf("filling the cache with %d bytes of blocks grew the live Go heap by %d bytes, want at most a quarter", m.Bytes, heap)
			}
			t.Logf("cache %d bytes in %d blocks, arena %d mapped, heap +%d", m.Bytes, m.Blocks, m.MappedBytes, heap)
			runtime.KeepAlive(r)
		})
	}
}

// TestScannerReleasesBlocks checks that a Scanner and Check give every block
// they read back to the arena, so that compaction's reads are recycled and
// leak nothing, and that a scanner's cells stay valid while the blocks
// they come from are held: the previous block's last cell is still intact
// (poisoning on) after the next block is loaded.
func TestScannerReleasesBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	var parts []testPartition
	for i := 0; i < 30; i++ {
		parts = append(parts, eventPartition(rng, fmt.Appendf(nil, "p%02d", i), 1+i*i*3))
	}
	for _, comp := range allCompressions {
		t.Run(comp.String(), func(t *testing.T) {
			f, props := writeTable(t, parts, WriterOptions{Compression: comp, BlockSize: 4 << 10})
			cache := NewCache(64 << 20)
			cache.PoisonReleased()
			r := openTable(t, f, cache)
			// Cache a few blocks, so that the scanner meets both cached
			// and uncached ones.
			for p := 0; p < len(parts); p += 3 {
				info, _ := r.Partition(parts[p].key)
				it := r.NewPartitionIter(info, IterOptions{})
				for it.Next() {
				}
				it.Close()
			}
			cachedInUse := cache.Metrics().InUseBytes
			s := r.NewScanner()
			p := 0
			var prev base.Cell
			for s.NextPartition() {
				var got []base.Cell
				for s.NextCell() {
					c := *s.Cell() // not cloned: valid until the block after next
					if len(got) > 0 && !cellsEqual(&prev, &got[len(got)-1]) {
						t.Fatalf("partition %d: the previous cell changed under the scanner", p)
					}
					got = append(got, c.Clone())
					prev = c
				}
				if d := diffCells(got, parts[p].cells); d != "" {
					t.Fatalf("partition %d: %s", p, d)
				}
				p++
			}
			if s.Err() != nil || p != len(parts) {
				t.Fatalf("scanned %d partitions, err %v", p, s.Err())
			}
			s.Close()
			s.Close()
			if got := cache.Metrics().InUseBytes; got != cachedInUse {
				t.Fatalf("after a scan of %d blocks the arena has %d bytes in use, want the cached blocks' %d", props.DataBlocks, got, cachedInUse)
			}
			if err := r.Check(); err != nil {
				t.Fatal(err)
			}
			if got := cache.Metrics().InUseBytes; got != cachedInUse {
				t.Fatalf("after Check the arena has %d bytes in use, want the cached blocks' %d", got, cachedInUse)
			}
		})
	}
}

// TestArenaDecommitsFreeBuffers checks that free buffers beyond retainFree
// are handed back to the OS (on Linux): they read as zeros when reused,
// and the arena counts no more than retainFree (plus one buffer) warm.
func TestArenaDecommitsFreeBuffers(t *testing.T) {
	if !mmapBlocks || runtime.GOOS != "linux" {
		t.Skip("free buffers are decommitted on Linux only")
	}
	const size, n, retain = 32 << 10, 64, 256 << 10
	a := &blockArena{mmap: true, retainFree: retain}
	defer a.releaseAll()
	var bufs [][]byte
	for range n {
		b := a.alloc(size)
		for i := range b {
			b[i] = 1
		}
		bufs = append(bufs, b)
	}
	for _, b := range bufs {
		a.free(b)
	}
	if w := a.warm.Load(); w > retain+size {
		t.Fatalf("%d bytes of free buffers warm, want at most %d", w, retain+size)
	}
	if a.inUse() != 0 {
		t.Fatalf("%d bytes in use after freeing everything", a.inUse())
	}
	zeroed := 0
	for range n {
		b := a.alloc(size)
		if b[0] == 0 && b[size-1] == 0 {
			zeroed++
		} else if b[0] != 1 {
			t.Fatalf("a reused warm buffer reads %#x, want its old bytes", b[0])
		}
	}
	if want := n - retain/size; zeroed < want-1 || zeroed > want {
		t.Fatalf("%d of %d reused buffers were decommitted, want about %d", zeroed, n, want)
	}
}
