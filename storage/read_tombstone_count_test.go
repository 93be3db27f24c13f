package storage

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestRangeDeletionsCountedAsWalked: a slice counts a row or range
// deletion among its scanned tombstones when the walk reaches it, not
// when the slice opens. A latest-N read of a partition whose older rows
// were deleted one by one stops before those deletions: it scans none,
// and a tombstone limit below their number does not fail it. A slice that
// walks past them counts each once, wherever the partition's cells and
// deletions sit (memtable, SSTables, both).
func TestRangeDeletionsCountedAsWalked(t *testing.T) {
	const live, deleted = 10, 3000
	ck := func(i int) []byte { return fmt.Appendf(nil, "k%06d", i) }
	for _, layout := range []string{"memtable", "sstable", "split"} {
		t.Run(layout, func(t *testing.T) {
			db := openTestDB(t, &fakeClock{now: time.Unix(1_800_000_000, 0)}, TableDef{Name: "t"})
			p := []byte("p")
			apply(t, db, func(b *Batch) {
				for i := range deleted + live {
					b.Put("t", p, ck(i), []byte("c"), []byte("v"), int64(10+i))
				}
			})
			if layout == "split" {
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			apply(t, db, func(b *Batch) {
				for i := range deleted {
					b.DeleteRow("t", p, ck(i), 1_000_000)
				}
				b.DeleteRange("t", p, Bound{Key: ck(deleted + live + 5), Inclusive: true}, Bound{Key: ck(deleted + live + 9)}, 1_000_000)
			})
			if layout == "sstable" {
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			cases := []struct {
				name string
				q    SliceQuery
				rows int
				// tombstones is the exact count, or -1 for at least
				// deleted (each deletion and the cell it shadows).
				tombstones int
			}{
				{"newest 5, reverse", SliceQuery{Reverse: true, Limit: 5}, 5, 1},
				{"newest 5 from the last live row", SliceQuery{Reverse: true, Limit: 5, End: Bound{Key: ck(deleted + live - 1), Inclusive: true}}, 5, 0},
				{"the live rows by bounds", SliceQuery{Start: Bound{Key: ck(deleted), Inclusive: true}, End: Bound{Key: ck(deleted + live)}}, live, 0},
				{"oldest live row, forward", SliceQuery{Limit: 1, Start: Bound{Key: ck(deleted - 2), Inclusive: true}}, 1, 4},
				{"everything", SliceQuery{}, live, -1},
			}
			for _, c := range cases {
				c.q.Table, c.q.Partition = "t", p
				rows, stats := readAll(t, db, c.q)
				if len(rows) != c.rows {
					t.Errorf("%s: %d rows, want %d", c.name, len(rows), c.rows)
				}
				switch {
				case c.tombstones >= 0 && stats.TombstonesScanned != c.tombstones:
					t.Errorf("%s: %d tombstones scanned, want %d", c.name, stats.TombstonesScanned, c.tombstones)
				case c.tombstones < 0 && (stats.TombstonesScanned < deleted+1 || stats.TombstonesScanned > 2*deleted+1):
					t.Errorf("%s: %d tombstones scanned, want each of the %d deletions and the cells they shadow once", c.name, stats.TombstonesScanned, deleted+1)
				}
			}
			// A limit below the deletions' count fails only the read that
			// walks them.
			limited := SliceQuery{Table: "t", Partition: p, Reverse: true, Limit: 5, MaxTombstones: 100}
			if rows, _ := readAll(t, db, limited); len(rows) != 5 {
				t.Errorf("the newest 5 rows with a limit of 100 tombstones: %d rows", len(rows))
			}
			it, err := db.Slice(context.Background(), SliceQuery{Table: "t", Partition: p, MaxTombstones: 100})
			if err != nil {
				t.Fatal(err)
			}
			for it.Next() {
			}
			if err := it.Close(); !errors.Is(err, ErrTooManyTombstones) {
				t.Errorf("a whole-partition read with a limit of 100 tombstones: %v, want ErrTooManyTombstones", err)
			}
		})
	}
}
