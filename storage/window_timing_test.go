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
// 520 event rows (JSON values), bounded on
// both sides, after a flush and a full compaction (zstd): the issue 15
// "10% window slice". "cached" reads partitions whose blocks are all in
// the block cache; "cold" cycles through more partitions than a 1 MiB
// cache holds, so nearly every query loads its block from the file;
// "cold-peers" does the same with loadtest/peers' JSON and partition size
// (208 of 2,080 rows: about 2.3 blocks a query, as its window phase). Run
// with:
//
//	go test ./storage -run '^$' -bench WindowSlice -benchtime 2s
func BenchmarkWindowSlice(b *testing.B) {
	for _, mode := range []string{"cached", "cold", "cold-peers"} {
		b.Run(mode, func(b *testing.B) {
			rows, window, value := 520, 52, benchEventJSON
			if mode == "cold-peers" {
				rows, window, value = 2080, 208, peersEventJSON
			}
			db, partitions := openSliceBenchDB(b, mode, nil)
			rng := rand.New(rand.NewPCG(1, 2))
			now := time.Now().UnixMicro()
			var batch Batch
			for p := range partitions {
				pk := []byte("p" + strconv.Itoa(p))
				for i := range rows {
					batch.Put("t", pk, benchDeleteKey(i), []byte("data"), value(rng, i), now)
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
// peersEventJSON is an event of loadtest/peers' workload (its
// appendEventJSON): the JSON whose columns the window phase decodes.
func peersEventJSON(rng *rand.Rand, _ int) []byte {
	pages := [...]string{"/home", "/search", "/product", "/cart", "/checkout", "/account"}
	countries := [...]string{"us", "de", "fr", "jp", "br", "in"}
	devices := [...]string{"ios", "android", "web"}
	return fmt.Appendf(nil, `{"user":"u%06d","session":"s%08x","page":"%s/%d","referrer":"https://example.com/r/%d","ms":%d,"country":"%s","device":"%s","amount":%d.%02d,"ok":%t}`,
		rng.IntN(100000), rng.Uint32(), pages[rng.IntN(len(pages))], rng.IntN(5000), rng.IntN(300), rng.IntN(2000),
		countries[rng.IntN(len(countries))], devices[rng.IntN(len(devices))], rng.IntN(500), rng.IntN(100), rng.IntN(10) != 0)
}

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
	switch mode {
	case "cold":
		partitions = 200
	case "cold-peers":
		partitions = 50 // of 2,080 rows
	}
	return openBenchDBWith(b, func(opts *Options) {
		if clock != nil {
			opts.Clock = clock
		}
		if mode != "cached" {
			opts.BlockCacheSize = 1 << 20
		}
	}), partitions
}
