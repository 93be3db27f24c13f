package sstable

import (
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"unsafe"
)

// threadMinorFaults is the calling thread's minor page faults so far.
func threadMinorFaults(t *testing.T) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	return ru.Minflt
}

// TestPrefaultedCacheReadsWithoutFaults is the regression test for cold
// reads paying page faults while the cache fills: every block a cold read
// caches goes into fresh memory, whose pages (6 for a 24 KiB buffer)
// fault in on first use, unless the cache was prefaulted. It reads every
// partition of a table once on one OS thread and counts that thread's
// minor faults.
func TestPrefaultedCacheReadsWithoutFaults(t *testing.T) {
	if !mmapBlocks {
		t.Skip("block buffers are on the Go heap on this platform")
	}
	parts := make([]testPartition, 0, 200)
	rng := rand.New(rand.NewPCG(13, 13))
	for i := range cap(parts) {
		parts = append(parts, eventPartition(rng, []byte{byte('a' + i/26), byte('a' + i%26)}, 60))
	}
	f, props := writeTable(t, parts, WriterOptions{Compression: CompressionS2, BlockSize: 16 << 10})
	for _, prefault := range []bool{false, true} {
		cache := NewCache(64 << 20)
		if prefault {
			cache.Prefault()
			// The first buffer maps and faults in the reserve: not
			// counted, it is a once-per-cache cost.
			cache.blocks.arena.free(cache.blocks.arena.alloc(64))
		}
		r := openTable(t, f, cache)
		infos := make([]PartitionInfo, len(parts))
		for i, p := range parts {
			infos[i], _ = r.Partition(p.key)
		}
		runtime.GC()
		runtime.LockOSThread()
		before := threadMinorFaults(t)
		for _, info := range infos {
			it := r.NewPartitionIter(info, IterOptions{})
			for it.Next() {
			}
			if err := it.Err(); err != nil {
				t.Fatal(err)
			}
			it.Close()
		}
		faults := threadMinorFaults(t) - before
		runtime.UnlockOSThread()
		m := cache.Metrics()
		if prefault && m.MappedBytes < 64<<20 {
			t.Fatalf("prefaulted cache mapped only %d bytes", m.MappedBytes)
		}
		perBlock := float64(faults) / float64(m.Blocks)
		t.Logf("prefault %v: %d blocks (%d in the file), %d bytes in use, %d page faults (%.2f a block)", prefault, m.Blocks, props.DataBlocks, m.InUseBytes, faults, perBlock)
		if m.Blocks < 100 {
			t.Fatalf("only %d blocks cached: the test reads too little", m.Blocks)
		}
		if prefault && perBlock > 0.5 {
			t.Errorf("a prefaulted cache took %.2f page faults per cold block read, want almost none", perBlock)
		}
		if !prefault && perBlock < 1 {
			t.Errorf("a lazy cache took %.2f page faults per cold block read: the test no longer sees fresh memory", perBlock)
		}
		cache.blocks.arena.releaseAll()
	}
}

// TestReleaseReserveUnmaps checks that ReleaseReserve unmaps the unused
// rest of the reserve (the mapping is gone, not just counted so: partial
// unmaps through syscall.Munmap fail silently, as it takes only whole
// mappings it made) and releaseAll the rest.
func TestReleaseReserveUnmaps(t *testing.T) {
	c := NewCache(4 << 20)
	a := c.blocks.arena
	defer a.releaseAll()
	c.Prefault()
	a.alloc(1000)
	if len(a.resv) == 0 {
		t.Fatal("nothing prefaulted")
	}
	whole := a.resv[:len(a.resv):len(a.resv)]
	cut := a.resvCut
	if !pagesMapped(t, whole) {
		t.Fatal("the reserve is not mapped")
	}
	if n := c.ReleaseReserve(); n != int64(len(whole)-cut) {
		t.Fatalf("ReleaseReserve released %d bytes, want %d", n, len(whole)-cut)
	}
	if pagesMapped(t, whole[cut:]) {
		t.Fatal("the released rest of the reserve is still mapped")
	}
	if !pagesMapped(t, whole[:cut]) {
		t.Fatal("the slab cut from the reserve was unmapped with the rest")
	}
	a.releaseAll()
	if pagesMapped(t, whole[:cut]) {
		t.Fatal("the reserve's slab is still mapped after releaseAll")
	}
}

// pagesMapped reports whether the whole pages of b are mapped: mincore
// fails with ENOMEM for a range that is not.
func pagesMapped(t *testing.T, b []byte) bool {
	vec := make([]byte, (len(b)+pageBytes-1)/pageBytes)
	_, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(unsafe.Pointer(unsafe.SliceData(vec))))
	switch errno {
	case 0:
		return true
	case syscall.ENOMEM:
		return false
	}
	t.Fatalf("mincore: %v", errno)
	return false
}
