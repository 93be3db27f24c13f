package reader

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
	"github.com/google/uuid"
)

// Order is the order of results.
type Order int

const (
	// Desc returns the newest (or greatest) first: the events default.
	Desc Order = iota
	// Asc returns the oldest (or smallest) first.
	Asc
)

// ParseOrder parses "desc" or "asc" (any case); "" is Desc.
func ParseOrder(s string) (Order, error) {
	switch strings.ToLower(s) {
	case "", "desc":
		return Desc, nil
	case "asc":
		return Asc, nil
	}
	return Desc, fmt.Errorf("%w: order %.40q is not asc or desc", ErrInvalidQuery, s)
}

func (o Order) String() string {
	if o == Asc {
		return "asc"
	}
	return "desc"
}

// EventQuery asks for the events of one type in [From, To).
type EventQuery struct {
	Type string
	// From and To bound the event time, inclusive and exclusive; both are
	// truncated to the millisecond (TimeUUID bounds, as Cassandra's
	// minTimeuuid).
	From, To time.Time
	// Limit is the page size: 0 means DefaultLimit, at most MaxLimit.
	Limit     int
	Order     Order
	PageToken string
	Trace     bool
}

// EventPage is one page of an event query.
type EventPage struct {
	Events []schema.Event
	// NextPage is empty exactly when no more events match.
	NextPage string
	// Trace is set when the query asked for it.
	Trace *Trace

	// arena holds the events' data; pages recycles it with Events at
	// Release.
	arena []byte
	pages *eventPages
}

// Release hands the page's memory (Events and their data) back to the
// Reader that returned it, for a later page: call it once nothing uses
// the page or its events any more, or never (the garbage collector then
// frees it). The page must not be used after Release.
func (p *EventPage) Release() {
	if p.pages != nil {
		p.pages.put(p)
	}
}

// eventPages recycles the event slices and data arenas of released
// pages: a latest-50 page through cmd/query allocated about 20 KiB of
// them per request.
type eventPages struct{ pool sync.Pool }

// Largest recycled page: the dashboard's pages (latest 50, 100) are
// recycled; a large page (a script paging 10,000 events at a time) is
// left to the garbage collector, or the pool would keep hundreds of KiB
// per page it holds, and every later small page would carry them.
const (
	maxPooledPageEvents = 256
	maxPooledPageArena  = 64 << 10
)

// get returns a page with room for limit+1 events, up to the most a
// recycled page keeps (appends grow it past that), recycled when one is
// at hand. Room for a large limit up front made every page of a query
// with one (the load harness polls for its probes with limit 10,000 a
// hundred times a second, and finds a few) a 360 KiB allocation the pool
// would not keep.
func (pp *eventPages) get(limit int) *EventPage {
	n := min(limit+1, maxPooledPageEvents)
	if p, _ := pp.pool.Get().(*EventPage); p != nil {
		p.Events = slices.Grow(p.Events[:0], n)
		return p
	}
	return &EventPage{Events: make([]schema.Event, 0, n), pages: pp}
}

func (pp *eventPages) put(p *EventPage) {
	events, arena := p.Events, p.arena
	*p = EventPage{pages: pp}
	if cap(events) > maxPooledPageEvents || cap(arena) > maxPooledPageArena {
		return
	}
	clear(events) // the strings they hold
	p.Events, p.arena = events[:0], arena[:0]
	pp.pool.Put(p)
}

// Events runs an event query: it walks the hour buckets of the window
// newest first (oldest first for Asc), merging the sub-partitions of each,
// and stops as soon as it has Limit events and knows whether there are
// more.
func (r *Reader) Events(ctx context.Context, q EventQuery) (page *EventPage, err error) {
	start := time.Now()
	defer func() { r.metrics.observe("events", start, err) }()
	if err := bucket.ValidateEventType(q.Type); err != nil {
		return nil, fmt.Errorf("%w: parameter type: %w", ErrInvalidQuery, err)
	}
	limit, err := checkLimit(q.Limit)
	if err != nil {
		return nil, err
	}
	if q.Order != Asc && q.Order != Desc {
		return nil, fmt.Errorf("%w: unknown order %d", ErrInvalidQuery, q.Order)
	}
	from, to := q.From.UTC().Truncate(time.Millisecond), q.To.UTC().Truncate(time.Millisecond)
	if !from.Before(to) {
		return nil, fmt.Errorf("%w: from %s is not before to %s; the window is [from, to)", ErrInvalidQuery, from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano))
	}
	// The TTL clamp: nothing older than now - TTL can be live (each hour
	// with the TTL it was written with).
	if floor := r.opts.Types.LiveFrom(q.Type, r.opts.Now()).UTC().Truncate(time.Millisecond); from.Before(floor) {
		from = floor
	}
	if n := bucket.CountBuckets(from, to); n > int64(r.opts.MaxBuckets) {
		return nil, fmt.Errorf("%w: the window %s to %s spans %d hour buckets (after clamping to the type's TTL), more than the limit of %d; narrow from and to",
			ErrInvalidQuery, from.Format(time.RFC3339), to.Format(time.RFC3339), n, r.opts.MaxBuckets)
	}
	fp := fingerprint("events", q.Type, q.Order.String())
	var after *uuid.UUID
	if q.PageToken != "" {
		last, err := decodeToken(q.PageToken, tokenKindEvents, fp)
		if err != nil {
			return nil, err
		}
		id, err := uuid.FromBytes(last)
		if err != nil || id.Version() != 1 {
			return nil, fmt.Errorf("%w: page token %.40q does not hold an event id; pass the next_page value of the previous page unchanged", ErrInvalidQuery, q.PageToken)
		}
		after = &id
	}

	page = r.pages.get(limit)
	qs := &queryState{ctx: ctx}
	if from.Before(to) {
		if err := r.walkEvents(qs, q, from, to, after, limit, page); err != nil {
			return nil, err
		}
	}
	r.finishQuery(qs, "events", q.Type)
	if q.Trace {
		page.Trace = &qs.trace
	}
	return page, nil
}

