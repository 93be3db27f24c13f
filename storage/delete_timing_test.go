package storage

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Benchmarks of deletions (issue 15). Run with:
//
//	go test ./storage -run '^$' -bench 'Deleted|DeleteThroughput' -benchtime 2s
//
// BenchmarkDeletedPartitionRead reads a whole partition whose oldest 90% of
// rows were deleted, once with DeleteRow and once with a DeleteCell per
// cell, with the deletions still in the memtable and flushed to SSTables
// (the data in one SSTable, the deletions in another), forward and in
// reverse. The target: row deletions read within 1.5x
// of cell deletions at every size.
//
// BenchmarkDeleteThroughput applies deletions of the oldest 90% of rows of
// partitions of 630 rows, in batches of 100, with DeleteRow or with one
// DeleteCell per cell, and reports rows/s.

const benchDeleteColumns = 2

var benchDeleteColumnNames = [benchDeleteColumns][]byte{[]byte("author"), []byte("data")}

// benchDeleteKey is the clustering key of row i: newest first, as a DESC
// TimeUUID would sort, so "oldest 90%" is the tail of the partition.
func benchDeleteKey(i int) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 16), ^uint64(i))
}

func openBenchDB(b *testing.B) *DB {
	b.Helper()
	return openBenchDBWith(b, func(opts *Options) { opts.MemtableSize = 256 << 20 })
}

// openBenchDBWith opens the store of a benchmark with one table "t", no
// automatic compaction and periodic WAL syncs, its other options as
// tweak sets them.
func openBenchDBWith(b *testing.B, tweak func(*Options)) *DB {
	b.Helper()
	opts := DefaultOptions()
	opts.DisableAutoCompaction = true
	opts.WALSyncMode = WALPeriodic
	tweak(&opts)
	db, err := Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	if err := db.CreateTable(TableDef{Name: "t"}); err != nil {
		b.Fatal(err)
	}
	return db
}

func benchFillPartition(b *testing.B, db *DB, pk []byte, rows int, ts int64) {
	b.Helper()
	var batch Batch
	value := make([]byte, 180)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	for i := 0; i < rows; i++ {
		for _, col := range benchDeleteColumnNames {
			batch.Put("t", pk, benchDeleteKey(i), col, value, ts)
		}
		if batch.Len() >= 1000 || i == rows-1 {
			if err := db.Apply(context.Background(), &batch); err != nil {
				b.Fatal(err)
			}
			batch.Reset()
		}
	}
}

// benchDeleteOldest deletes rows [0, n) of pk by row or by cell.
func benchDeleteOldest(b *testing.B, db *DB, pk []byte, n int, byRow bool, ts int64) {
	b.Helper()
	var batch Batch
	for i := 0; i < n; i++ {
		if byRow {
			batch.DeleteRow("t", pk, benchDeleteKey(i), ts)
		} else {
			for _, col := range benchDeleteColumnNames {
				batch.DeleteCell("t", pk, benchDeleteKey(i), col, ts)
			}
		}
		if batch.Len() >= 100 || i == n-1 {
			if err := db.Apply(context.Background(), &batch); err != nil {
				b.Fatal(err)
			}
			batch.Reset()
		}
	}
}

func BenchmarkDeletedPartitionRead(b *testing.B) {
	for _, rows := range []int{630, 6300} {
		for _, state := range []string{"memtable", "flushed"} {
			for _, kind := range []string{"cell", "row", "cell-reverse", "row-reverse"} {
				b.Run(fmt.Sprintf("rows=%d/%s/%s", rows, state, kind), func(b *testing.B) {
					db := openBenchDB(b)
					pk := []byte("p")
					now := time.Now().UnixMicro()
					benchFillPartition(b, db, pk, rows, now)
					if state == "flushed" {
						if err := db.Flush(); err != nil {
							b.Fatal(err)
						}
					}
					benchDeleteOldest(b, db, pk, rows*9/10, strings.HasPrefix(kind, "row"), now+1)
					if state == "flushed" {
						if err := db.Flush(); err != nil {
							b.Fatal(err)
						}
					}
					want := rows - rows*9/10
					for b.Loop() {
						it, err := db.Slice(context.Background(), SliceQuery{Table: "t", Partition: pk, Reverse: strings.HasSuffix(kind, "-reverse")})
						if err != nil {
							b.Fatal(err)
						}
						n := 0
						for it.Next() {
							n++
						}
						if err := it.Close(); err != nil {
							b.Fatal(err)
						}
						if n != want {
							b.Fatalf("read %d rows, want %d", n, want)
						}
					}
				})
			}
		}
	}
}

func BenchmarkDeleteThroughput(b *testing.B) {
	const rowsPerPartition = 630
	for _, kind := range []string{"cell", "row"} {
		b.Run(kind, func(b *testing.B) {
			db := openBenchDB(b)
			now := time.Now().UnixMicro()
			deleted := 0
			start := time.Now()
			for i := 0; b.Loop(); i++ {
				// One iteration deletes the oldest 90% of one partition.
				pk := fmt.Appendf(nil, "p%08d", i)
				benchDeleteOldest(b, db, pk, rowsPerPartition*9/10, kind == "row", now)
				deleted += rowsPerPartition * 9 / 10
			}
			b.ReportMetric(float64(deleted)/time.Since(start).Seconds(), "rows/s")
		})
	}
}
