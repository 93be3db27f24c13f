package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/eventide/eventide/internal/cputime"
)

// BenchmarkWindowSlice reads a forward slice over 10% of one partition of
// 520 event rows (JSON values, as loadtest/peers writes them), bounded on
// both sides, after a flush and a full compaction (zstd): the issue 15
// "10% window slice". "cached" reads partitions whose blocks are all in
// the block cache; "cold" cycles through more partitions than a 1 MiB
// cache holds, so nearly every query loads its block from the file. Run
// with:
//
//	go test ./storage -run '^$' -bench WindowSlice -benchtime 2s
func BenchmarkWindowSlice(b *testing.B) {
	const rows, window = 520, 52
	for _, mode := range []string{"cached", "cold"} {
		b.Run(mode, func(b *testing.B) {
			db, partitions := openSliceBenchDB(b, mode, nil)
			rng := rand.New(rand.NewPCG(1, 2))
			now := time.Now().UnixMicro()
			var batch Batch
			for p := range partitions {
				pk := []byte("p" + strconv.Itoa(p))
				for i := range rows {
					batch.Put("t", pk, benchDeleteKey(i), []byte("data"), benchEventJSON(rng, i), now)
				}
				if err := db.Apply(context.Background(), &batch); err != nil {
					b.Fatal(err)
				}
				batch.Reset()
			}
			if err := db.Flush(); err != nil {
				b.Fatal(err)
			}
			if err := db.CompactAll(); err != nil {
				b.Fatal(err)
			}
			tableBytes := int64(0)
			for _, t := range db.Metrics().Tables {
				tableBytes += t.Bytes
			}
			var got, queries int
			cpu0 := int64(cputime.MustProcess(b.Fatal))
			for b.Loop() {
				p := queries % partitions
				first := rng.IntN(rows - window)
				// Keys sort newest first: row first+window-1 .. row first.
				q := SliceQuery{Table: "t", Partition: []byte("p" + strconv.Itoa(p)),
					Start: Bound{Key: benchDeleteKey(first + window - 1), Inclusive: true},
					End:   Bound{Key: benchDeleteKey(first), Inclusive: true}}
				it, err := db.Slice(context.Background(), q)
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for it.Next() {
					n += len(it.Row().Cells)
				}
				if err := it.Close(); err != nil {
					b.Fatal(err)
				}
				if n != window {
					b.Fatalf("read %d rows, want %d", n, window)
				}
				got += n
				queries++
			}
			b.ReportMetric(float64(got)/b.Elapsed().Seconds(), "rows/s")
			// CPU time per query: on a shared machine, steadier than
			// the wall time per query.
			b.ReportMetric(float64(int64(cputime.MustProcess(b.Fatal))-cpu0)/float64(queries), "cpu-ns/op")
			b.ReportMetric(float64(tableBytes)/float64(partitions*rows), "bytes/event")
		})
	}
}

// benchEventJSON is an event payload of about 200 bytes shaped as
// loadtest/peers' (the same keys in every value, varying scalars).
func benchEventJSON(rng *rand.Rand, i int) []byte {
	return fmt.Appendf(nil, `{"id":"%016x","seq":%d,"user":"u%06d","kind":"click","ok":%t,"score":%.3f,"path":"/p/%d/item/%d","ua":"Mozilla/5.0 (X11; Linux x86_64)","ts":%d}`,
		rng.Uint64(), i, rng.IntN(1000000), rng.IntN(2) == 0, rng.Float64()*100, rng.IntN(50), rng.IntN(10000), 1700000000000+int64(i)*7)
}

// openSliceBenchDB opens the store of a read benchmark with one table "t",
// no automatic compaction and periodic WAL syncs: in mode "cached" with
// the default cache and 8 partitions to fill, in mode "cold" with a 1 MiB
// cache and 200 partitions, so that most reads miss it. clock, if not
// nil, is the engine's clock.
func openSliceBenchDB(b *testing.B, mode string, clock Clock) (*DB, int) {
	b.Helper()
	partitions := 8
	if mode == "cold" {
		partitions = 200
	}
	return openBenchDBWith(b, func(opts *Options) {
		if clock != nil {
			opts.Clock = clock
		}
		if mode == "cold" {
			opts.BlockCacheSize = 1 << 20
		}
	}), partitions
}