func (r *Reader) walkEvents(qs *queryState, q EventQuery, from, to time.Time, after *uuid.UUID, limit int, page *EventPage) error {
	lower, err := bucket.MinTimeUUID(from)
	if err != nil {
		return fmt.Errorf("%w: parameter from: %w", ErrInvalidQuery, err)
	}
	upper, err := bucket.MinTimeUUID(to)
	if err != nil {
		return fmt.Errorf("%w: parameter to: %w", ErrInvalidQuery, err)
	}
	// Ids in [lower, upper), resuming strictly after the last id returned
	// in the query's order.
	asc := q.Order == Asc
	oldest, oldestInclusive, newest := lower, true, upper
	var resumeHour time.Time
	if after != nil {
		t, _ := bucket.TimeOf(*after)
		resumeHour = bucket.HourOf(t)
		if asc {
			oldest, oldestInclusive = *after, false
		} else {
			newest = *after
		}
	}
	start, end, reverse := catalog.EventKeyRange(oldest, oldestInclusive, newest, false, asc)
	var hours []time.Time
	if asc {
		hours = bucket.BucketsCoveringAscending(from, to)
	} else {
		hours = bucket.BucketsCovering(from, to)
	}
	hours = keyedHours(hours)
	// The whole walk at once: through cmd/query one request to the node
	// that holds the type, however many hours it crosses.
	w := &Walk{Table: schema.EventsTable, Start: start, End: end, Reverse: reverse, Limit: limit + 1}
	walked := hours[:0:0] // the hour of each group
	for _, hour := range hours {
		if after != nil && (asc && hour.Before(resumeHour) || !asc && hour.After(resumeHour)) {
			continue // before the page we resume from
		}
		// Each hour with the sub-partitions it was written with.
		keys, err := bucket.PartitionsFor(hour, q.Type, r.opts.Types.SettingsAt(q.Type, hour).SubPartitions)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidQuery, err)
		}
		partitions := make([][]byte, len(keys))
		for i, k := range keys {
			partitions[i] = []byte(k.String())
		}
		w.Groups = append(w.Groups, partitions)
		walked = append(walked, hour)
	}
	var lastID uuid.UUID
	more := false
	arena := page.arena[:0] // the page's event data, shared to save allocations
	defer func() { page.arena = arena }()
	var decodeErr error
	err = r.walk(qs, w, func(_ int, row *storage.Row) bool {
		if len(page.Events) == limit || len(page.Events) > 0 && len(arena) >= r.opts.MaxPageBytes {
			more = true // this row proves there is more
			return false
		}
		var e schema.Event
		var err error
		if cap(arena) == 0 {
			arena = make([]byte, 0, arenaSize(row, min(limit-len(page.Events), maxPooledPageEvents)))
		}
		e, arena, err = catalog.DecodeEventOfType(q.Type, row, arena)
		if err != nil {
			decodeErr = err
			return false
		}
		page.Events = append(page.Events, e)
		lastID = e.ID
		return true
	})
	if err == nil {
		err = decodeErr
	}
	if err != nil {
		if ge, ok := errors.AsType[*WalkGroupError](err); ok && ge.Group < len(walked) && errors.Is(err, storage.ErrTooManyTombstones) {
			return r.tombstoneError(err, q, walked[ge.Group])
		}
		return err
	}
	if more {
		page.NextPage = encodeToken(tokenKindEvents, fingerprint("events", q.Type, q.Order.String()), lastID[:])
	}
	return nil
}

// arenaSize is the first capacity of a page's data arena: room for n
// more events like row (appends grow it past that), within 1 to 64 KiB.
// A fixed 64 KiB made a latest-50 page of 200-byte events allocate six
// times what it held: most of cmd/query's garbage.
func arenaSize(row *storage.Row, n int) int {
	size := 0
	for i := range row.Cells {
		size += len(row.Cells[i].Value)
	}
	return min(max(size*n+size*n/4, 1<<10), 64<<10)
}

// tombstoneError adds to err a window that skips the hour bucket where the
// query gave up.
func (r *Reader) tombstoneError(err error, q EventQuery, hour time.Time) error {
	var hint string
	if q.Order == Asc {
		hint = fmt.Sprintf("from=%s skips that hour", hour.Add(time.Hour).Format(time.RFC3339))
	} else {
		hint = fmt.Sprintf("to=%s skips that hour", hour.Format(time.RFC3339))
	}
	return fmt.Errorf("%w (hour bucket %s of type %s; for example %s)", err, hour.Format(time.RFC3339), q.Type, hint)
}

func checkLimit(limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultLimit, nil
	case limit < 0 || limit > MaxLimit:
		return 0, fmt.Errorf("%w: limit %d is outside 1..%d", ErrInvalidQuery, limit, MaxLimit)
	}
	return limit, nil
}
