package writer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

// TestOnStored: the hook gets every stored event once, with the stream
// sequence of its message, in stream order, and only once the event can be
// read back from storage; rejected messages never reach it.
func TestOnStored(t *testing.T) {
	s := startNATS(t, t.TempDir(), -1)
	nc := connect(t, s.ClientURL())
	db := openDB(t, t.TempDir())
	var (
		mu   sync.Mutex
		got  []StoredEvent
		errs []string
	)
	onStored := func(evs []StoredEvent) {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range evs {
			// Stored means readable: the batch is applied before the hook.
			if !readable(t, db, e.Event) {
				errs = append(errs, fmt.Sprintf("seq %d: not in storage when the hook ran", e.Seq))
			}
			e.Event.Data = slices.Clone(e.Event.Data)
			got = append(got, e)
		}
	}
	w := newWriter(t, nc, db, Config{OnStored: onStored})
	r := runWriter(t, w)
	js := jsFor(t, nc)
	now := time.Now().UTC()
	for i := range 20 {
		body := fmt.Sprintf(`{"time":%q,"data":{"i":%d}}`, now.Add(-time.Duration(i)*time.Second).Format(time.RFC3339Nano), i)
		subject := "events.click"
		if i%5 == 4 {
			body = "not json" // dead-lettered
		}
		if _, err := js.Publish(context.Background(), subject, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	waitApplied(t, w, js, DefaultStream, 20*time.Second)
	r.stop(t)
	mu.Lock()
	defer mu.Unlock()
	for _, e := range errs {
		t.Error(e)
	}
	if len(got) != 16 {
		t.Fatalf("hook got %d events, want the 16 valid ones", len(got))
	}
	for i, e := range got {
		// Messages 1..20; every fifth (5, 10, ...) was rejected.
		wantSeq := uint64(i + 1 + i/4)
		if e.Seq != wantSeq || e.Event.Type != "click" || string(e.Event.Data) != fmt.Sprintf(`{"i":%d}`, wantSeq-1) {
			t.Errorf("event %d: seq %d type %s data %s, want seq %d", i, e.Seq, e.Event.Type, e.Event.Data, wantSeq)
		}
	}
}

// readable reports whether e is in db.
func readable(t *testing.T, db *storage.DB, e schema.Event) bool {
	t.Helper()
	k, err := bucket.PartitionKeyFor(e.ID, e.Type, 0)
	if err != nil {
		t.Fatal(err)
	}
	pk := []byte(k.String())
	key := schema.EventClusteringKey(e.ID)
	it, err := db.Slice(context.Background(), storage.SliceQuery{Table: schema.EventsTable, Partition: pk,
		Start: storage.Bound{Key: key, Inclusive: true}, End: storage.Bound{Key: key, Inclusive: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if it.Next() {
		_, err := catalog.DecodeEvent(pk, it.Row())
		return err == nil
	}
	return false
}
