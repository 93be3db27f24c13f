package catalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/storage"
)

// TestEventRowBuilder: many events put by one builder, in several batches,
// across hours, types, sub-partitions and chunk boundaries (bodies up to
// twice a chunk), read back from storage exactly as put, each value in
// schema.AppendValue's encoding, though every batch is applied only after
// the last is built.
func TestEventRowBuilder(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	db := openDB(t, t.TempDir())
	defer db.Close()
	if err := EnsureBuiltinTables(db); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	type put struct {
		e    schema.Event
		subs int
	}
	var all []put
	var r EventRowBuilder
	// Every batch is applied only once all are built: a put that wrote
	// over bytes an earlier batch holds shows in what is read back.
	var held []*storage.Batch
	for batch := range 6 {
		b := &storage.Batch{}
		for i := range 300 {
			n := len(all)
			// n in the node bytes: every id differs whatever the random
			// second (the clock sequence's first byte loses its top two
			// bits to the variant, so n there made n and n+64 collide).
			id, err := bucket.NewTimeUUID(at.Add(time.Duration(rng.IntN(3*3600))*time.Second), [8]byte{2: byte(n), 3: byte(n >> 8), 4: byte(batch)})
			if err != nil {
				t.Fatal(err)
			}
			size := rng.IntN(300)
			if i%97 == 0 {
				size = rng.IntN(2 * eventRowChunk)
			}
			data := bytes.Repeat([]byte{byte('a' + n%26)}, size)
			e := schema.Event{ID: id, Type: fmt.Sprintf("t%d", rng.IntN(4)), Data: data}
			if rng.IntN(2) == 0 {
				e.User = fmt.Sprintf("user-%d-é", n)
			}
			if rng.IntN(3) == 0 {
				e.Author = fmt.Sprintf("author-%d", n)
			}
			subs := 0
			if e.Type == "t3" {
				subs = 4
			}
			if err := r.Put(b, &e, subs, 0, int64(n+1)); err != nil {
				t.Fatal(err)
			}
			all = append(all, put{e, subs})
		}
		held = append(held, b)
	}
	for _, b := range held {
		if err := db.Apply(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range all {
		pk, err := bucket.PartitionKeyFor(p.e.ID, p.e.Type, p.subs)
		if err != nil {
			t.Fatal(err)
		}
		partition := []byte(pk.String())
		ck, err := schema.AppendEventKey(nil, p.e.ID)
		if err != nil {
			t.Fatal(err)
		}
		it, err := db.Slice(context.Background(), storage.SliceQuery{Table: schema.EventsTable, Partition: partition,
			Start: storage.Bound{Key: ck, Inclusive: true}, End: storage.Bound{Key: ck, Inclusive: true}})
		if err != nil {
			t.Fatal(err)
		}
		if !it.Next() {
			it.Close()
			t.Fatalf("event %s not found in %s", p.e.ID, partition)
		}
		row := it.Row()
		got, err := DecodeEvent(partition, row)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != p.e.ID || got.Type != p.e.Type || !bytes.Equal(got.Data, p.e.Data) || got.User != p.e.User || got.Author != p.e.Author {
			t.Fatalf("event read back as %+v, put as %+v", got, p.e)
		}
		for _, c := range row.Cells {
			var want []byte
			switch string(c.Column) {
			case schema.ColumnData:
				want, _ = schema.AppendValue(nil, bucket.TypeBlob, p.e.Data)
			case schema.ColumnUser:
				want, _ = schema.AppendValue(nil, bucket.TypeText, p.e.User)
			case schema.ColumnAuthor:
				want, _ = schema.AppendValue(nil, bucket.TypeText, p.e.Author)
			}
			if !bytes.Equal(c.Value, want) {
				t.Fatalf("event %s column %s stored as %q, want %q", p.e.ID, c.Column, c.Value, want)
			}
		}
		it.Close()
	}
}

// TestEventRowBuilderRefusesInvalidText: a user that is not UTF-8 is refused
// before any cell of the event is added.
func TestEventRowBuilderRefusesInvalidText(t *testing.T) {
	id, err := bucket.NewTimeUUID(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), [8]byte{1})
	if err != nil {
		t.Fatal(err)
	}
	var r EventRowBuilder
	var b storage.Batch
	err = r.Put(&b, &schema.Event{ID: id, Type: "click", Data: []byte("{}"), User: "\xff"}, 0, 0, 1)
	if !errors.Is(err, schema.ErrInvalidValue) {
		t.Errorf("Put with a user that is not UTF-8: %v, want schema.ErrInvalidValue", err)
	}
	if b.Len() != 0 {
		t.Errorf("the refused event added %d mutations", b.Len())
	}
}
