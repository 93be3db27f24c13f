package storage

import (
	"context"
	"testing"
)

// TestBatchFilter: a filtered batch applies exactly the mutations kept.
func TestBatchFilter(t *testing.T) {
	db, err := Open(t.TempDir(), DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, name := range []string{"a", "b"} {
		if err := db.CreateTable(TableDef{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	var b Batch
	for _, table := range []string{"a", "b"} {
		for _, p := range []string{"keep", "drop"} {
			b.Put(table, []byte(p), []byte{1}, []byte("c"), []byte("v"), 1)
		}
	}
	size := b.SizeBytes()
	b.Filter(func(table string, partition []byte) bool { return table == "b" || string(partition) == "keep" })
	if b.Len() != 3 || b.SizeBytes() >= size {
		t.Fatalf("after Filter: %d mutations, %d bytes (of %d)", b.Len(), b.SizeBytes(), size)
	}
	if err := db.Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		table, partition string
		want             int
	}{{"a", "keep", 1}, {"a", "drop", 0}, {"b", "keep", 1}, {"b", "drop", 1}} {
		it, err := db.Slice(context.Background(), SliceQuery{Table: tc.table, Partition: []byte(tc.partition)})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for it.Next() {
			n++
		}
		it.Close()
		if n != tc.want {
			t.Errorf("%s/%s: %d rows, want %d", tc.table, tc.partition, n, tc.want)
		}
	}
}
