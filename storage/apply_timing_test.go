package storage

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/eventide/eventide/internal/cputime"
)

// writerBatchShape is what a writer's batch holds at 40,000-70,000
// events/s (writer/batch.go, catalog.EventRowBuilder): events spread over
// 20 event types of one hour, each event a row of three cells (data of
// ~200 bytes, user, author) under a 16-byte TimeUUID key DESC, expiring;
// and per (type, minute) one counter in the counts table and one in the
// type-hours table.
const (
	writerBatchEvents = 280
	writerBatchTypes  = 20
)

// fillWriterBatch adds the events from..from+writerBatchEvents-1 to b as a
// writer does. Keys are new for every from (event times rise with it).
func fillWriterBatch(b *Batch, from int, arena []byte) []byte {
	arena = arena[:0]
	data := make([]byte, 200)
	type minuteKey struct{ typ, minute int }
	counts := map[minuteKey]int64{}
	var order []minuteKey
	rng := uint64(from + 1)
	writeMicros := int64(from) // one write time per batch, as the writer's
	for i := range writerBatchEvents {
		rng = rng*6364136223846793005 + 1442695040888963407
		typ := int(rng >> 59 % writerBatchTypes)
		t := uint64(from+i)*100 + rng>>40%4800 // the peers' jittered event times
		at := len(arena)
		arena = binary.BigEndian.AppendUint64(arena, ^t)
		arena = binary.BigEndian.AppendUint64(arena, rng)
		ck := arena[at:len(arena):len(arena)]
		partition := writerBatchPartitions[typ]
		b.PutTTL("events", partition, ck, []byte("data"), data, writeMicros, 7*24*3600)
		b.PutTTL("events", partition, ck, []byte("user"), []byte("user-00042"), writeMicros, 7*24*3600)
		b.PutTTL("events", partition, ck, []byte("author"), []byte("author-0007"), writeMicros, 7*24*3600)
		k := minuteKey{typ, int(t / 6_000_000)}
		if _, ok := counts[k]; !ok {
			order = append(order, k)
		}
		counts[k]++
	}
	for _, k := range order {
		ck := binary.BigEndian.AppendUint64(nil, uint64(k.minute))
		b.AddCounter("counts", writerBatchPartitions[k.typ], ck, []byte("count"), counts[k])
		b.AddCounter("type_hours", []byte("01112610"), []byte(fmt.Sprintf("type%02d", k.typ)), []byte("count"), counts[k])
	}
	return arena
}

var writerBatchPartitions = func() (p [writerBatchTypes][]byte) {
	for i := range p {
		p[i] = fmt.Appendf(nil, "01112610|type%02d", i)
	}
	return p
}()

// BenchmarkApplyWriterBatch applies writer-shaped batches (one op: one
// batch of writerBatchEvents events) with the WAL in periodic mode, so an
// op is the Apply's CPU on the benchmark's goroutine: the batch's resolve,
// its WAL record's encoding and write(2), and the memtable inserts. The
// batches are built with the timer stopped; the memtable is flushed, timer
// stopped, every 32 MiB so no background flush runs while it is timed.
// Besides wall time it reports the process's CPU time (user and system,
// getrusage) spent while timed, per event and per cell: on a shared
// machine wall time counts the waits for a CPU, and CPU time also counts
// the WAL's flusher writing the records on its own goroutine.
func BenchmarkApplyWriterBatch(b *testing.B) {
	opts := DefaultOptions()
	opts.DisableAutoCompaction = true
	opts.WALSyncMode = WALPeriodic
	opts.MemtableSize = 1 << 30
	db, err := Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for _, def := range []TableDef{{Name: "events"}, {Name: "counts", Counters: true}, {Name: "type_hours", Counters: true}} {
		if err := db.CreateTable(def); err != nil {
			b.Fatal(err)
		}
	}
	var batch Batch
	var arena []byte
	cells := 0
	var cpu int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		if db.mutable.SizeBytes() >= 32<<20 {
			if err := db.Flush(); err != nil {
				b.Fatal(err)
			}
		}
		batch.Reset()
		arena = fillWriterBatch(&batch, i*writerBatchEvents, arena)
		cells += batch.Len()
		cpuStart := int64(cputime.MustProcess(b.Fatal))
		b.StartTimer()
		if err := db.Apply(context.Background(), &batch); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += int64(cputime.MustProcess(b.Fatal)) - cpuStart
		b.StartTimer()
	}
	b.StopTimer()
	ns := float64(b.Elapsed().Nanoseconds())
	b.ReportMetric(ns/float64(b.N*writerBatchEvents), "ns/event")
	b.ReportMetric(float64(cpu)/float64(b.N*writerBatchEvents), "cpu-ns/event")
	b.ReportMetric(float64(cpu)/float64(cells), "cpu-ns/cell")
}
