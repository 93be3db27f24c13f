package writer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/reader"
	"github.com/eventide/eventide/storage"
)

// TestSubPartitionChangeKeepsEveryEvent stores events of a type, restarts
// the writer mid-hour with a different sub-partition count (the settings
// history recorded by catalog.RecordEventTypes, as cmd/ingest does), then
// stores late events of the earlier hours and events of the hours after
// the change takes effect. The reader, given the same history, must return
// every event exactly once; before the history, data written with sub=4
// read back as 0 rows with sub=0.
func TestSubPartitionChangeKeepsEveryEvent(t *testing.T) {
	for _, tt := range []struct{ before, after string }{
		{"hot:sub=4", "hot:sub=0"},
		{"hot:sub=0", "hot:sub=4"},
		{"hot:sub=3", "hot:sub=8"},
	} {
		t.Run(tt.before+"_to_"+tt.after, func(t *testing.T) {
			testSettingsChange(t, tt.before, tt.after)
		})
	}
}

func testSettingsChange(t *testing.T, before, after string) {
	s := startNATS(t, t.TempDir(), -1)
	nc := connect(t, s.ClientURL())
	js := jsFor(t, nc)
	db := openDB(t, t.TempDir())
	parse := func(spec string) *schema.EventTypes {
		types, err := schema.ParseEventTypes(spec)
		if err != nil {
			t.Fatal(err)
		}
		return types
	}
	// Clocks: the first run at t0 (minute 40 of hour h0), the restart ten
	// minutes later in the same hour, then time goes on into the hours
	// after h0. The storage clock is real; every time is within hours of
	// it, far inside the 7-day TTL.
	h0 := bucket.HourOf(time.Now()).Add(-3 * time.Hour)
	t0 := h0.Add(40 * time.Minute)
	restart := t0.Add(10 * time.Minute)
	later := h0.Add(2*time.Hour + 30*time.Minute)

	n := 0
	event := func(at time.Time) genEvent {
		n++
		at = at.UTC().Truncate(time.Millisecond)
		return genEvent{n: n, typ: "hot", time: at, subject: "events.hot",
			body: fmt.Appendf(nil, `{"time":%q,"data":{"n":%d}}`, at.Format(time.RFC3339Nano), n)}
	}
	var all []genEvent
	store := func(types *schema.EventTypes, now time.Time, evs []genEvent) {
		t.Helper()
		w := newWriter(t, nc, db, Config{Types: types, Now: func() time.Time { return now }})
		r := runWriter(t, w)
		if err := publishAll(context.Background(), js, evs); err != nil {
			t.Fatal(err)
		}
		waitApplied(t, w, js, DefaultStream, 30*time.Second)
		r.stop(t)
		if st := w.Stats(); st.Rejected != 0 {
			t.Fatalf("writer rejected %d events: %+v", st.Rejected, st)
		}
		all = append(all, evs...)
	}

	// First run: events of hours h0-1 and h0.
	first, _, err := catalog.RecordEventTypes(db, parse(before), t0, DefaultMaxSkew)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Since.IsZero() || first.Previous != nil {
		t.Fatalf("first settings recorded from %s with previous %v, want every hour", first.Since, first.Previous)
	}
	var evs []genEvent
	for i := range 20 {
		evs = append(evs, event(h0.Add(-time.Hour).Add(time.Duration(i)*3*time.Minute)), event(h0.Add(time.Duration(i)*2*time.Minute)))
	}
	store(first, t0, evs)

	// Restart mid-hour with the new setting: it takes effect from the hour
	// after the one holding restart + max skew.
	history, _, err := catalog.RecordEventTypes(db, parse(after), restart, DefaultMaxSkew)
	if err != nil {
		t.Fatal(err)
	}
	if want := h0.Add(time.Hour); !history.Since.Equal(want) || history.Previous == nil || history.Previous.String() != first.String() {
		t.Fatalf("new settings %q from %s (previous %v), want from %s after %q", history, history.Since, history.Previous, want, first)
	}
	// Late events of h0-1 and h0 arrive after the restart, mixed with events
	// of h0+1 and h0+2, when the new setting is in force.
	evs = nil
	for i := range 20 {
		evs = append(evs,
			event(h0.Add(-time.Hour).Add(time.Duration(i)*3*time.Minute+time.Second)),
			event(h0.Add(time.Duration(i)*2*time.Minute+time.Second)),
			event(h0.Add(time.Hour+time.Duration(i)*2*time.Minute)),
			event(h0.Add(2*time.Hour+time.Duration(i)*time.Minute)))
	}
	store(history, later, evs)

	// Every hour was written with one setting: the storage holds each event
	// exactly once where its hour's setting puts it, counts included.
	checkStoredExactlyOnce(t, db, history, all)

	// And the reader finds them all, in both orders and across pages.
	rd, err := reader.New(db, reader.Options{Types: history, Now: func() time.Time { return later }})
	if err != nil {
		t.Fatal(err)
	}
	for _, order := range []reader.Order{reader.Desc, reader.Asc} {
		got := readAll(t, rd, reader.EventQuery{Type: "hot", From: h0.Add(-2 * time.Hour), To: later.Add(time.Minute), Limit: 7, Order: order})
		if len(got) != len(all) {
			t.Errorf("order %s: the reader returned %d events, want %d", order, len(got), len(all))
		}
	}

	// A restart with the same settings adds no version.
	again, recorded, err := catalog.RecordEventTypes(db, parse(after), later, DefaultMaxSkew)
	if err != nil {
		t.Fatal(err)
	}
	if recorded || !again.Since.Equal(history.Since) {
		t.Errorf("same settings again: from %s, want unchanged %s", again.Since, history.Since)
	}
	if n := countVersions(t, db); n != 2 {
		t.Errorf("%d versions recorded, want 2", n)
	}
}

