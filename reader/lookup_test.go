package reader

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
	"github.com/google/uuid"
)

// TestEventLookupTypes: without a type, Event tries the types the index
// has for the hour and the types configured for that hour, in the
// partition their sub-partition count of that hour gives; an event stored
// without a count (data from before the index) is found only through its
// configured type.
func TestEventLookupTypes(t *testing.T) {
	clock := &fixedClock{now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	db := openStore(t, clock)
	types, err := schema.ParseEventTypes("legacy:sub=3")
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(db, Options{Types: types, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC)
	ids := map[string]string{}
	var b storage.Batch
	for i, typ := range []string{"click", "legacy", "unindexed"} {
		id, err := bucket.NewTimeUUID(at.Add(time.Duration(i)*time.Second), [8]byte{7: byte(i)})
		if err != nil {
			t.Fatal(err)
		}
		ids[typ] = id.String()
		e := schema.Event{ID: id, Type: typ, Data: []byte(fmt.Sprintf(`{"t":%q}`, typ))}
		if err := catalog.PutEvent(&b, &e, types.SettingsAt(typ, at).SubPartitions, 0, db.NowMicros()); err != nil {
			t.Fatal(err)
		}
		if typ == "click" { // only click is counted, so only click is in the index
			if err := catalog.AddCount(&b, typ, at, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	mustApply(t, db, &b)
	for typ, want := range map[string]bool{"click": true, "legacy": true, "unindexed": false} {
		id := mustParseUUID(t, ids[typ])
		ev, _, err := r.Event(context.Background(), EventLookup{ID: id})
		switch {
		case want && (err != nil || ev.Type != typ || string(ev.Data) != fmt.Sprintf(`{"t":%q}`, typ)):
			t.Errorf("%s without type: %+v, %v", typ, ev, err)
		case !want && !errors.Is(err, ErrNotFound):
			t.Errorf("%s without type (neither indexed nor configured): %+v, %v; want ErrNotFound", typ, ev, err)
		}
		ev, _, err = r.Event(context.Background(), EventLookup{ID: id, Type: typ})
		if err != nil || ev.Type != typ {
			t.Errorf("%s with its type: %+v, %v", typ, ev, err)
		}
	}
	hours, err := r.typesOfHour(&queryState{ctx: context.Background()}, at)
	if err != nil || fmt.Sprint(hours) != "[click legacy]" {
		t.Errorf("types of the hour: %v, %v", hours, err)
	}
	if _, _, err := r.Event(context.Background(), EventLookup{ID: mustParseUUID(t, "6ba7b810-9dad-41d1-80b4-00c04fd430c8")}); !errors.Is(err, ErrInvalidQuery) {
		t.Errorf("a version 4 id: %v, want ErrInvalidQuery", err)
	}
}

func mustParseUUID(t *testing.T, s string) uuid.UUID {
	t.Helper()
	u, err := uuid.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// FuzzRawSliceBounds: the partition text and the start/end literals of a
// raw slice never panic, and what they accept is in range.
func FuzzRawSliceBounds(f *testing.F) {
	for _, s := range [][4]string{
		{"events", "22112610|click", "7ab09000-e65b-11f1-8a51-2d4e6f01b2c3", ""},
		{"events", "22112610|click|3", "", "7ab09000-e65b-11f1-8a51-2d4e6f01b2c3"},
		{"event_counts", "22112610|click", "2026-11-22T10:00:00Z", "2026-11-22T10:05:00Z"},
		{"event_counts", "31022610|click", "1764000000000", "x"},
		{"followers", "gwashington", "'a'", "'z'"},
		{"timeline", "\xff", "", ""},
		{"userline", "u", "not-a-uuid", ""},
		{"following", "u", "'it''s'", "'"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, table, partition, start, end string) {
		layout, ok := RawSliceTables[table]
		if !ok {
			return
		}
		pk, err := rawPartition(table, partition)
		if err != nil {
			if !errors.Is(err, ErrInvalidQuery) {
				t.Fatalf("partition %q: %v does not wrap ErrInvalidQuery", partition, err)
			}
			return
		}
		if len(pk) == 0 {
			t.Fatalf("partition %q accepted as empty", partition)
		}
		lo, hi, err := rawBounds(layout, start, end)
		if err != nil {
			if !errors.Is(err, ErrInvalidQuery) && !errors.Is(err, errEmptyRange) {
				t.Fatalf("bounds %q %q: %v", start, end, err)
			}
			return
		}
		if start == "" && end == "" && (lo.Key != nil || hi.Key != nil) {
			t.Fatalf("no bounds gave keys %x %x", lo.Key, hi.Key)
		}
	})
}
