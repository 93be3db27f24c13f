package memtable

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/eventide/eventide/storage/internal/base"
)

// benchmarkEvents fills memtables with events shaped like the peers'
// workload: 1,000 partitions, 8-byte clustering keys ascending per
// partition, one 100-byte value each.
func benchmarkFill(m *Memtable, n int) {
	value := make([]byte, 100)
	c := base.Cell{Column: []byte("v"), Kind: base.KindLive, LocalDeletionTime: base.NoDeletionTime, Value: value}
	var ck [8]byte
	for i := 0; i < n; i++ {
		pk := []byte(fmt.Sprintf("user-%04d", i%1000))
		binary.BigEndian.PutUint64(ck[:], uint64(i))
		c.Clustering = ck[:]
		c.Timestamp = int64(i)
		m.ApplyCell(1, pk, &c)
	}
}

// BenchmarkApplyCell measures inserts and reports the GC's share: the
// memtable holding pointers per entry makes every GC cycle scan it.
func BenchmarkApplyCell(b *testing.B) {
	const perMemtable = 200_000
	b.ReportAllocs()
	b.SetBytes(100)
	var gcBefore runtime.MemStats
	runtime.ReadMemStats(&gcBefore)
	start := time.Now()
	for done := 0; done < b.N; done += perMemtable {
		m := New()
		benchmarkFill(m, min(perMemtable, b.N-done))
	}
	var gcAfter runtime.MemStats
	runtime.ReadMemStats(&gcAfter)
	b.ReportMetric(float64(gcAfter.PauseTotalNs-gcBefore.PauseTotalNs)/float64(time.Since(start).Nanoseconds())*100, "%gc-pause")
}

// BenchmarkLatest50 reads the newest 50 cells of a partition, the
// latest-50 query: a reverse read.
func BenchmarkLatest50(b *testing.B) {
	for _, reverse := range []bool{false, true} {
		b.Run(fmt.Sprintf("reverse=%v", reverse), func(b *testing.B) {
			m := New()
			benchmarkFill(m, 200_000)
			pk := []byte("user-0042")
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				it := m.NewIter(1, pk, base.Unbounded, base.Unbounded, reverse)
				for n := 0; n < 50 && it.Next(); n++ {
				}
			}
		})
	}
}

// BenchmarkApplyCellEvents inserts cells shaped like loadtest/peers'
// events: 20 partitions (event types of one hour) taken at random, each
// partition's TimeUUID clustering keys DESC (every new key of a partition
// before the ones it holds), 200-byte values.
func BenchmarkApplyCellEvents(b *testing.B) { benchApplyCellEvents(b, 100_000, false) }

// fillJittered fills m with n cells as BenchmarkApplyCellEventsJittered
// inserts them.
func fillJittered(m *Memtable, n int) { fillEvents(m, 0, n, true) }

// fillEvents applies n cells shaped like loadtest/peers' events to m, the
// from-th to the (from+n-1)-th of the sequence: 20 partitions (event
// types of one hour) taken at random, each partition's TimeUUID clustering
// keys DESC, 200-byte values. With jitter, each key is events 100 apart
// jittered by up to +-2,400 (+-1.2 gaps of a partition), as the peers'
// event times are, so many a key goes inside its partition's run;
// without, every new key of a partition sorts before the ones it holds.
func fillEvents(m *Memtable, from, n int, jitter bool) {
	value := make([]byte, 200)
	c := base.Cell{Column: []byte("data"), Kind: base.KindLive, LocalDeletionTime: base.NoDeletionTime, Value: value}
	var pks [20][]byte
	for i := range pks {
		pks[i] = fmt.Appendf(nil, "01112610|type%02d", i)
	}
	var ck [16]byte
	rng := uint64(from + 1)
	for i := range n {
		rng = rng*6364136223846793005 + 1442695040888963407
		t := uint64(from + i)
		if jitter {
			t = t*100 + rng>>40%4800
		}
		binary.BigEndian.PutUint64(ck[:], ^t)
		binary.BigEndian.PutUint64(ck[8:], rng)
		c.Clustering = ck[:]
		c.Timestamp = int64(i)
		m.ApplyCell(1, pks[rng>>59%20], &c)
	}
}

// BenchmarkTableIter walks a 250,000-cell memtable filled in the peers'
// insert order, as a flush does (one op: one cell), and reports the
// value bytes it read so the walk cannot be optimised away.
func BenchmarkTableIter(b *testing.B) {
	const cells = 250_000
	m := New()
	fillJittered(m, cells)
	b.ResetTimer()
	var sum int
	for done := 0; done < b.N; done += cells {
		it := m.NewTableIter(1)
		for n := 0; n < min(cells, b.N-done) && it.Next(); n++ {
			sum += len(it.Cell().Value) + len(it.Partition())
		}
	}
	b.ReportMetric(float64(sum)/float64(b.N), "bytes/cell")
}

// BenchmarkApplyCellEventsJittered is BenchmarkApplyCellEvents with
// loadtest/peers' event times: each key jittered by about the gap between
// two events of its partition either way, so many an event is older than
// its partition's newest and goes inside the partition's run.
func BenchmarkApplyCellEventsJittered(b *testing.B) {
	benchApplyCellEvents(b, 250_000, true) // about a 64 MiB memtable of these cells
}

// benchApplyCellEvents inserts b.N event cells (fillEvents), into a new
// memtable every perMemtable; one op is one cell.
func benchApplyCellEvents(b *testing.B, perMemtable int, jitter bool) {
	b.ReportAllocs()
	b.SetBytes(200)
	for done := 0; done < b.N; done += perMemtable {
		fillEvents(New(), done, min(perMemtable, b.N-done), jitter)
	}
}

// BenchmarkApplyCellRows inserts writer-shaped rows:
// BenchmarkApplyCellEventsJittered's events, each a row of three cells
// applied in a writer's order (data of 200 bytes, user, author:
// catalog.EventRowBuilder), into a new memtable every 50,000 rows (about
// 50 MiB of arena, unmapped as the next one starts, so the process does
// not grow). One op is one row (an event).
func BenchmarkApplyCellRows(b *testing.B) {
	const perMemtable = 50_000
	b.ReportAllocs()
	data := make([]byte, 200)
	cols := [3][]byte{[]byte("data"), []byte("user"), []byte("author")}
	vals := [3][]byte{data, []byte("user-00042"), []byte("author-0007")}
	var pks [20][]byte
	for i := range pks {
		pks[i] = fmt.Appendf(nil, "01112610|type%02d", i)
	}
	var m *Memtable
	var ck [16]byte
	rng := uint64(1)
	for i := range b.N {
		if i%perMemtable == 0 {
			if m != nil {
				m.Unref()
			}
			m = New()
			m.Ref()
		}
		rng = rng*6364136223846793005 + 1442695040888963407
		t := uint64(i)*100 + rng>>40%4800
		binary.BigEndian.PutUint64(ck[:], ^t)
		binary.BigEndian.PutUint64(ck[8:], rng)
		pk := pks[rng>>59%20]
		for j := range cols {
			c := base.Cell{Clustering: ck[:], Column: cols[j], Kind: base.KindExpiring, TTL: 604800,
				Timestamp: int64(i / 280), LocalDeletionTime: int64(i/280) + 604800, Value: vals[j]}
			m.ApplyCell(1, pk, &c)
		}
	}
	if m != nil {
		m.Unref()
	}
}
