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
)

// TestWindowsPastKeyRange: hour buckets are named ddmmyyhh, so only the
// years 2000..2099 can hold events. A window reaching across either end
// answers what the keyable hours hold (the events of one side, zeros on
// the other) instead of failing with ErrInvalidQuery, and an id whose
// time is outside those years is simply not found, with or without its
// type.
func TestWindowsPastKeyRange(t *testing.T) {
	for _, tc := range []struct {
		name     string
		now, at  time.Time
		from, to time.Time
		counts   string
	}{
		{"into 2100", time.Date(2099, 12, 31, 23, 30, 0, 0, time.UTC), time.Date(2099, 12, 31, 23, 10, 0, 0, time.UTC),
			time.Date(2099, 12, 31, 23, 0, 0, 0, time.UTC), time.Date(2100, 1, 1, 1, 0, 0, 0, time.UTC), "[1 0]"},
		{"from 1999", time.Date(2000, 1, 1, 0, 30, 0, 0, time.UTC), time.Date(2000, 1, 1, 0, 10, 0, 0, time.UTC),
			time.Date(1999, 12, 31, 23, 0, 0, 0, time.UTC), time.Date(2000, 1, 1, 1, 0, 0, 0, time.UTC), "[0 1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fixedClock{now: tc.now}
			db := openStore(t, clock)
			r, err := New(db, Options{Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			id, err := bucket.NewTimeUUID(tc.at, [8]byte{7: 1})
			if err != nil {
				t.Fatal(err)
			}
			var b storage.Batch
			e := schema.Event{ID: id, Type: "click", Data: []byte(`{}`)}
			if err := catalog.PutEvent(&b, &e, 0, 0, db.NowMicros()); err != nil {
				t.Fatal(err)
			}
			if err := catalog.AddCount(&b, "click", tc.at, 1); err != nil {
				t.Fatal(err)
			}
			mustApply(t, db, &b)
			ctx := context.Background()
			for _, order := range []Order{Desc, Asc} {
				page, err := r.Events(ctx, EventQuery{Type: "click", From: tc.from, To: tc.to, Order: order})
				if err != nil || len(page.Events) != 1 || page.Events[0].ID != id || page.NextPage != "" {
					t.Errorf("events %s: %+v, %v; want the one event", order, page, err)
				}
			}
			points, err := r.Counts(ctx, CountQuery{Type: "click", From: tc.from, To: tc.to, Step: time.Hour})
			var got []int64
			for _, p := range points {
				got = append(got, p.Count)
			}
			if err != nil || fmt.Sprint(got) != tc.counts {
				t.Errorf("counts: %v, %v; want %s", got, err, tc.counts)
			}
		})
	}
	clock := &fixedClock{now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	r, err := New(openStore(t, clock), Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	old, err := bucket.NewTimeUUID(time.Date(1969, 10, 22, 10, 0, 0, 0, time.UTC), [8]byte{})
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"", "click"} {
		if _, _, err := r.Event(context.Background(), EventLookup{ID: old, Type: typ}); !errors.Is(err, ErrNotFound) {
			t.Errorf("an id of 1969, type %q: %v; want ErrNotFound", typ, err)
		}
	}
	if _, _, err := r.Event(context.Background(), EventLookup{ID: old, Type: "Click"}); !errors.Is(err, ErrInvalidQuery) {
		t.Errorf("an id of 1969 with an invalid type: %v; want ErrInvalidQuery", err)
	}
}
