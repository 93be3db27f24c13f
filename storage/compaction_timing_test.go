package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/internal/cputime"
	"github.com/eventide/eventide/storage/internal/sstable"
	"github.com/eventide/eventide/storage/vfs"
)

// activeWindowEvents writes flushes of events shaped as the all-in-one
// stores loadtest's event stream: 20 types with Zipf(1.1) weights, one
// hour partition per type ("ddmmyyhh|type"), TimeUUID DESC clustering
// keys, a "data" cell of a ~200-byte JSON object and a "user" cell,
// expiring 7 days after the event time, write timestamps of 5 ms batches. Each flush is a second of
// events at perFlush a second. With jitter, 5% of the events are up to 2 s
// older than their neighbours and 1% 1 to 90 minutes late (the harness's
// defaults), so a partition's flushes overlap in clustering order; without
// it every flush holds strictly newer rows of each partition.
type activeWindowEvents struct {
	rng    *rand.Rand
	zipf   *rand.Zipf
	jitter bool
	seq    int
	second int // flushes written so far
}

func newActiveWindowEvents(jitter bool) *activeWindowEvents {
	rng := rand.New(rand.NewPCG(12, 13))
	return &activeWindowEvents{rng: rng, zipf: rand.NewZipf(rng, 1.1, 1, 19), jitter: jitter}
}

