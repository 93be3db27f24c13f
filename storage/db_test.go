package storage

import (
	"context"
	"testing"
	"time"
)

func openTestDB(t *testing.T, clock *fakeClock, defs ...TableDef) *DB {
	t.Helper()
	return openTestDBIn(t, t.TempDir(), clock, nil, defs...)
}

// openTestDBIn is openTestDB in dir, with the options adjusted by tweak
// (nil: none).
func openTestDBIn(t *testing.T, dir string, clock *fakeClock, tweak func(*Options), defs ...TableDef) *DB {
	t.Helper()
	opts := DefaultOptions()
	opts.Clock = clock
	opts.DisableAutoCompaction = true
	if tweak != nil {
		tweak(&opts)
	}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, d := range defs {
		if err := db.CreateTable(d); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

func apply(t *testing.T, db *DB, fill func(b *Batch)) {
	t.Helper()
	var b Batch
	fill(&b)
	if err := db.Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
}

// TestDeletionsAcrossSources checks each kind of deletion shadows older
// cells whether the two sit in the memtable, in different SSTables, or
// were compacted together.
func TestDeletionsAcrossSources(t *testing.T) {
	type step int
	const (
		none step = iota
		flush
		flushCompact
	)
	deletions := map[string]func(b *Batch){
		"partition": func(b *Batch) { b.DeletePartition("t", []byte("p"), 20) },
		"row":       func(b *Batch) { b.DeleteRow("t", []byte("p"), []byte("k"), 20) },
		"range": func(b *Batch) {
			b.DeleteRange("t", []byte("p"), Bound{Key: []byte("a"), Inclusive: true}, Bound{Key: []byte("z")}, 20)
		},
		"cell": func(b *Batch) { b.DeleteCell("t", []byte("p"), []byte("k"), []byte("c"), 20) },
	}
	for name, del := range deletions {
		for _, between := range []step{none, flush} {
			for _, after := range []step{none, flush, flushCompact} {
				clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
				db := openTestDB(t, clock, TableDef{Name: "t"})
				run := func(s step) {
					if s >= flush {
						if err := db.Flush(); err != nil {
							t.Fatal(err)
						}
					}
					if s == flushCompact {
						if err := db.Compact("t"); err != nil {
							t.Fatal(err)
						}
					}
				}
				apply(t, db, func(b *Batch) {
					b.Put("t", []byte("p"), []byte("k"), []byte("c"), []byte("old"), 10)
					b.Put("t", []byte("p"), []byte("k"), []byte("d"), []byte("new"), 30)
				})
				run(between)
				apply(t, db, del)
				run(after)
				rows, stats := readAll(t, db, SliceQuery{Table: "t", Partition: []byte("p")})
				if len(rows) != 1 || len(rows[0].Cells) != 1 || string(rows[0].Cells[0].Value) != "new" {
					t.Errorf("%s deletion, steps %d/%d: got %s (%s)", name, between, after, rowsString(rows), stats)
				}
			}
		}
	}
}
