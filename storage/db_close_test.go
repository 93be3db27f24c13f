package storage

import (
	"context"
	"runtime"
	"testing"
	"weak"
)

// TestClosedDBIsCollected: once closed and dropped, a DB is garbage, and
// with it the memory its block cache and memtables map from the OS,
// which only their cleanups unmap. A process that opens and closes stores
// (loadtest/peers' delete phase reopens its stores between rounds) kept
// every closed one resident: each memtable arena's cleanup argument
// pointed into the DB's metrics, which point to the DB, which holds the
// memtable, so the cleanup's own argument kept the memtable reachable.
func TestClosedDBIsCollected(t *testing.T) {
	def := TableDef{Name: "events", Compaction: SizeTiered}
	write := func(t *testing.T, db *DB) {
		var b Batch
		for i := range 2000 {
			b.Put("events", []byte("p"), []byte{byte(i >> 8), byte(i)}, []byte("data"), make([]byte, 100), int64(i+1))
		}
		if err := db.Apply(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
	}
	read := func(t *testing.T, db *DB) {
		rows, err := db.Slice(context.Background(), SliceQuery{Table: "events", Partition: []byte("p")})
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		use  func(*testing.T, *DB)
	}{
		{"opened and closed", func(*testing.T, *DB) {}},
		{"writes left in the memtable", write},
		{"flushed and read", func(t *testing.T, db *DB) {
			write(t, db)
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
			read(t, db)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := Open(t.TempDir(), DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if err := db.CreateTable(def); err != nil {
				t.Fatal(err)
			}
			tc.use(t, db)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			collected := weak.Make(db)
			db = nil
			// Three collections: a read's scan state waits in a
			// sync.Pool, which keeps what it holds for two.
			for range 3 {
				runtime.GC()
			}
			if collected.Value() != nil {
				t.Fatal("the closed DB is still reachable after three collections: its block cache and memtables stay mapped")
			}
		})
	}
}
