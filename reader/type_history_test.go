package reader

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

// TestTTLChangeKeepsLiveHoursReadable: events stored under a 24h TTL stay
// readable after the type's TTL is cut to 1h, for as long as they are
// live; the events of the hours after the change are clamped with 1h.
func TestTTLChangeKeepsLiveHoursReadable(t *testing.T) {
	start := time.Date(2026, 11, 22, 6, 10, 0, 0, time.UTC)
	clock := &fixedClock{now: start}
	db := openStore(t, clock)
	record := func(spec string) *schema.EventTypes {
		types, err := schema.ParseEventTypes(spec)
		if err != nil {
			t.Fatal(err)
		}
		h, _, err := catalog.RecordEventTypes(db, types, clock.Now(), 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	put := func(types *schema.EventTypes, at time.Time, n int) {
		id, err := bucket.NewTimeUUID(at, [8]byte{byte(n)})
		if err != nil {
			t.Fatal(err)
		}
		e := schema.Event{ID: id, Type: "click", Data: fmt.Appendf(nil, `{"n":%d}`, n)}
		s := types.SettingsAt("click", at)
		ttl := int32(at.Add(s.TTL).Sub(clock.Now()) / time.Second)
		var b storage.Batch
		if err := catalog.PutEvent(&b, &e, s.SubPartitions, ttl, clock.Now().UnixMicro()); err != nil {
			t.Fatal(err)
		}
		mustApply(t, db, &b)
	}
	before := record("click:ttl=24h")
	put(before, start.Add(-5*time.Minute), 1) // 06:05, lives until 06:05 tomorrow
	put(before, start, 2)                     // 06:10
	clock.Set(start.Add(20 * time.Minute))    // 06:30: cut the TTL to 1h from 07:00
	after := record("click:ttl=1h:sub=2")
	if want := time.Date(2026, 11, 22, 7, 0, 0, 0, time.UTC); !after.Since.Equal(want) {
		t.Fatalf("new settings from %s, want %s", after.Since, want)
	}
	clock.Set(time.Date(2026, 11, 22, 7, 10, 0, 0, time.UTC))
	put(after, time.Date(2026, 11, 22, 6, 50, 0, 0, time.UTC), 3) // late, into the 24h hour
	put(after, time.Date(2026, 11, 22, 7, 5, 0, 0, time.UTC), 4)  // 1h TTL

	count := func(now time.Time, types *schema.EventTypes) int {
		clock.Set(now)
		rd, err := New(db, Options{Types: types, Now: clock.Now, MaxBuckets: 48})
		if err != nil {
			t.Fatal(err)
		}
		page, err := rd.Events(context.Background(), EventQuery{Type: "click", From: now.Add(-30 * time.Hour), To: now, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Events)
	}
	if n := count(time.Date(2026, 11, 22, 7, 30, 0, 0, time.UTC), after); n != 4 {
		t.Errorf("at 07:30: %d events, want all 4", n)
	}
	// At 12:00 the 1h events have expired, the 24h ones of 06:xx have not.
	if n := count(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC), after); n != 3 {
		t.Errorf("at 12:00: %d events, want the 3 stored with the 24h TTL", n)
	}
	if n := count(time.Date(2026, 11, 23, 6, 30, 0, 0, time.UTC), after); n != 1 {
		t.Errorf("at 06:30 the next day: %d events, want the one of 06:50", n)
	}
}
