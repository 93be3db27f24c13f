package storage

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/eventide/eventide/internal/cputime"
)

// BenchmarkExpiredRead reads every live cell of a partition of 520 event
// rows (JSON values, as loadtest/peers writes them) whose oldest 90% have
// expired by TTL, written by a compaction before they expired (zstd) and
// read before any compaction since: the issue 15 "90%-expired read". The newest rows sort first, so the read takes the
// partition's head block, whose last rows are expired, and skips the
// fully expired blocks unread. "cached" reads partitions whose blocks are
// all in the block cache; "cold" cycles through more partitions than a
// 1 MiB cache holds, so nearly every query loads its block from the file.
//
//	go test ./storage -run '^$' -bench ExpiredRead -benchmem
func BenchmarkExpiredRead(b *testing.B) {
	const rows, live, ttlSeconds = 520, 52, 1000
	for _, mode := range []string{"cached", "cold"} {
		b.Run(mode, func(b *testing.B) {
			start := time.Unix(1_800_000_000, 0)
			clock := &fakeClock{now: start}
			db, partitions := openSliceBenchDB(b, mode, clock)
			rng := rand.New(rand.NewPCG(3, 4))
			var batch Batch
			for p := range partitions {
				pk := []byte("p" + strconv.Itoa(p))
				for i := range rows {
					// Row i is written at start + i s and expires
					// at start + ttlSeconds + 2i s (every cell's
					// deletion time counts from the batch's "now",
					// start); keys sort newest first.
					ts := start.Add(time.Duration(i) * time.Second).UnixMicro()
					batch.PutTTL("t", pk, benchDeleteKey(i), []byte("data"), benchEventJSON(rng, i), ts, int32(ttlSeconds+2*i))
				}
				if err := db.Apply(context.Background(), &batch); err != nil {
					b.Fatal(err)
				}
				batch.Reset()
			}
			if err := db.Flush(); err != nil {
				b.Fatal(err)
			}
			// A compaction before anything expired writes the
			// long-lived form (zstd, shaped values), as most of
			// loadtest/peers' expiry store is.
			if err := db.CompactAll(); err != nil {
				b.Fatal(err)
			}
			// Rows 0..rows-live-1 have expired, the others have not.
			clock.Advance(time.Duration(ttlSeconds+2*(rows-live)-1) * time.Second)
			var queries int
			cpu0 := int64(cputime.MustProcess(b.Fatal))
			for b.Loop() {
				q := SliceQuery{Table: "t", Partition: []byte("p" + strconv.Itoa(queries%partitions))}
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
				if n != live {
					b.Fatalf("read %d live cells, want %d (%s)", n, live, it.Stats())
				}
				queries++
			}
			b.ReportMetric(float64(int64(cputime.MustProcess(b.Fatal))-cpu0)/float64(queries), "cpu-ns/op")
		})
	}
}
