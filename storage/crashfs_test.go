package storage

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/eventide/eventide/storage/vfs"
)

// TestCrashBelowPageCacheNewStore: a store created in a new directory,
// whose first batch was acknowledged (synced), survives a power loss. Open
// used to create its directories without syncing their parents, so the
// crash took the whole store away with the acknowledged write.
func TestCrashBelowPageCacheNewStore(t *testing.T) {
	for _, dir := range []string{"/a/b/store", "/store"} {
		m := vfs.NewCrashableMem()
		opts := DefaultOptions()
		opts.FS = m
		db, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.CreateTable(TableDef{Name: "t"}); err != nil {
			t.Fatal(err)
		}
		var b Batch
		b.Put("t", []byte("p"), []byte("c"), []byte("x"), []byte("acknowledged"), 1)
		if err := db.Apply(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		crashed := m.CrashClone(nil)
		db.Close()
		opts.FS = crashed
		db, err = Open(dir, opts)
		if err != nil {
			t.Fatalf("%s: reopen after the crash: %v", dir, err)
		}
		if err := db.CreateTable(TableDef{Name: "t"}); err != nil {
			t.Fatal(err)
		}
		rows, _ := readAll(t, db, SliceQuery{Table: "t", Partition: []byte("p")})
		if len(rows) != 1 || !bytes.Equal(rows[0].Cells[0].Value, []byte("acknowledged")) {
			t.Fatalf("%s: after the crash the partition reads %s, want the acknowledged cell", dir, fmt.Sprint(rowsString(rows)))
		}
		db.Close()
	}
}
