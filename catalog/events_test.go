package catalog

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/storage"
	"github.com/google/uuid"
)

// TestEventKeysFollowTheLayout: the event key written and decoded is
// EventsClustering's encoding, and EventKeyRange slices ids in time
// order both ways, whatever order that layout stores them in.
func TestEventKeysFollowTheLayout(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	if err := EnsureBuiltinTables(db); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	var ids []uuid.UUID // oldest first
	var b storage.Batch
	for i := range 5 {
		id, err := bucket.NewTimeUUID(at.Add(time.Duration(i)*time.Minute), [8]byte{byte(i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		want, err := schema.EventsClustering.Encode(nil, id)
		if err != nil {
			t.Fatal(err)
		}
		if got := schema.EventClusteringKey(id); !bytes.Equal(got, want) {
			t.Fatalf("key of %s is %x, EventsClustering encodes %x", id, got, want)
		}
		if err := PutEvent(&b, &schema.Event{ID: id, Type: "click", Data: []byte("{}")}, 0, 0, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	partition, _ := schema.CountsPartition("click", at) // the same "ddmmyyhh|click" when not split
	slice := func(oldest uuid.UUID, oldestIncl bool, newest uuid.UUID, newestIncl, asc bool) []uuid.UUID {
		start, end, reverse := EventKeyRange(oldest, oldestIncl, newest, newestIncl, asc)
		it, err := db.Slice(context.Background(), storage.SliceQuery{Table: schema.EventsTable, Partition: partition, Start: start, End: end, Reverse: reverse})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		var out []uuid.UUID
		for it.Next() {
			e, err := DecodeEvent(partition, it.Row())
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, e.ID)
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	reversed := func(s []uuid.UUID) []uuid.UUID { s = slices.Clone(s); slices.Reverse(s); return s }
	tests := []struct {
		name                   string
		oldest, newest         int
		oldestIncl, newestIncl bool
		want                   []uuid.UUID // oldest first
	}{
		{"inclusive", 1, 3, true, true, ids[1:4]},
		{"half-open", 1, 3, true, false, ids[1:3]},
		{"exclusive", 1, 3, false, false, ids[2:3]},
		{"all", 0, 4, true, true, ids},
	}
	for _, tt := range tests {
		if got := slice(ids[tt.oldest], tt.oldestIncl, ids[tt.newest], tt.newestIncl, true); !slices.Equal(got, tt.want) {
			t.Errorf("%s ascending: %v, want %v", tt.name, got, tt.want)
		}
		if got := slice(ids[tt.oldest], tt.oldestIncl, ids[tt.newest], tt.newestIncl, false); !slices.Equal(got, reversed(tt.want)) {
			t.Errorf("%s descending: %v, want %v", tt.name, got, reversed(tt.want))
		}
	}
	// A key that is not an event key does not decode.
	for _, key := range [][]byte{nil, make([]byte, 15), make([]byte, 17), bytes.Repeat([]byte{0xff}, 16)} {
		if _, err := schema.DecodeEventKey(key); !errors.Is(err, bucket.ErrCorruptKey) {
			t.Errorf("DecodeEventKey(%x) error %v, want ErrCorruptKey", key, err)
		}
	}
	if err := PutEvent(&b, &schema.Event{ID: uuid.MustParse("123e4567-e89b-42d3-a456-426614174000"), Type: "click"}, 0, 0, 1); err == nil {
		t.Error("PutEvent stored an event whose id is not a TimeUUID")
	}
}

// TestEventKeysDoNotAllocate: the write and read paths encode and decode
// every event's key; going through the layout must not box the id.
func TestEventKeysDoNotAllocate(t *testing.T) {
	id, err := bucket.NewTimeUUID(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), [8]byte{1})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 16)
	key := schema.EventClusteringKey(id)
	row := &storage.Row{Clustering: key, Cells: []storage.Cell{{Column: []byte(schema.ColumnData), Value: []byte{byte(bucket.TypeBlob), '{', '}'}}}}
	arena := make([]byte, 0, 1024)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := schema.AppendEventKey(buf[:0], id); err != nil {
			t.Fatal(err)
		}
		if _, _, err := DecodeEventOfType("click", row, arena[:0]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("encoding and decoding an event key allocates %.1f times, want 0", allocs)
	}
}

// TestDecodeEventUserAuthor: an event's user and author decode as the
// text they were stored as, with one allocation each (the string: not
// boxed in an interface on the way), and a value of another type is
// refused as corrupt.
func TestDecodeEventUserAuthor(t *testing.T) {
	at := time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)
	id, err := bucket.NewTimeUUID(at, [8]byte{2})
	if err != nil {
		t.Fatal(err)
	}
	db := openDB(t, t.TempDir())
	defer db.Close()
	if err := EnsureBuiltinTables(db); err != nil {
		t.Fatal(err)
	}
	var b storage.Batch
	if err := PutEvent(&b, &schema.Event{ID: id, Type: "post", User: "gmason", Author: "phenry", Data: []byte(`{"a":1}`)}, 0, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := db.Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	partition, _ := schema.CountsPartition("post", at) // the same "ddmmyyhh|post" when not split
	it, err := db.Slice(context.Background(), storage.SliceQuery{Table: schema.EventsTable, Partition: partition})
	if err != nil {
		t.Fatal(err)
	}
	if !it.Next() {
		t.Fatalf("the event is not stored: %v", it.Err())
	}
	row := &storage.Row{Clustering: slices.Clone(it.Row().Clustering), Cells: slices.Clone(it.Row().Cells)}
	it.Close()
	arena := make([]byte, 0, 1024)
	e, _, err := DecodeEventOfType("post", row, arena[:0])
	if err != nil || e.User != "gmason" || e.Author != "phenry" || string(e.Data) != `{"a":1}` {
		t.Fatalf("decoded %+v, %v; want user gmason, author phenry, data {\"a\":1}", e, err)
	}
	if allocs := testing.AllocsPerRun(100, func() { _, _, _ = DecodeEventOfType("post", row, arena[:0]) }); allocs > 2 {
		t.Errorf("decoding an event with a user and an author allocates %.1f times, want at most 2 (the strings)", allocs)
	}
	for _, bad := range [][]byte{nil, {byte(bucket.TypeBlob), 'x'}, {byte(bucket.TypeBigint), 0, 0, 0, 0, 0, 0, 0, 1}} {
		badRow := &storage.Row{Clustering: row.Clustering, Cells: []storage.Cell{{Column: []byte(schema.ColumnUser), Value: bad}}}
		if _, _, err := DecodeEventOfType("post", badRow, arena[:0]); !errors.Is(err, schema.ErrCorruptValue) {
			t.Errorf("user stored as %x: error %v, want ErrCorruptValue", bad, err)
		}
	}
}
