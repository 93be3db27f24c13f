package reader

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

// TestTraceCountsExpiredCells writes 8 events that expire within a minute
// and 1 that lives, all inside the query's window (the TTL clamp keeps
// them: the type's TTL is 7 days), and reads them an hour later. Walked,
// the 8 expired cells are tombstones scanned; skipped unread (their own
// SSTable, fully expired, shadowing nothing), the trace says so.
func TestTraceCountsExpiredCells(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC)
	tests := []struct {
		name string
		// flushExpired puts the expired events in an SSTable of their own.
		flushExpired   bool
		wantTombstones int
		wantSkipped    string
	}{
		{name: "walked in the memtable", wantTombstones: 8,
			wantSkipped: "skipped unread 0 SSTables (0 by bloom filter, 0 expired) and 0 expired blocks"},
		{name: "expired SSTable skipped unread", flushExpired: true, wantTombstones: 0,
			wantSkipped: "skipped unread 1 SSTables (0 by bloom filter, 1 expired) and 0 expired blocks"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fixedClock{now: now}
			db := openStore(t, clock)
			put := func(i int, ttlSeconds int32) {
				var b storage.Batch
				id, _ := bucket.NewTimeUUID(now.Add(-time.Duration(10-i)*time.Second), [8]byte{5, byte(i)})
				e := schema.Event{ID: id, Type: "click", Data: fmt.Appendf(nil, `{"n":%d}`, i)}
				if err := catalog.PutEvent(&b, &e, 0, ttlSeconds, clock.Now().UnixMicro()); err != nil {
					t.Fatal(err)
				}
				mustApply(t, db, &b)
			}
			for i := range 8 {
				put(i, 60)
			}
			if tc.flushExpired {
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			clock.Set(now.Add(time.Second))
			put(8, 7*24*3600)
			clock.Set(now.Add(time.Hour))
			r, err := New(db, Options{Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			page, err := r.Events(context.Background(), EventQuery{Type: "click", From: now.Add(-10 * time.Minute), To: now, Trace: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Events) != 1 {
				t.Fatalf("got %d events, want the 1 live one", len(page.Events))
			}
			tr := page.Trace
			if tr.Tombstones != tc.wantTombstones {
				t.Errorf("trace counts %d tombstones, want %d: %s", tr.Tombstones, tc.wantTombstones, tr)
			}
			if !strings.HasSuffix(tr.String(), tc.wantSkipped) {
				t.Errorf("trace %q does not end in %q", tr, tc.wantSkipped)
			}
		})
	}
}
