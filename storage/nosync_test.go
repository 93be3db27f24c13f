package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/eventide/eventide/storage/vfs"
)

// noSyncBatch puts batch i's cells: noSyncCells rows in partition "p",
// clustering "b<i>-<j>".
func noSyncBatch(i int) *Batch {
	var b Batch
	for j := range noSyncCells {
		b.Put("t", []byte("p"), fmt.Appendf(nil, "b%02d-%02d", i, j), []byte("x"), fmt.Appendf(nil, "v%d", i), int64(1+i))
	}
	return &b
}

const noSyncCells = 8

func openNoSyncDB(t *testing.T, m *vfs.MemFS, syncInterval time.Duration) *DB {
	t.Helper()
	opts := DefaultOptions()
	opts.FS = m
	opts.WALSyncInterval = syncInterval
	db, err := Open("/store", opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if err := db.CreateTable(TableDef{Name: "t"}); err != nil {
		t.Fatal(err)
	}
	return db
}

// batchesAfterCrash opens the crashed filesystem and returns, per batch
// number, how many of its cells survived.
func batchesAfterCrash(t *testing.T, crashed *vfs.MemFS) map[int]int {
	t.Helper()
	db := openNoSyncDB(t, crashed, time.Hour)
	defer db.Close()
	rows, _ := readAll(t, db, SliceQuery{Table: "t", Partition: []byte("p")})
	got := map[int]int{}
	for _, r := range rows {
		var i, j int
		if _, err := fmt.Sscanf(string(r.Clustering), "b%02d-%02d", &i, &j); err != nil {
			t.Fatalf("unexpected row %q", r.Clustering)
		}
		got[i]++
	}
	return got
}

// TestApplyNoSyncCrash: on the crash filesystem (a power loss below the
// page cache), a batch applied with ApplyNoSync is not durable on its own,
// is durable once a later Apply returns, and a crash keeps an in-order
// prefix of the unsynced batches, each whole.
func TestApplyNoSyncCrash(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewCrashableMem()
	// The interval is far beyond the test: only synced Applies fsync.
	db := openNoSyncDB(t, m, time.Hour)
	defer db.Close()
	if err := db.ApplyNoSync(ctx, noSyncBatch(0)); err != nil {
		t.Fatal(err)
	}
	// Readable at once.
	if rows, _ := readAll(t, db, SliceQuery{Table: "t", Partition: []byte("p")}); len(rows) != noSyncCells {
		t.Fatalf("after ApplyNoSync the store reads %d rows, want %d", len(rows), noSyncCells)
	}
	if got := batchesAfterCrash(t, m.CrashClone(nil)); len(got) != 0 {
		t.Fatalf("ApplyNoSync fsynced: a crash kept %v", got)
	}
	if err := db.Apply(ctx, noSyncBatch(1)); err != nil {
		t.Fatal(err)
	}
	if got := batchesAfterCrash(t, m.CrashClone(nil)); got[0] != noSyncCells || got[1] != noSyncCells {
		t.Fatalf("after a synced Apply a crash kept %v (batch -> cells), want batches 0 and 1 whole", got)
	}
	const last = 7
	for i := 2; i <= last; i++ {
		if err := db.ApplyNoSync(ctx, noSyncBatch(i)); err != nil {
			t.Fatal(err)
		}
	}
	for seed := range uint64(50) {
		got := batchesAfterCrash(t, m.CrashClone(rand.New(rand.NewPCG(seed, 2))))
		// Batches 0 and 1 whole, then batches 2.. whole up to some point
		// and nothing after it.
		ended := false
		for i := 0; i <= last; i++ {
			switch {
			case got[i] == noSyncCells && !ended:
			case got[i] == 0 && i >= 2:
				ended = true
			default:
				t.Fatalf("seed %d: a crash kept %v (batch -> cells): want batches 0 and 1 and an in-order prefix of 2..%d, each whole", seed, got, last)
			}
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	got := batchesAfterCrash(t, m.CrashClone(nil))
	for i := 0; i <= last; i++ {
		if got[i] != noSyncCells {
			t.Fatalf("after Flush a crash kept %v (batch -> cells), want every batch whole", got)
		}
	}
}

// TestApplyNoSyncBackgroundSync: with no other write coming, a batch
// applied with ApplyNoSync becomes durable on its own, by the WAL's
// background fsync (within WALSyncInterval), in the default WALSync mode.
func TestApplyNoSyncBackgroundSync(t *testing.T) {
	m := vfs.NewCrashableMem()
	db := openNoSyncDB(t, m, time.Millisecond)
	defer db.Close()
	before := db.metrics.walSyncedRecords.Load()
	if err := db.ApplyNoSync(context.Background(), noSyncBatch(0)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for db.metrics.walSyncedRecords.Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("the batch was not fsynced within 30s at a 1ms WALSyncInterval")
		}
		time.Sleep(time.Millisecond) // poll
	}
	if got := batchesAfterCrash(t, m.CrashClone(nil)); got[0] != noSyncCells {
		t.Fatalf("after the background fsync a crash kept %v (batch -> cells), want batch 0 whole", got)
	}
}