// readAll pages through q and fails on an event returned twice.
func readAll(t *testing.T, rd *reader.Reader, q reader.EventQuery) []schema.Event {
	t.Helper()
	var out []schema.Event
	seen := map[uuid.UUID]bool{}
	for {
		page, err := rd.Events(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Events {
			if seen[e.ID] {
				t.Fatalf("event %s returned twice", e.ID)
			}
			seen[e.ID] = true
		}
		out = append(out, page.Events...)
		if page.NextPage == "" {
			return out
		}
		q.PageToken = page.NextPage
	}
}

func countVersions(t *testing.T, db *storage.DB) int {
	t.Helper()
	v, err := catalog.LoadEventTypes(db)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ; v != nil; v = v.Previous {
		n++
	}
	return n
}

// TestNewRefusesUnrecordedSettings: once a store records a settings
// history, a writer given other settings (the bare flag, say) would put
// hours where the readers of that history do not look; New refuses it.
func TestNewRefusesUnrecordedSettings(t *testing.T) {
	s := startNATS(t, t.TempDir(), -1)
	nc := connect(t, s.ClientURL())
	db := openDB(t, t.TempDir())
	now := time.Now()
	parse := func(spec string) *schema.EventTypes {
		types, err := schema.ParseEventTypes(spec)
		if err != nil {
			t.Fatal(err)
		}
		return types
	}
	// Nothing recorded: any settings.
	newWriter(t, nc, db, Config{Types: parse("hot:sub=2")})
	if _, _, err := catalog.RecordEventTypes(db, parse("hot:sub=4"), now, DefaultMaxSkew); err != nil {
		t.Fatal(err)
	}
	// One version for every hour: the same flag is that history.
	newWriter(t, nc, db, Config{Types: parse("hot:sub=4")})
	history, _, err := catalog.RecordEventTypes(db, parse("hot:sub=0"), now, DefaultMaxSkew)
	if err != nil {
		t.Fatal(err)
	}
	newWriter(t, nc, db, Config{Types: history})
	for _, types := range []*schema.EventTypes{parse("hot:sub=0"), parse("hot:sub=4"), nil} {
		_, err := New(context.Background(), nc, db, Config{Types: types, Logger: testLogger()})
		if !errors.Is(err, catalog.ErrEventTypesNotRecorded) {
			t.Errorf("New with %v: error %v, want ErrEventTypesNotRecorded", types, err)
		}
	}
}
