package storage

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// TestPoisonReleasedBlocks: with Options.PoisonReleasedBlocks, a row's
// clustering key kept past the Next that ended a limited slice (which
// releases the slice's SSTable blocks, here straight to the pool) reads
// as 0xdb bytes, so a caller
// breaking the row lifetime fails its test; without the option the stale
// bytes still read right, which is why the option exists.
func TestPoisonReleasedBlocks(t *testing.T) {
	for _, poison := range []bool{false, true} {
		// A cache too small to keep a block: the slice's block is released
		// to the pool when the slice lets go of it, as a cached one is once
		// evicted by other reads.
		db := openTestDBIn(t, t.TempDir(), &fakeClock{now: time.Unix(1_800_000_000, 0)}, func(o *Options) {
			o.PoisonReleasedBlocks = poison
			o.BlockCacheSize = 1
		}, TableDef{Name: "t"})
		apply(t, db, func(b *Batch) { putMemoryTestRows(b, "p", 0, 100) })
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		it, err := db.Slice(context.Background(), SliceQuery{Table: "t", Partition: []byte("p"), Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var kept []byte // aliased, against the Row contract
		for it.Next() {
			kept = it.Row().Clustering
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		stale := string(kept) == "ck00000009"
		poisoned := len(kept) > 0 && len(bytes.Trim(kept, "\xdb")) == 0
		if poison && !poisoned {
			t.Errorf("poisoning on: the kept key reads %q, want only 0xdb bytes", kept)
		}
		if !poison && !stale {
			t.Errorf("poisoning off: the kept key reads %q, want the stale ck00000009 (the test no longer shows a kept key reading right by chance)", kept)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
