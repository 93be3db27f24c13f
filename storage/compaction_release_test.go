package storage

import (
	"fmt"
	"testing"
	"time"
)

// TestCompactionReleasesBlocks compacts SSTables whose partitions
// interleave across many small blocks, with newer versions of half the
// cells in later files, through a cache too small to keep any block and
// with PoisonReleasedBlocks: every block compaction reads is released to
// the arena as soon as the merge has moved past it, and poisoned. The
// output must hold exactly the newest version of every cell (a merged cell
// read from a block released too early would carry 0xdb bytes), and no
// block may be left held once the compaction is done.
func TestCompactionReleasesBlocks(t *testing.T) {
	db := openTestDBIn(t, t.TempDir(), &fakeClock{now: time.Unix(1_800_000_000, 0)}, func(o *Options) {
		o.PoisonReleasedBlocks = true
		o.BlockCacheSize = 1
		o.BlockSize = 512
	}, TableDef{Name: "t"})
	type key struct{ p, ck string }
	want := map[key]string{}
	const files, partitions, rows = 4, 5, 400
	for f := range files {
		apply(t, db, func(b *Batch) {
			for p := range partitions {
				pk := fmt.Sprintf("p%d", p)
				// File f writes every (f+1)th row: rows overlap across
				// files, each file's blocks ending at other keys.
				for i := 0; i < rows; i += f + 1 {
					ck := fmt.Sprintf("ck%06d", i)
					v := fmt.Sprintf("value of %s/%s from file %d %0*d", pk, ck, f, i%50, 0)
					b.Put("t", []byte(pk), []byte(ck), []byte("v"), []byte(v), int64(1000*f+1))
					want[key{pk, ck}] = v
				}
			}
		})
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	if inUse := db.cache.Metrics().InUseBytes; inUse != 0 {
		t.Fatalf("after the compaction %d bytes of blocks are still held (nothing is cached)", inUse)
	}
	if err := db.Check(); err != nil {
		t.Fatal(err)
	}
	n := 0
	for p := range partitions {
		pk := fmt.Sprintf("p%d", p)
		got, _ := readAll(t, db, SliceQuery{Table: "t", Partition: []byte(pk)})
		for _, r := range got {
			k := key{pk, string(r.Clustering)}
			if len(r.Cells) != 1 || string(r.Cells[0].Value) != want[k] {
				t.Fatalf("row %s/%q: got %s, want value %q", pk, r.Clustering, rowsString([]Row{r}), want[k])
			}
			n++
		}
	}
	if n != len(want) {
		t.Fatalf("read %d rows after the compaction, want %d", n, len(want))
	}
	if inUse := db.cache.Metrics().InUseBytes; inUse != 0 {
		t.Fatalf("after the reads %d bytes of blocks are still held", inUse)
	}
}
