package reader

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
	"github.com/google/uuid"
)

// ErrNotFound is returned (wrapped) by Event when no event has the id.
var ErrNotFound = errors.New("not found")

// Limits of the queries of this file.
const (
	// MaxTypesPerHour bounds the types an event lookup without a type
	// tries: one point read each.
	MaxTypesPerHour = 1000
	// MaxTopTypesReads bounds the partitions one top-types query reads
	// (type index partitions, and count partitions of the window's
	// partial hours).
	MaxTopTypesReads = 20000
	// MaxTopTypesLimit is the most types a top-types query returns.
	MaxTopTypesLimit = 1000
)

// EventLookup asks for one event by id.
type EventLookup struct {
	// ID is the event id, a version 1 UUID: its time names the hour bucket.
	ID uuid.UUID
	// Type, when not empty, is the event's type; otherwise every type
	// known for the hour is tried (TypesOfHour).
	Type  string
	Trace bool
}

// Event returns the event with q.ID, or an error wrapping ErrNotFound.
// Every type tried costs one point read of one partition (the
// sub-partition is a function of the id).
func (r *Reader) Event(ctx context.Context, q EventLookup) (ev *schema.Event, trace *Trace, err error) {
	start := time.Now()
	defer func() {
		if errors.Is(err, ErrNotFound) {
			r.metrics.observe("event", start, nil)
			return
		}
		r.metrics.observe("event", start, err)
	}()
	at, err := bucket.TimeOf(q.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: id %s is not a version 1 (time) UUID: %w", ErrInvalidQuery, q.ID, err)
	}
	qs := &queryState{ctx: ctx}
	if !bucket.HasPartitionKey(at) {
		// No event of this hour can be stored (bucket.HasPartitionKey).
		if q.Type != "" {
			if err := bucket.ValidateEventType(q.Type); err != nil {
				return nil, nil, fmt.Errorf("%w: parameter type: %w", ErrInvalidQuery, err)
			}
		}
		r.finishQuery(qs, "event", q.ID.String())
		return nil, &qs.trace, fmt.Errorf("event %s: %w", q.ID, ErrNotFound)
	}
	types := []string{q.Type}
	if q.Type != "" {
		if err := bucket.ValidateEventType(q.Type); err != nil {
			return nil, nil, fmt.Errorf("%w: parameter type: %w", ErrInvalidQuery, err)
		}
	} else {
		types, err = r.typesOfHour(qs, at)
		if err != nil {
			return nil, nil, err
		}
		if len(types) > MaxTypesPerHour {
			return nil, nil, fmt.Errorf("%w: the hour of id %s holds %d event types, more than the %d a lookup without a type tries; pass the event's type",
				ErrInvalidQuery, q.ID, len(types), MaxTypesPerHour)
		}
	}
	key, err := schema.AppendEventKey(nil, q.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: id %s: %w", ErrInvalidQuery, q.ID, err)
	}
	for _, typ := range types {
		pk, err := bucket.PartitionKeyFor(q.ID, typ, r.opts.Types.SettingsAt(typ, at).SubPartitions)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrInvalidQuery, err)
		}
		var found *schema.Event
		var decodeErr error
		scan := partitionScan{r: r, query: qs, table: schema.EventsTable, partitions: [][]byte{[]byte(pk.String())},
			start: storage.Bound{Key: key, Inclusive: true}, end: storage.Bound{Key: key, Inclusive: true}, limit: 1}
		err = scan.run(func(_ []byte, row *storage.Row) bool {
			e, _, err := catalog.DecodeEventOfType(typ, row, nil)
			if err != nil {
				decodeErr = err
				return false
			}
			found = &e
			return false
		})
		if err == nil {
			err = decodeErr
		}
		if err != nil {
			return nil, nil, err
		}
		if found != nil {
			r.finishQuery(qs, "event", q.ID.String())
			return found, &qs.trace, nil
		}
	}
	r.finishQuery(qs, "event", q.ID.String())
	return nil, &qs.trace, fmt.Errorf("event %s: %w", q.ID, ErrNotFound)
}

// typesOfHour returns the event types known for the hour bucket holding
// t, sorted: those the type index counted in it, and those with their own
// settings in the settings version of that hour.
func (r *Reader) typesOfHour(qs *queryState, t time.Time) ([]string, error) {
	counts, err := r.typeIndex(qs, t)
	if err != nil {
		return nil, err
	}
	types := make([]string, 0, len(counts))
	for typ := range counts {
		types = append(types, typ)
	}
	for typ := range r.opts.Types.At(t).Types {
		if _, ok := counts[typ]; !ok {
			types = append(types, typ)
		}
	}
	sort.Strings(types)
	return types, nil
}

// typeIndex reads the type index partition of the hour holding t: each
// type's number of events in that hour.
func (r *Reader) typeIndex(qs *queryState, t time.Time) (map[string]int64, error) {
	out := map[string]int64{}
	var decodeErr error
	scan := partitionScan{r: r, query: qs, table: schema.TypeHoursTable, partitions: [][]byte{schema.TypeHoursPartition(t)},
		limit: MaxTypesPerHour + 1}
	err := scan.run(func(_ []byte, row *storage.Row) bool {
		typ, n, err := catalog.DecodeTypeHour(row)
		if err != nil {
			decodeErr = err
			return false
		}
		out[typ] += n
		return true
	})
	if err == nil {
		err = decodeErr
	}
	return out, err
}

