package reader

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
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

// BenchmarkEventsLatest50ActiveWindow is the dashboard's latest 50 of a
// type over the last hour when the hour's events sit in N SSTables of
// the active time window (a flush each of 2,000 events of 20 types, the
// newest holding the newest 100 of each), as the events table's
// size-tiered merges leave them between compactions: what one more
// SSTable in the active window costs a latest-N read (the reader looks
// the partition up in each, and opens only those holding its newest
// rows).
func BenchmarkEventsLatest50ActiveWindow(b *testing.B) {
	const perFlush, types = 2000, 20
	for _, files := range []int{1, 4, 8, 16, 28} {
		b.Run(fmt.Sprintf("sstables=%d", files), func(b *testing.B) {
			now := time.Date(2026, 11, 24, 2, 50, 0, 0, time.UTC)
			clock := &fixedClock{now: now}
			opts := storage.DefaultOptions()
			opts.Clock = clock
			opts.DisableAutoCompaction = true
			db, err := storage.Open(b.TempDir(), opts)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			if err := catalog.EnsureBuiltinTables(db); err != nil {
				b.Fatal(err)
			}
			total := files * perFlush
			for f := range files {
				// Oldest flush first; event i is i*40 ms before now.
				first := total - (f+1)*perFlush
				putEvents(b, db, perFlush, func(i int) (time.Time, schema.Event) {
					n := first + perFlush - 1 - i
					return now.Add(-time.Duration(n) * 40 * time.Millisecond),
						schema.Event{Type: fmt.Sprintf("t%02d", n%types), User: fmt.Sprintf("u%d", n%5000), Data: fmt.Appendf(nil, `{"seq":%d,"pad":"%0120d"}`, n, n)}
				})
				if err := db.Flush(); err != nil {
					b.Fatal(err)
				}
			}
			for _, tm := range db.Metrics().Tables {
				if tm.Name == schema.EventsTable && tm.SSTables != files {
					b.Fatalf("events table holds %d SSTables, want %d", tm.SSTables, files)
				}
			}
			r, err := New(db, Options{Now: clock.Now})
			if err != nil {
				b.Fatal(err)
			}
			q := EventQuery{Type: "t07", From: now.Add(-time.Hour), To: now, Limit: 50}
			b.ReportAllocs()
			for b.Loop() {
				page, err := r.Events(context.Background(), q)
				if err != nil || len(page.Events) != 50 {
					b.Fatalf("%d events, %v", len(page.Events), err)
				}
				page.Release()
			}
		})
	}
}
