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
	"github.com/google/uuid"
)

// TestPageBytesBound: a page of large events ends once it holds
// MaxPageBytes of data, with a token; following the tokens returns every
// event once, in order. Without the bound one page of MaxLimit large
// events could take gigabytes.
func TestPageBytesBound(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC)
	clock := &fixedClock{now: now}
	db := openStore(t, clock)
	pad := strings.Repeat("x", 100<<10)
	var want []uuid.UUID
	for i := range 20 {
		var b storage.Batch
		id, _ := bucket.NewTimeUUID(now.Add(-time.Duration(20-i)*time.Second), [8]byte{7, byte(i)})
		e := schema.Event{ID: id, Type: "big", Data: fmt.Appendf(nil, `{"n":%d,"pad":%q}`, i, pad)}
		if err := catalog.PutEvent(&b, &e, 0, 3600, clock.Now().UnixMicro()); err != nil {
			t.Fatal(err)
		}
		mustApply(t, db, &b)
		want = append([]uuid.UUID{id}, want...) // newest first
	}
	q := EventQuery{Type: "big", From: now.Add(-time.Hour), To: now, Limit: 100}
	tests := []struct {
		name         string
		maxPageBytes int
		firstPage    int
	}{
		{"default bound", 0, 20},
		// Two events hold 200 KiB, under the bound; the third passes it.
		{"250 KiB", 250 << 10, 3},
		// One event is always returned, however large.
		{"1 byte", 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New(db, Options{Now: clock.Now, MaxPageBytes: tc.maxPageBytes})
			if err != nil {
				t.Fatal(err)
			}
			var got []uuid.UUID
			q := q
			for pages := 0; ; pages++ {
				page, err := r.Events(context.Background(), q)
				if err != nil {
					t.Fatal(err)
				}
				if pages == 0 && len(page.Events) != tc.firstPage {
					t.Fatalf("first page has %d events, want %d", len(page.Events), tc.firstPage)
				}
				for _, e := range page.Events {
					got = append(got, e.ID)
				}
				if page.NextPage == "" {
					break
				}
				q.PageToken = page.NextPage
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("paged through %d events, want the 20 in order:\n got %v\nwant %v", len(got), got, want)
			}
		})
	}
}
