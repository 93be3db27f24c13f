package storage

import (
	"encoding/binary"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// TestCompactionStreamsPartitions: a compaction writes a partition's
// surviving cells as the merge yields them, so the memory it needs does
// not grow with the partition's size: compacting a partition twice as
// large raises the heap's peak by the same amount (a fixed cost: block
// buffers, encoders). It used to copy every cell of a partition into one
// growing buffer before writing any, so compacting the hour partition of
// a hot event type held all of it, twice over while the buffer grew: at
// 20,000 events/s the all-in-one's peak RSS was 150 MiB higher.
func TestCompactionStreamsPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 36 MiB")
	}
	const small, valueSize = 48_000, 256 // 12 MiB of values, then 24
	a := compactionHeapGrowth(t, small, valueSize)
	b := compactionHeapGrowth(t, 2*small, valueSize)
	t.Logf("peak heap above the start while compacting one partition: %.1f MiB for %d MiB of values, %.1f MiB for %d MiB",
		float64(a)/(1<<20), small*valueSize>>20, float64(b)/(1<<20), 2*small*valueSize>>20)
	if limit := int64(small * valueSize / 2); b-a > limit {
		t.Errorf("a partition %d MiB larger raised the compaction's peak heap by %.1f MiB more, want under %d MiB: it should stream the partition, not hold it",
			small*valueSize>>20, float64(b-a)/(1<<20), limit>>20)
	}
}

// compactionHeapGrowth writes one partition of cells values of
// valueSize bytes into four SSTables, compacts them, and returns how far
// the heap rose above its start during the compaction. A GC target just
// above the live heap makes the heap track what is live; a sampler
// records its peak.
func compactionHeapGrowth(t *testing.T, cells, valueSize int) int64 {
	t.Helper()
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	db := openTestDB(t, clock, TableDef{Name: "t"})
	value := make([]byte, valueSize)
	for i := range value {
		value[i] = byte(i * 7) // not all one byte: compresses a little, not to nothing
	}
	for part := 0; part < 4; part++ { // four SSTables holding the partition
		for start := part; start < cells; start += 4 * 1000 {
			apply(t, db, func(b *Batch) {
				for i := start; i < min(start+4*1000, cells); i += 4 {
					ck := binary.BigEndian.AppendUint64(nil, uint64(i))
					binary.BigEndian.PutUint64(value, uint64(i))
					b.Put("t", []byte("p"), ck, []byte("v"), value, 1)
				}
			})
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	base := m.HeapAlloc
	stop, sampled := make(chan struct{}), make(chan uint64)
	go func() {
		var peak uint64
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-stop:
				sampled <- peak
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	err := db.Compact("t")
	close(stop)
	peak := <-sampled
	if err != nil {
		t.Fatal(err)
	}
	return int64(peak) - int64(base)
}
