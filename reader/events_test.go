package reader

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// eventsFixture is a store of random events and the brute-force model of
// what each query must return.
type eventsFixture struct {
	db     *storage.DB
	clock  *fixedClock
	types  *schema.EventTypes
	now    time.Time
	events []schema.Event // every live event
}

// newEventsFixture writes n events of types click (TTL 7 days), hot (4
// sub-partitions) and short (TTL 24h) over the 48 hours before now, deletes
// some rows and one whole hour partition, and flushes part of it to
// SSTables so reads merge memtables and SSTables.
func newEventsFixture(t testing.TB, rng *rand.Rand, n int) *eventsFixture {
	now := time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC)
	clock := &fixedClock{now: now}
	f := &eventsFixture{db: openStore(t, clock), clock: clock, now: now}
	f.types = &schema.EventTypes{Types: map[string]schema.TypeSettings{
		"click": {},
		"hot":   {SubPartitions: 4},
		"short": {TTL: 24 * time.Hour},
	}}
	typeNames := []string{"click", "hot", "short"}
	var b storage.Batch
	written := map[uuid.UUID]schema.Event{}
	for i := range n {
		typ := typeNames[rng.IntN(len(typeNames))]
		at := now.Add(-time.Duration(rng.Int64N(int64(48 * time.Hour))))
		id, err := bucket.NewRandomTimeUUID(at, randReader{rng})
		if err != nil {
			t.Fatal(err)
		}
		e := schema.Event{ID: id, Type: typ, Data: fmt.Appendf(nil, `{"n":%d}`, i)}
		ttl := f.types.TTLSeconds(typ)
		remaining := int64(e.Time().Add(time.Duration(ttl) * time.Second).Sub(now).Seconds()) // floor: never outlives the model
		if remaining <= 0 {
			continue
		}
		if err := catalog.PutEvent(&b, &e, f.types.Settings(typ).SubPartitions, int32(remaining), now.UnixMicro()); err != nil {
			t.Fatal(err)
		}
		written[id] = e
		if b.Len() >= 500 {
			mustApply(t, f.db, &b)
			b.Reset()
		}
		if i == n/2 {
			mustApply(t, f.db, &b)
			b.Reset()
			if err := f.db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	mustApply(t, f.db, &b)
	b.Reset()
	// Delete every 7th event and one whole hour of clicks.
	deleteAt := now.UnixMicro() + 1
	for id, e := range written {
		if id[15]%7 == 0 {
			pk, _ := bucket.PartitionKeyFor(id, e.Type, f.types.Settings(e.Type).SubPartitions)
			b.DeleteRow(schema.EventsTable, []byte(pk.String()), schema.EventClusteringKey(id), deleteAt)
			delete(written, id)
		}
	}
	deadHour := bucket.HourOf(now.Add(-5 * time.Hour))
	pk, _ := bucket.NewPartitionKey(deadHour, "click")
	b.DeletePartition(schema.EventsTable, []byte(pk.String()), deleteAt)
	for id, e := range written {
		if e.Type == "click" && bucket.HourOf(e.Time()) == deadHour {
			delete(written, id)
		}
	}
	mustApply(t, f.db, &b)
	for _, e := range written {
		f.events = append(f.events, e)
	}
	return f
}

type randReader struct{ rng *rand.Rand }

func (r randReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r.rng.Uint32())
	}
	return len(p), nil
}

// expect is the brute-force answer to q without paging.
func (f *eventsFixture) expect(q EventQuery) []uuid.UUID {
	from, to := q.From.Truncate(time.Millisecond), q.To.Truncate(time.Millisecond)
	var ids []uuid.UUID
	for _, e := range f.events {
		at := e.Time()
		if e.Type == q.Type && !at.Before(from) && at.Before(to) {
			ids = append(ids, e.ID)
		}
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int {
		if q.Order == Asc {
			return bucket.CompareTimeUUID(a, b)
		}
		return bucket.CompareTimeUUID(b, a)
	})
	return ids
}