// flush writes flushes more flushes of perFlush events to table.
func (g *activeWindowEvents) flush(b *testing.B, db *DB, clock *fakeClock, table string, flushes, perFlush int) {
	b.Helper()
	rng := g.rng
	start := time.Date(2026, 11, 24, 15, 0, 10, 0, time.UTC)
	var batch Batch
	data := make([]byte, 0, 512)
	const ttlSeconds = 7 * 24 * 3600
	for range flushes {
		f := g.second
		g.second++
		for i := range perFlush {
			seq := g.seq
			g.seq++
			intended := start.Add(time.Duration(f)*time.Second + time.Duration(i)*time.Second/time.Duration(perFlush))
			writeMicros := intended.Truncate(5 * time.Millisecond).Add(5 * time.Millisecond).UnixMicro()
			eventTime := intended
			if g.jitter {
				switch u := rng.Float64(); {
				case u < 0.01:
					eventTime = eventTime.Add(-time.Minute - time.Duration(rng.Float64()*float64(89*time.Minute)))
				case u < 0.06:
					eventTime = eventTime.Add(-time.Duration(rng.Float64() * float64(2*time.Second)))
				}
			}
			var node [8]byte
			for j := range node {
				node[j] = byte(rng.Uint32())
			}
			id, err := bucket.NewTimeUUID(eventTime, node)
			if err != nil {
				b.Fatal(err)
			}
			typ := fmt.Sprintf("type%02d", g.zipf.Uint64())
			pk, err := bucket.PartitionKeyFor(id, typ, 0)
			if err != nil {
				b.Fatal(err)
			}
			ck, err := schema.AppendEventKey(nil, id)
			if err != nil {
				b.Fatal(err)
			}
			size := int(min(max(200*rng.ExpFloat64()*0.5+100, 64), 4096))
			data = fmt.Appendf(append(data[:0], byte(bucket.TypeBlob)), `{"seq":%d,"pad":"`, seq)
			fill := byte('a' + rng.IntN(26))
			for len(data) < size {
				data = append(data, fill)
			}
			data = append(data, `"}`...)
			user := fmt.Appendf([]byte{byte(bucket.TypeText)}, "u%d", seq%10007)
			p := []byte(pk.String())
			// What is left of the TTL when the writer validates the
			// event, as writer/event.go computes it: the cells expire
			// at event time + TTL, each second its own expiry.
			remaining := int32((eventTime.Add(ttlSeconds*time.Second).Sub(time.UnixMicro(writeMicros)) + time.Second - 1) / time.Second)
			batch.PutTTL(table, p, ck, []byte("data"), data, writeMicros, remaining)
			batch.PutTTL(table, p, ck, []byte("user"), user, writeMicros, remaining)
			if batch.Len() >= 1000 {
				// The engine dates expiries from its clock at Apply, as
				// the all-in-one's does (its cells' expiries fall on
				// either side of a second boundary).
				clock.set(time.UnixMicro(writeMicros))
				if err := db.Apply(context.Background(), &batch); err != nil {
					b.Fatal(err)
				}
				batch.Reset()
			}
		}
		if batch.Len() > 0 {
			if err := db.Apply(context.Background(), &batch); err != nil {
				b.Fatal(err)
			}
			batch.Reset()
		}
		if err := db.Flush(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkActiveWindowMerge merges the S2 SSTables of a time window's
// active window into one S2 SSTable, as the all-in-one's size-tiered
// compactions of its active window do: "tier1" four flushes of a second of
// events at 38,000/s (about 1.3 MB each), "tier2" four merges of four such
// flushes each. "ordered" writes every flush strictly newer than the one
// before in each partition; "jittered" has the harness's out-of-order and
// late events. One op is one merge; cpu-ns/cell is the process's CPU per
// input cell, MB/s the inputs' bytes, copied/block the share of the
// inputs' data blocks the merge copied whole. Run with:
//
//	go test ./storage -run '^$' -bench ActiveWindowMerge -benchtime 20x
func BenchmarkActiveWindowMerge(b *testing.B) {
	for _, tier := range []int{1, 2, 8} {
		for _, jitter := range []bool{false, true} {
			name := fmt.Sprintf("tier%d/ordered", tier)
			if tier == 8 {
				name = "tier1-fanin8/ordered"
			}
			if jitter {
				name = strings.Replace(name, "ordered", "jittered", 1)
			}
			b.Run(name, func(b *testing.B) {
				clock := &fakeClock{now: time.Date(2026, 11, 24, 15, 0, 10, 0, time.UTC)}
				db := openBenchDBWith(b, func(o *Options) { o.Clock = clock })
				if err := db.CreateTable(TableDef{Name: "events", Compaction: TimeWindow, WindowSeconds: 3600}); err != nil {
					b.Fatal(err)
				}
				const perFlush = 38_000
				gen := newActiveWindowEvents(jitter)
				switch tier {
				case 1:
					gen.flush(b, db, clock, "events", 4, perFlush)
				case 8:
					gen.flush(b, db, clock, "events", 8, perFlush)
				default:
					merged := map[*sstHandle]bool{}
					for range 4 {
						gen.flush(b, db, clock, "events", 4, perFlush)
						merged[benchMergeFlushes(b, db, "events", merged)] = true
					}
				}
				c := benchActiveCompaction(b, db, "events")
				var inBytes, cells int64
				for _, h := range c.inputs {
					inBytes += h.size
					cells += h.props.Cells
				}
				dir := b.TempDir()
				b.SetBytes(inBytes)
				cpu0 := int64(cputime.MustProcess(b.Fatal))
				n := 0
				var outBytes int64
				var copied int
				blocks := int64(0)
				for _, h := range c.inputs {
					blocks += h.props.DataBlocks
				}
				for b.Loop() {
					path := filepath.Join(dir, fmt.Sprintf("%d.sst", n))
					f, err := vfs.Default.Create(path)
					if err != nil {
						b.Fatal(err)
					}
					w := sstable.NewWriter(f, shortLived.writerOptions(c.table.codec))
					cw := &countingCopier{Writer: w}
					if _, err := db.mergeInputs(c, cw); err != nil {
						b.Fatal(err)
					}
					if _, err := w.Finish(); err != nil {
						b.Fatal(err)
					}
					copied = cw.copied
					if fi, err := f.Stat(); err == nil {
						outBytes = fi.Size()
					}
					f.Close()
					if err := vfs.Default.Remove(path); err != nil {
						b.Fatal(err)
					}
					n++
				}
				b.ReportMetric(float64(int64(cputime.MustProcess(b.Fatal))-cpu0)/float64(int64(n)*cells), "cpu-ns/cell")
				b.ReportMetric(float64(inBytes)/float64(len(c.inputs)), "in-bytes/input")
				b.ReportMetric(float64(outBytes)/float64(inBytes), "out/in")
				b.ReportMetric(float64(copied)/float64(blocks), "copied/block")
			})
		}
	}
}

// benchActiveCompaction returns the compaction of every SSTable of table,
// as one of its time window's active window.
func benchActiveCompaction(b testing.TB, db *DB, table string) *compaction {
	b.Helper()
	db.mu.Lock()
	defer db.mu.Unlock()
	t, err := db.lookupTableLocked(table)
	if err != nil {
		b.Fatal(err)
	}
	in := append([]*sstHandle(nil), db.current.sstables[t.id]...)
	return &compaction{table: t, inputs: in, intermediate: true, reason: "bench"}
}

// benchMergeFlushes compacts the table's SSTables that are not in merged
// (its flushes since the last call) into one, as an active-window
// compaction does, and returns it.
func benchMergeFlushes(b *testing.B, db *DB, table string, merged map[*sstHandle]bool) *sstHandle {
	b.Helper()
	c := benchActiveCompaction(b, db, table)
	in := c.inputs[:0]
	for _, h := range c.inputs {
		if !merged[h] {
			in = append(in, h)
		}
	}
	c.inputs = in
	if err := db.compact(c); err != nil {
		b.Fatal(err)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	for _, h := range db.current.sstables[c.table.id] {
		if !merged[h] {
			return h
		}
	}
	b.Fatal("no merge output")
	return nil
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}
