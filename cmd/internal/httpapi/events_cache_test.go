package httpapi

import (
	"bytes"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket/schema"
)

// TestEncodedEventsRewrittenEvent: an event read again with other
// content under the same id is encoded again, never answered with the
// JSON of what it was.
func TestEncodedEventsRewrittenEvent(t *testing.T) {
	a := &api{logger: slog.New(slog.DiscardHandler)}
	at := time.Date(2026, 11, 24, 13, 0, 0, 0, time.UTC)
	first := testEvent(t, at, "click", "u1", "", []byte(`{"n":1}`))
	for _, ev := range []schema.Event{
		first,
		first, // remembered
		{ID: first.ID, Type: "click", User: "u1", Data: []byte(`{"n":2}`)},
		{ID: first.ID, Type: "click", User: "u2", Data: []byte(`{"n":2}`)},
		{ID: first.ID, Type: "click", User: "u2", Author: "a", Data: []byte(`{"n":2}`)},
		{ID: first.ID, Type: "view", User: "u2", Author: "a", Data: []byte(`{"n":2}`)},
		{ID: first.ID, Type: "view", User: "u2", Author: "a", Data: []byte(`{"n":2} `)},
		{ID: first.ID, Type: "view", User: "u2", Author: "a"},
		first,
	} {
		want := marshalEventsResponse(t, a, []schema.Event{ev}, "", "", nil)
		got := a.appendEventsResponse(nil, []schema.Event{ev}, "", "", nil)
		if !bytes.Equal(got, want) {
			t.Fatalf("event %+v:\n got %s\nwant %s", ev, got, want)
		}
	}
}

// TestEncodedEventsBounded: the remembered encodings stay within two
// generations however many events are answered, and an event still
// answered moves to the current generation.
func TestEncodedEventsBounded(t *testing.T) {
	a := &api{logger: slog.New(slog.DiscardHandler)}
	at := time.Date(2026, 11, 24, 13, 0, 0, 0, time.UTC)
	kept := testEvent(t, at.Add(-time.Hour), "click", "", "", []byte(`{"kept":true}`))
	for i := range 5 * maxEncodedEvents {
		ev := testEvent(t, at.Add(time.Duration(i)*time.Microsecond), "click", "", "", []byte(`{}`))
		a.appendEventsResponse(nil, []schema.Event{ev, kept}, "", "", nil)
		if n := len(a.encoded.cur) + len(a.encoded.old); n > 2*maxEncodedEvents {
			t.Fatalf("after %d events, %d remembered, more than %d", i+1, n, 2*maxEncodedEvents)
		}
	}
	if _, ok := a.encoded.cur[kept.ID]; !ok {
		t.Errorf("the event answered with every page is not in the current generation")
	}
	big := testEvent(t, at, "click", "", "", bytes.Repeat([]byte(" "), maxEncodedEventData+1))
	a.appendEventsResponse(nil, []schema.Event{big}, "", "", nil)
	_, inCur := a.encoded.cur[big.ID]
	_, inOld := a.encoded.old[big.ID]
	if inCur || inOld {
		t.Errorf("an event with %d bytes of data was remembered", len(big.Data))
	}
}

// TestEncodedEventsConcurrent: answers encoded at once from overlapping
// pages (run with -race) are each what json.Marshal gives.
func TestEncodedEventsConcurrent(t *testing.T) {
	a := &api{logger: slog.New(slog.DiscardHandler)}
	at := time.Date(2026, 11, 24, 13, 0, 0, 0, time.UTC)
	events := make([]schema.Event, 200)
	for i := range events {
		events[i] = testEvent(t, at.Add(time.Duration(i)*time.Millisecond), "click", "u", "", []byte(`{"i":`+strconv.Itoa(i)+`}`))
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := 0; i+50 <= len(events); i += 10 + g {
				page := events[i : i+50]
				want := marshalEventsResponse(t, a, page, "", "", nil)
				if got := a.appendEventsResponse(nil, page, "", "", nil); !bytes.Equal(got, want) {
					t.Errorf("page from %d:\n got %s\nwant %s", i, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}
