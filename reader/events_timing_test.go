package reader

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket/schema"
)

// BenchmarkEventsLatest50 is the dashboard's "latest 50 of a type" over
// the last hour, read from a memtable of 2,000 events of ~150 bytes of
// data, what the load harness's query.latest asks (bytes/op is the
// garbage a request leaves).
func BenchmarkEventsLatest50(b *testing.B) {
	now := time.Date(2026, 11, 24, 2, 30, 0, 0, time.UTC)
	clock := &fixedClock{now: now}
	db := openStore(b, clock)
	putEvents(b, db, 2000, func(i int) (time.Time, schema.Event) {
		return now.Add(-time.Duration(i) * 500 * time.Millisecond),
			schema.Event{Type: "click", User: fmt.Sprintf("u%d", i%5000), Data: fmt.Appendf(nil, `{"seq":%d,"pad":"%0120d"}`, i, i)}
	})
	r, err := New(db, Options{Now: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	q := EventQuery{Type: "click", From: now.Add(-time.Hour), To: now, Limit: 50}
	for _, release := range []bool{false, true} {
		b.Run(fmt.Sprintf("release=%v", release), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				page, err := r.Events(context.Background(), q)
				if err != nil || len(page.Events) != 50 {
					b.Fatalf("%d events, %v", len(page.Events), err)
				}
				if release {
					page.Release()
				}
			}
		})
	}
}
