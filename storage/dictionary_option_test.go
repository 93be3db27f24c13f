package storage

import (
	"context"
	"testing"
	"time"

	"github.com/eventide/eventide/storage/vfs"
)

// TestSSTableDictionaryOption: zstd SSTables get a dictionary only with
// Options.SSTableDictionary (it costs density, so it is off by default),
// and a store written either way reads the same rows.
func TestSSTableDictionaryOption(t *testing.T) {
	for _, on := range []bool{false, true} {
		dir := t.TempDir()
		db := openTestDBIn(t, dir, &fakeClock{now: time.Unix(1_800_000_000, 0)}, func(o *Options) { o.SSTableDictionary = on }, TableDef{Name: "t"})
		// Well over the dictionary's 32 KiB sample of blocks.
		apply(t, db, func(b *Batch) { putMemoryTestRows(b, "p", 0, 5000) })
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := db.CompactAll(); err != nil {
			t.Fatal(err)
		}
		n := 0
		it, err := db.Slice(context.Background(), SliceQuery{Table: "t", Partition: []byte("p")})
		if err != nil {
			t.Fatal(err)
		}
		for it.Next() {
			r := it.Row()
			if string(r.Cells[0].Value) != string(memoryTestValue([]byte("p"), r.Clustering)) {
				t.Fatalf("dictionary %v: row %q reads %q", on, r.Clustering, r.Cells[0].Value)
			}
			n++
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if n != 5000 {
			t.Fatalf("dictionary %v: read %d rows, want 5000", on, n)
		}
		withDict := sstablesWithDictionary(t, vfs.Default, dir)
		if on && withDict == 0 {
			t.Error("SSTableDictionary on: no SSTable has a dictionary")
		}
		if !on && withDict > 0 {
			t.Errorf("SSTableDictionary off: %d SSTables have a dictionary", withDict)
		}
	}
}
