package storage

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/eventide/eventide/storage/internal/base"
)

func sampleMutations() []mutation {
	return []mutation{
		{op: opCell, tableID: 1, partition: []byte("p"), cell: base.Cell{Clustering: []byte("ck"), Column: []byte("c"), Kind: base.KindLive, Timestamp: 42, LocalDeletionTime: base.NoDeletionTime, Value: []byte("v")}},
		{op: opCell, tableID: 1, partition: []byte("p"), cell: base.Cell{Clustering: []byte{}, Column: []byte{}, Kind: base.KindExpiring, Timestamp: -7, TTL: 60, LocalDeletionTime: 1000, Value: []byte{}}},
		{op: opCell, tableID: 2, partition: []byte("q"), cell: base.Cell{Clustering: []byte("x"), Column: []byte("y"), Kind: base.KindTombstone, Timestamp: 9, LocalDeletionTime: 77, Value: []byte{}}},
		{op: opCell, tableID: 3, partition: []byte("r"), cell: base.Cell{Clustering: []byte("x"), Column: []byte("n"), Kind: base.KindCounter, Timestamp: 9, LocalDeletionTime: base.NoDeletionTime, Value: base.EncodeCounter(-3)}},
		{op: opRangeTombstone, tableID: 1, partition: []byte("p"), rangeTomb: base.RangeTombstone{Start: base.Bound{Key: []byte("a"), Inclusive: true}, End: base.Bound{}, Deletion: base.DeletionTime{MarkedForDeleteAt: 5, LocalDeletionTime: 6}}},
		{op: opRangeTombstone, tableID: 1, partition: []byte("p"), rangeTomb: base.RangeTombstone{Start: base.Bound{Key: []byte{}}, End: base.Bound{Key: []byte("z")}, Deletion: base.DeletionTime{MarkedForDeleteAt: 5, LocalDeletionTime: 6}}},
		{op: opPartitionDeletion, tableID: 4, partition: []byte("s"), deletion: base.DeletionTime{MarkedForDeleteAt: 11, LocalDeletionTime: 12}},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	muts := sampleMutations()
	rec := appendRecord(nil, muts)
	got, err := decodeRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, muts) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, muts)
	}
}

func TestRecordDecodeRejectsDamage(t *testing.T) {
	rec := appendRecord(nil, sampleMutations())
	cases := map[string][]byte{
		"empty":          {},
		"bad version":    append([]byte{99}, rec[1:]...),
		"truncated":      rec[:len(rec)-1],
		"trailing bytes": append(bytes.Clone(rec), 0),
		"huge count":     {batchRecordVersion, 0xff, 0xff, 0xff, 0xff, 0x0f},
	}
	for name, in := range cases {
		if _, err := decodeRecord(in); !errors.Is(err, base.ErrCorruption) {
			t.Errorf("%s: got %v, want a corruption error", name, err)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(appendRecord(nil, sampleMutations()))
	f.Add([]byte{batchRecordVersion, 0})
	f.Fuzz(func(t *testing.T, rec []byte) {
		muts, err := decodeRecord(rec)
		if err != nil {
			if !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("error is not a corruption error: %v", err)
			}
			return
		}
		// Whatever decodes must survive an encode/decode round trip
		// (varints may be non-minimal in the input, so compare values).
		again, err := decodeRecord(appendRecord(nil, muts))
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if !reflect.DeepEqual(again, muts) {
			t.Fatalf("round trip differs:\n got %+v\nwant %+v", again, muts)
		}
	})
}

// TestResolveLooksUpRunsOfATable: resolve looks a table up once per run of
// its mutations and still gives every mutation its own table's id and
// default TTL when the tables alternate, and fails on an unknown table
// wherever it is.
func TestResolveLooksUpRunsOfATable(t *testing.T) {
	tables := map[string]*tableState{
		"a": {id: 1, def: TableDef{Name: "a", DefaultTTLSeconds: 60}},
		"b": {id: 2, def: TableDef{Name: "b"}},
	}
	lookups := 0
	lookup := func(name string) (*tableState, error) {
		lookups++
		if ts, ok := tables[name]; ok {
			return ts, nil
		}
		return nil, fmt.Errorf("%w %q", ErrUnknownTable, name)
	}
	var b Batch
	names := []string{"a", "a", "a", "b", "b", "a", "b", "a", "a"}
	for i, name := range names {
		b.Put(name, []byte("p"), []byte{byte(i)}, []byte("c"), []byte("v"), 1)
	}
	if err := b.resolve(lookup, 1000, 1); err != nil {
		t.Fatal(err)
	}
	for i, m := range b.mutations {
		want := tables[names[i]]
		if m.tableID != want.id {
			t.Fatalf("mutation %d (table %s): id %d, want %d", i, names[i], m.tableID, want.id)
		}
		if wantTTL := want.def.DefaultTTLSeconds; m.cell.TTL != wantTTL {
			t.Fatalf("mutation %d (table %s): ttl %d, want %d", i, names[i], m.cell.TTL, wantTTL)
		}
	}
	if lookups != 5 {
		t.Fatalf("%d lookups for 5 runs of a table", lookups)
	}
	for _, at := range []int{0, 4} {
		var b Batch
		for i, name := range names[:6] {
			if i == at {
				name = "nope"
			}
			b.Put(name, []byte("p"), []byte{byte(i)}, []byte("c"), []byte("v"), 1)
		}
		if err := b.resolve(lookup, 1000, 1); !errors.Is(err, ErrUnknownTable) {
			t.Fatalf("unknown table at %d: %v, want ErrUnknownTable", at, err)
		}
	}
}