func (f *eventsFixture) reader(t testing.TB, opts Options) *Reader {
	opts.Types = f.types
	opts.Now = f.clock.Now
	r, err := New(f.db, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func ids(events []schema.Event) []uuid.UUID {
	out := make([]uuid.UUID, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	return out
}

var eventsSeed = flag.Uint64("events.seed", 0, "seed of TestEventsAgainstBruteForce (0 = random); the clock is fixed, so a seed replays a run")

// TestEventsAgainstBruteForce runs random multi-bucket queries, unpaged and
// paged with random page sizes, and compares them with a brute-force scan
// of the model.
func TestEventsAgainstBruteForce(t *testing.T) {
	seed := *eventsSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -events.seed %d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	f := newEventsFixture(t, rng, 6000)
	r := f.reader(t, Options{})
	ctx := context.Background()
	for i := range 300 {
		q := EventQuery{Type: []string{"click", "hot", "short"}[rng.IntN(3)], Order: Order(rng.IntN(2))}
		a := f.now.Add(-time.Duration(rng.Int64N(int64(50 * time.Hour))))
		b := a.Add(time.Duration(rng.Int64N(int64(30 * time.Hour))))
		q.From, q.To = a, b.Add(time.Millisecond)
		want := f.expect(q)
		// Unpaged, with a limit that may cut the result.
		q.Limit = 1 + rng.IntN(400)
		page, err := r.Events(ctx, q)
		if err != nil {
			t.Fatalf("query %d %+v: %v", i, q, err)
		}
		cut := want[:min(len(want), q.Limit)]
		if !slices.Equal(ids(page.Events), cut) {
			t.Fatalf("query %d %+v: got %d events, want %d\n got %v\nwant %v", i, q, len(page.Events), len(cut), ids(page.Events), cut)
		}
		if (page.NextPage != "") != (len(want) > q.Limit) {
			t.Fatalf("query %d: next page %q with %d matching events and limit %d", i, page.NextPage, len(want), q.Limit)
		}
		// Paged with random page sizes: the concatenation is the whole result.
		var all []uuid.UUID
		q.PageToken = ""
		for pages := 0; ; pages++ {
			q.Limit = 1 + rng.IntN(60)
			page, err := r.Events(ctx, q)
			if err != nil {
				t.Fatalf("query %d page %d: %v", i, pages, err)
			}
			all = append(all, ids(page.Events)...)
			if page.NextPage == "" {
				break
			}
			if len(page.Events) == 0 {
				t.Fatalf("query %d page %d: empty page with a next page", i, pages)
			}
			q.PageToken = page.NextPage
		}
		if !slices.Equal(all, want) {
			t.Fatalf("query %d %+v: paged result has %d events, want %d", i, q, len(all), len(want))
		}
	}
}

// TestEventsStopAtLimit checks a latest-N query reads only the newest
// bucket it needs, not the whole window.
func TestEventsStopAtLimit(t *testing.T) {
	clock := &fixedClock{now: time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC)}
	db := openStore(t, clock)
	var b storage.Batch
	for h := range 24 {
		for i := range 10 {
			at := clock.now.Add(-time.Duration(h)*time.Hour - time.Duration(i)*time.Minute)
			id, _ := bucket.NewTimeUUID(at, [8]byte{byte(i)})
			if err := catalog.PutEvent(&b, &schema.Event{ID: id, Type: "click", Data: []byte(`{}`)}, 0, 0, clock.now.UnixMicro()); err != nil {
				t.Fatal(err)
			}
		}
	}
	mustApply(t, db, &b)
	r, err := New(db, Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	page, err := r.Events(context.Background(), EventQuery{Type: "click", From: clock.now.Add(-24 * time.Hour), To: clock.now, Limit: 5, Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 5 || page.NextPage == "" {
		t.Fatalf("got %d events, next page %q", len(page.Events), page.NextPage)
	}
	if page.Trace.Partitions != 1 || page.Trace.Rows != 6 {
		t.Fatalf("latest 5 read %d partitions and %d rows, want 1 and 6 (limit plus one): %s", page.Trace.Partitions, page.Trace.Rows, page.Trace)
	}
	if !strings.HasPrefix(page.Trace.String(), "read 6 live and 0 tombstoned cells in 0 SSTables (0 blocks), 1 partitions") {
		t.Fatalf("trace %q", page.Trace)
	}
}

// TestEventsTTLClamp checks that a query over a window older than the
// type's TTL walks nothing, even though the expired cells are still stored.
func TestEventsTTLClamp(t *testing.T) {
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	clock := &fixedClock{now: start}
	db := openStore(t, clock)
	var b storage.Batch
	for i := range 200 {
		id, _ := bucket.NewTimeUUID(start.Add(-time.Duration(i)*time.Second), [8]byte{1})
		if err := catalog.PutEvent(&b, &schema.Event{ID: id, Type: "comment", Data: []byte(`{}`)}, 0, 3*3600, start.UnixMicro()); err != nil {
			t.Fatal(err)
		}
	}
	mustApply(t, db, &b) // kept in the memtable: SSTables would be skipped whole by their max expiry
	types := &schema.EventTypes{Types: map[string]schema.TypeSettings{"comment": {TTL: 3 * time.Hour}}}
	r, err := New(db, Options{Now: clock.Now, Types: types})
	if err != nil {
		t.Fatal(err)
	}
	clock.Set(start.Add(4 * time.Hour)) // every comment has expired
	q := EventQuery{Type: "comment", From: start.Add(-time.Hour), To: start.Add(4 * time.Hour), Trace: true}
	page, err := r.Events(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 0 || page.Trace.Tombstones != 0 || page.Trace.SSTables != 0 {
		t.Fatalf("got %d events, trace %s; want nothing walked after the clamp", len(page.Events), page.Trace)
	}
	// The same window without the clamp (a reader that thinks the TTL is
	// long) walks every expired cell: that is what the clamp avoids.
	long, err := New(db, Options{Now: clock.Now, Types: &schema.EventTypes{Default: schema.TypeSettings{TTL: 24 * time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	page, err = long.Events(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 0 || page.Trace.Tombstones != 200 {
		t.Fatalf("unclamped: got %d events, trace %s; want 200 expired cells walked", len(page.Events), page.Trace)
	}
}

func TestEventsBadQueries(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	clock := &fixedClock{now: now}
	r, err := New(openStore(t, clock), Options{Now: clock.Now, Types: &schema.EventTypes{Default: schema.TypeSettings{TTL: 30 * 24 * time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	otherToken := encodeToken(tokenKindEvents, fingerprint("events", "view", "desc"), make([]byte, 16))
	ok := EventQuery{Type: "click", From: now.Add(-time.Hour), To: now}
	tests := []struct {
		name   string
		modify func(q *EventQuery)
		want   string
	}{
		{"bad type", func(q *EventQuery) { q.Type = "Click!" }, "parameter type"},
		{"empty type", func(q *EventQuery) { q.Type = "" }, "parameter type"},
		{"from after to", func(q *EventQuery) { q.From = now.Add(time.Hour) }, "is not before to"},
		{"negative limit", func(q *EventQuery) { q.Limit = -1 }, "limit -1 is outside 1..10000"},
		{"huge limit", func(q *EventQuery) { q.Limit = MaxLimit + 1 }, "is outside 1..10000"},
		{"too many buckets", func(q *EventQuery) { q.From = now.Add(-8 * 24 * time.Hour) }, "spans 192 hour buckets"},
		{"garbage token", func(q *EventQuery) { q.PageToken = "!!!" }, "is not a token this server issued"},
		{"short token", func(q *EventQuery) { q.PageToken = "AQE" }, "is not a token this server issued"},
		{"token of another query", func(q *EventQuery) { q.PageToken = otherToken }, "was issued for a different query"},
		{"slice token", func(q *EventQuery) { q.PageToken = encodeToken(tokenKindSlice, 1, nil) }, "not a token for this kind of query"},
		{"token without an id", func(q *EventQuery) {
			q.PageToken = encodeToken(tokenKindEvents, fingerprint("events", "click", "desc"), []byte{1, 2})
		}, "does not hold an event id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := ok
			tt.modify(&q)
			_, err := r.Events(context.Background(), q)
			if !errors.Is(err, ErrInvalidQuery) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want ErrInvalidQuery containing %q", err, tt.want)
			}
		})
	}
	if _, err := r.Events(context.Background(), ok); err != nil {
		t.Fatalf("valid query: %v", err)
	}
}

// TestEventsTombstoneThresholds checks the warn and fail thresholds count
// tombstones across partitions, and the failure names the partition and a
// bound that avoids it.
func TestEventsTombstoneThresholds(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC)
	clock := &fixedClock{now: now}
	db := openStore(t, clock)
	var b storage.Batch
	for i := range 300 {
		id, _ := bucket.NewTimeUUID(now.Add(-time.Duration(i)*time.Second), [8]byte{2})
		pk, _ := bucket.PartitionKeyFor(id, "click", 0)
		b.DeleteRow(schema.EventsTable, []byte(pk.String()), schema.EventClusteringKey(id), now.UnixMicro())
	}
	mustApply(t, db, &b)
	reg := prometheus.NewPedanticRegistry()
	r, err := New(db, Options{Now: clock.Now, WarnTombstones: 100, FailTombstones: 1000, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	// The documented counter is exported at 0 for every kind before any
	// warning, so an alert on it has a series to watch.
	if n, err := testutil.GatherAndCount(reg, "eventide_reader_tombstone_warnings_total"); err != nil || n != len(queryKinds) {
		t.Fatalf("eventide_reader_tombstone_warnings_total before any query: %d series (%v), want %d", n, err, len(queryKinds))
	}
	q := EventQuery{Type: "click", From: now.Add(-time.Hour), To: now}
	if _, err := r.Events(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(r.metrics.tombstoneWarnings.WithLabelValues("events")); got != 1 {
		t.Fatalf("tombstone warnings = %v, want 1", got)
	}
	r.opts.FailTombstones = 200
	_, err = r.Events(context.Background(), q)
	if !errors.Is(err, ErrTooManyTombstones) {
		t.Fatalf("got %v, want ErrTooManyTombstones", err)
	}
	for _, want := range []string{"more than 200 tombstones", "22112610|click", "to=2026-11-22T10:00:00Z skips that hour"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("metric lint: %v %v", problems, err)
	}
}

// TestTombstoneLimitAcrossSubPartitions checks the fail threshold holds for
// the total of a bucket's merged sub-partitions, though each one alone
// stays under it, and that the query stops once the total passes it.
func TestTombstoneLimitAcrossSubPartitions(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC)
	clock := &fixedClock{now: now}
	db := openStore(t, clock)
	var b storage.Batch
	for i := range 300 {
		id, _ := bucket.NewTimeUUID(now.Add(-time.Duration(i+1)*time.Second), [8]byte{3, byte(i)})
		pk, _ := bucket.PartitionKeyFor(id, "hot", 4)
		b.DeleteRow(schema.EventsTable, []byte(pk.String()), schema.EventClusteringKey(id), now.UnixMicro())
	}
	mustApply(t, db, &b)
	types := &schema.EventTypes{Types: map[string]schema.TypeSettings{"hot": {SubPartitions: 4}}}
	r, err := New(db, Options{Now: clock.Now, Types: types, FailTombstones: 200})
	if err != nil {
		t.Fatal(err)
	}
	before := db.Metrics().TombstonesRead
	_, err = r.Events(context.Background(), EventQuery{Type: "hot", From: now.Add(-10 * time.Minute), To: now})
	if !errors.Is(err, ErrTooManyTombstones) {
		t.Fatalf("got %v, want ErrTooManyTombstones for 300 tombstones over 4 sub-partitions", err)
	}
	// Each sub-partition is opened with what the others left of the
	// budget, so the query gives up before walking all of them.
	if read := db.Metrics().TombstonesRead - before; read >= 300 {
		t.Fatalf("the failed query walked %d tombstones, want it to stop before all 300", read)
	}
}

// TestEventsOverTheWholeTTLWindow checks the default bucket limit admits a
// query over exactly the default TTL's window, and any older from (clamped
// to it), when now is not on the hour: 168 hours then touch 169 buckets.
func TestEventsOverTheWholeTTLWindow(t *testing.T) {
	for _, now := range []time.Time{
		time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC),
		time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 22, 10, 59, 59, 999000000, time.UTC),
	} {
		clock := &fixedClock{now: now}
		r, err := New(openStore(t, clock), Options{Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		for _, from := range []time.Time{now.Add(-schema.DefaultEventTTL), now.Add(-30 * 24 * time.Hour), {}} {
			if _, err := r.Events(context.Background(), EventQuery{Type: "click", From: from, To: now}); err != nil {
				t.Errorf("now %s, from %s: %v", now.Format(time.RFC3339Nano), from.Format(time.RFC3339), err)
			}
		}
	}
}

// TestEventPageRelease: a released page's memory serves later pages, and
// only a released page's: pages still in use keep their events, and a
// page built on recycled memory holds what a fresh one holds.
func TestEventPageRelease(t *testing.T) {
	now := time.Date(2026, 11, 24, 2, 30, 0, 0, time.UTC)
	clock := &fixedClock{now: now}
	db := openStore(t, clock)
	putEvents(t, db, 300, func(i int) (time.Time, schema.Event) {
		typ := []string{"click", "view"}[i%2]
		// Sizes vary, so a recycled arena is sometimes too small.
		return now.Add(-time.Duration(i) * time.Second),
			schema.Event{Type: typ, User: fmt.Sprintf("u%d", i), Data: fmt.Appendf(nil, `{"seq":%d,"pad":"%0*d"}`, i, i%7*40, i)}
	})
	r, err := New(db, Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	snapshot := func(p *EventPage) string {
		var b strings.Builder
		for _, e := range p.Events {
			fmt.Fprintf(&b, "%s %s %s %s\n", e.ID, e.Type, e.User, e.Data)
		}
		return b.String() + p.NextPage
	}
	queries := []EventQuery{
		{Type: "click", From: now.Add(-time.Hour), To: now.Add(time.Second), Limit: 50},
		{Type: "view", From: now.Add(-time.Hour), To: now.Add(time.Second), Limit: 7},
		{Type: "click", From: now.Add(-time.Hour), To: now.Add(time.Second), Limit: 120, Order: Asc},
		{Type: "view", From: now.Add(-time.Hour), To: now.Add(time.Second), Limit: 150},
	}
	want := make([]string, len(queries))
	kept := make([]*EventPage, len(queries))
	for i, q := range queries {
		p, err := r.Events(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		want[i], kept[i] = snapshot(p), p
	}
	for round := range 5 {
		for i, q := range queries {
			p, err := r.Events(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if got := snapshot(p); got != want[i] {
				t.Fatalf("round %d query %d on recycled memory:\n%s\nwant\n%s", round, i, got, want[i])
			}
			p.Release()
		}
	}
	for i, p := range kept {
		if got := snapshot(p); got != want[i] {
			t.Fatalf("page %d, never released, changed under later queries:\n%s\nwant\n%s", i, got, want[i])
		}
	}
}

// TestEventPageLargeLimitFewEvents: a page of a query with a large limit
// that finds few events (the load harness's probe polls: limit 10,000)
// is small enough to be recycled; it had room for 4,096 events.
func TestEventPageLargeLimitFewEvents(t *testing.T) {
	now := time.Date(2026, 11, 24, 2, 30, 0, 0, time.UTC)
	clock := &fixedClock{now: now}
	db := openStore(t, clock)
	putEvents(t, db, 3, func(i int) (time.Time, schema.Event) {
		return now.Add(-time.Duration(i) * time.Second), schema.Event{Type: "probe", Data: fmt.Appendf(nil, `{"probe":%d}`, i)}
	})
	r, err := New(db, Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Events(context.Background(), EventQuery{Type: "probe", From: now.Add(-time.Minute), To: now.Add(time.Minute), Limit: 10000, Order: Asc})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Events) != 3 {
		t.Fatalf("%d events; want 3", len(p.Events))
	}
	if cap(p.Events) > maxPooledPageEvents || cap(p.arena) > maxPooledPageArena {
		t.Errorf("a page of 3 events has room for %d events and %d bytes of data: more than a recycled page keeps (%d, %d)",
			cap(p.Events), cap(p.arena), maxPooledPageEvents, maxPooledPageArena)
	}
}

// TestEventPagePoolKeepsOnlyDashboardPages: a released page above the
// recycling bounds (the load harness's 10,000-event probe pages) is left
// to the garbage collector; kept, such pages made the pool hold 14 MiB
// and every later small page carry their room.
func TestEventPagePoolKeepsOnlyDashboardPages(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events int
		arena  int
		kept   bool
	}{
		{"latest 50", 51, 16 << 10, true},
		{"most events kept", maxPooledPageEvents, 1 << 10, true},
		{"a probe page of events", 300, 1 << 10, false},
		{"a page of large data", 51, 100 << 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pp eventPages
			p := &EventPage{Events: make([]schema.Event, 1, tc.events), arena: make([]byte, 0, tc.arena), pages: &pp}
			p.Events[0] = schema.Event{Type: "click", User: "u1"}
			p.Release()
			got, _ := pp.pool.Get().(*EventPage)
			if kept := got != nil; kept != tc.kept && !(tc.kept && raceEnabled) {
				t.Fatalf("page of %d events and %d bytes of data kept: %v, want %v", tc.events, tc.arena, kept, tc.kept)
			}
			if got != nil && (len(got.Events) != 0 || got.Events[:1][0].Type != "") {
				t.Fatal("a recycled page still holds its events")
			}
		})
	}
}