// TopTypesQuery asks for the event types with the most events in
// [From, To), counted per whole minute as Counts does.
type TopTypesQuery struct {
	From, To time.Time
	// Limit is the most types returned: 0 means 10, at most
	// MaxTopTypesLimit.
	Limit int
	Trace bool
}

// TypeCount is one event type's number of events in a window.
type TypeCount struct {
	Type  string
	Count int64
}

// TopTypes returns the types with events in the window, by count
// descending, ties by type name ascending. Whole hours of the window are
// counted from the type index (one read per hour); the minutes of a
// partial first or last hour from each type's per-minute counts.
func (r *Reader) TopTypes(ctx context.Context, q TopTypesQuery) (top []TypeCount, trace *Trace, err error) {
	start := time.Now()
	defer func() { r.metrics.observe("top_types", start, err) }()
	limit := q.Limit
	if limit == 0 {
		limit = 10
	}
	if limit < 0 || limit > MaxTopTypesLimit {
		return nil, nil, fmt.Errorf("%w: limit %d is out of range; use 1 to %d", ErrInvalidQuery, q.Limit, MaxTopTypesLimit)
	}
	// The window in whole minutes, as counts are kept: a minute that
	// starts before To is counted.
	// The hour buckets first: a long window is refused for what bounds
	// this query (hours), not for the points a count query would have.
	if b := bucket.CountBuckets(q.From, q.To); b > int64(r.opts.MaxCountBuckets) {
		return nil, nil, fmt.Errorf("%w: the window %s to %s spans %d hour buckets, more than the limit of %d; narrow from and to",
			ErrInvalidQuery, q.From.UTC().Format(time.RFC3339), q.To.UTC().Format(time.RFC3339), b, r.opts.MaxCountBuckets)
	}
	plan, err := planMinutes(q.From, q.To, r.opts.MaxCountBuckets)
	if err != nil {
		return nil, nil, err
	}
	from := plan.from
	to := plan.to.Truncate(time.Minute).Add(minuteIfPartial(plan.to))
	hours := bucket.BucketsCoveringAscending(from, to.Add(-time.Nanosecond))
	qs := &queryState{ctx: ctx}
	reads := 0
	totals := map[string]int64{}
	for _, hour := range hours {
		reads++
		if reads > MaxTopTypesReads {
			return nil, nil, tooManyTopReads(from, to)
		}
		index, err := r.typeIndex(qs, hour)
		if err != nil {
			return nil, nil, err
		}
		if !hour.Before(from) && !hour.Add(time.Hour).After(to) {
			for typ, n := range index {
				totals[typ] += n
			}
			continue
		}
		// A partial hour: count the minutes inside the window.
		types := make([]string, 0, len(index))
		for typ := range index {
			types = append(types, typ)
		}
		slices.Sort(types)
		lower, err := schema.CountsClustering.Encode(nil, maxTime(from, hour))
		if err != nil {
			return nil, nil, fmt.Errorf("%w: parameter from: %w", ErrInvalidQuery, err)
		}
		upper, err := schema.CountsClustering.Encode(nil, minTime(to, hour.Add(time.Hour)))
		if err != nil {
			return nil, nil, fmt.Errorf("%w: parameter to: %w", ErrInvalidQuery, err)
		}
		for _, typ := range types {
			reads++
			if reads > MaxTopTypesReads {
				return nil, nil, tooManyTopReads(from, to)
			}
			partition, err := schema.CountsPartition(typ, hour)
			if err != nil {
				// A corrupt index row names no valid type; skip it
				// rather than fail every window that holds its hour.
				continue
			}
			var decodeErr error
			scan := partitionScan{r: r, query: qs, table: schema.CountsTable, partitions: [][]byte{partition},
				start: storage.Bound{Key: lower, Inclusive: true}, end: storage.Bound{Key: upper, Inclusive: false}}
			err = scan.run(func(_ []byte, row *storage.Row) bool {
				_, n, err := catalog.DecodeCount(row)
				if err != nil {
					decodeErr = err
					return false
				}
				totals[typ] += n
				return true
			})
			if err == nil {
				err = decodeErr
			}
			if err != nil {
				return nil, nil, err
			}
		}
	}
	for typ, n := range totals {
		if n > 0 {
			top = append(top, TypeCount{Type: typ, Count: n})
		}
	}
	slices.SortFunc(top, func(a, b TypeCount) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Type, b.Type)
	})
	if len(top) > limit {
		top = top[:limit]
	}
	r.finishQuery(qs, "top_types", from.Format(time.RFC3339))
	return top, &qs.trace, nil
}

// planMinutes is planCounts at a one-minute step without its points limit.
func planMinutes(from, to time.Time, maxCountBuckets int) (countPlan, error) {
	// A step of an hour has the same bounds checks and a whole number of
	// minutes; the window's start is then re-floored to the minute.
	plan, err := planCounts(CountQuery{Type: "top", From: from, To: to, Step: time.Hour}, maxCountBuckets)
	if err != nil {
		return plan, err
	}
	plan.from = from.UTC().Truncate(time.Minute)
	return plan, nil
}

func tooManyTopReads(from, to time.Time) error {
	return fmt.Errorf("%w: the top types of %s to %s need more than %d partition reads; narrow the window or align it to whole hours",
		ErrInvalidQuery, from.Format(time.RFC3339), to.Format(time.RFC3339), MaxTopTypesReads)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
