package reader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

// CountQuery asks for the number of events of one type per Step in
// [From, To).
type CountQuery struct {
	Type string
	// From is rounded down to a multiple of Step since the Unix epoch; a
	// minute that starts before To is counted whole (counts are kept per
	// minute).
	From, To time.Time
	// Step is a whole number of minutes; 0 means one minute. Points are
	// aligned to multiples of Step since the Unix epoch (UTC): point i is
	// at floor(From/Step)*Step + i*Step, and the last one is the one that
	// holds the instant before To.
	Step  time.Duration
	Trace bool
}

// CountPoint is the number of events in [Time, Time+Step).
type CountPoint struct {
	Time  time.Time
	Count int64
}

// Counts returns one point per step of the window, zeros included, oldest
// first.
func (r *Reader) Counts(ctx context.Context, q CountQuery) (points []CountPoint, err error) {
	points, _, err = r.CountsTrace(ctx, q)
	return points, err
}

// countPlan is the points of a count query: n steps of stepSeconds from
// fromUnix (a multiple of stepSeconds), covering [from, to).
type countPlan struct {
	from, to    time.Time
	fromUnix    int64
	stepSeconds int64
	n           int
}

// Times a count query may name: four-digit years, as RFC 3339 writes
// them, so every difference of two fits in an int64 of seconds.
var (
	minCountTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	maxCountTime = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
)

// planCounts checks a count query and computes its points without
// overflow for any From, To and Step: every client mistake wraps
// ErrInvalidQuery.
func planCounts(q CountQuery, maxCountBuckets int) (countPlan, error) {
	step := q.Step
	if step == 0 {
		step = time.Minute
	}
	if step < time.Minute || step%time.Minute != 0 {
		return countPlan{}, fmt.Errorf("%w: step %s is not a whole number of minutes (use 1m, 5m, 1h, ...)", ErrInvalidQuery, step)
	}
	qFrom, to := q.From.UTC(), q.To.UTC()
	for _, t := range []struct {
		name string
		at   time.Time
	}{{"from", qFrom}, {"to", to}} {
		if t.at.Before(minCountTime) || t.at.After(maxCountTime) {
			return countPlan{}, fmt.Errorf("%w: %s %s is outside years 1 to 9999", ErrInvalidQuery, t.name, t.at.Format(time.RFC3339))
		}
	}
	if !qFrom.Before(to) {
		return countPlan{}, fmt.Errorf("%w: from %s is not before to %s; the window is [from, to)", ErrInvalidQuery, qFrom.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	stepSeconds := int64(step / time.Second)
	// Floor division: times before 1970 have negative Unix seconds.
	fromUnix := qFrom.Unix() / stepSeconds * stepSeconds
	if fromUnix > qFrom.Unix() {
		fromUnix -= stepSeconds
	}
	// to > from: n = ceil((to - fromUnix) / step), to counted with its
	// fraction of a second.
	span := to.Unix() - fromUnix
	n := span / stepSeconds
	if span%stepSeconds != 0 || to.Nanosecond() != 0 {
		n++
	}
	from := time.Unix(fromUnix, 0).UTC()
	if n > MaxCountPoints {
		return countPlan{}, fmt.Errorf("%w: from %s to %s in steps of %s is %d points, more than %d; use a larger step or a narrower window",
			ErrInvalidQuery, from.Format(time.RFC3339), to.Format(time.RFC3339), step, n, MaxCountPoints)
	}
	if b := bucket.CountBuckets(from, to); b > int64(maxCountBuckets) {
		return countPlan{}, fmt.Errorf("%w: the window %s to %s (from rounded down to a multiple of the step %s) spans %d hour buckets, more than the limit of %d for counts; narrow from and to, or use a smaller step",
			ErrInvalidQuery, from.Format(time.RFC3339), to.Format(time.RFC3339), step, b, maxCountBuckets)
	}
	return countPlan{from: from, to: to, fromUnix: fromUnix, stepSeconds: stepSeconds, n: int(n)}, nil
}

// CountsTrace is Counts with its trace.
func (r *Reader) CountsTrace(ctx context.Context, q CountQuery) (points []CountPoint, trace *Trace, err error) {
	start := time.Now()
	defer func() { r.metrics.observe("counts", start, err) }()
	if err := bucket.ValidateEventType(q.Type); err != nil {
		return nil, nil, fmt.Errorf("%w: parameter type: %w", ErrInvalidQuery, err)
	}
	plan, err := planCounts(q, r.opts.MaxCountBuckets)
	if err != nil {
		return nil, nil, err
	}
	from, to := plan.from, plan.to
	points = make([]CountPoint, plan.n)
	for i := range points {
		points[i].Time = time.Unix(plan.fromUnix+int64(i)*plan.stepSeconds, 0).UTC()
	}
	lower, err := schema.CountsClustering.Encode(nil, from)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: parameter from: %w", ErrInvalidQuery, err)
	}
	upper, err := schema.CountsClustering.Encode(nil, to.Truncate(time.Minute).Add(minuteIfPartial(to)))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: parameter to: %w", ErrInvalidQuery, err)
	}
	hours := keyedHours(bucket.BucketsCoveringAscending(from, to))
	partitions := make([][]byte, len(hours))
	for i, hour := range hours {
		if partitions[i], err = schema.CountsPartition(q.Type, hour); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrInvalidQuery, err)
		}
	}
	lo, hi := storage.Bound{Key: lower, Inclusive: true}, storage.Bound{Key: upper, Inclusive: false}
	// addCount adds a row's count to its point; a row it cannot decode
	// goes to *decodeErr (one per goroutine of sliceHours) and stops.
	addCount := func(row *storage.Row, decodeErr *error) bool {
		minute, count, err := catalog.DecodeCount(row)
		if err != nil {
			*decodeErr = err
			return false
		}
		i := (minute.Unix() - plan.fromUnix) / plan.stepSeconds
		if minute.Unix() >= plan.fromUnix && i < int64(len(points)) {
			// Hours may run in parallel; a step may span several.
			atomic.AddInt64(&points[i].Count, count)
		}
		return true
	}
	qs := &queryState{ctx: ctx}
	// Through a store that runs walks where the data is (cmd/query), all
	// the hours in one request to the node holding the type.
	walked := false
	if gw, ok := r.db.(GroupWalker); ok && len(partitions) > 1 {
		groups := make([][][]byte, len(partitions))
		for i, p := range partitions {
			groups[i] = [][]byte{p}
		}
		w := &Walk{Table: schema.CountsTable, Groups: groups, Start: lo, End: hi,
			MaxTombstones: r.opts.FailTombstones}
		var decodeErr error
		tr, err := gw.WalkGroups(ctx, w, func(_ int, row *storage.Row) bool { return addCount(row, &decodeErr) })
		if !errors.Is(err, ErrWalkUnsupported) {
			qs.trace.Merge(&tr)
			qs.partition = partitions[len(partitions)-1]
			if err == nil {
				err = decodeErr
			}
			if err != nil {
				return nil, nil, err
			}
			walked = true
		}
	}
	if !walked {
		err = r.sliceHours(qs, partitions, func(hqs *queryState, partition []byte) error {
			scan := partitionScan{r: r, query: hqs, table: schema.CountsTable, partitions: [][]byte{partition}, start: lo, end: hi}
			var decodeErr error
			err := scan.run(func(_ []byte, row *storage.Row) bool { return addCount(row, &decodeErr) })
			if err == nil {
				err = decodeErr
			}
			return err
		})
		if err != nil {
			return nil, nil, err
		}
	}
	r.finishQuery(qs, "counts", q.Type)
	return points, &qs.trace, nil
}

// minuteIfPartial makes an exclusive bound at a partial minute include that
// minute's count: counts are kept per whole minute.
func minuteIfPartial(t time.Time) time.Duration {
	if t.Truncate(time.Minute).Equal(t) {
		return 0
	}
	return time.Minute
}

// RemoteParallelHours is Options.ParallelHours for a remote store: 24
// hours one after the other through cmd/query would be 25 NATS round trips
// back to back.
const RemoteParallelHours = 8

// sliceHours runs slice on each partition (one per hour), at most
// Options.ParallelHours at once, each with a queryState of its own, and adds
// their traces to qs in partition order. The first failure cancels the
// others and is returned. Each hour's slices get the whole tombstone
// budget (a running total cannot be shared without serialising them);
// the sum is checked once all are done, so the query fails exactly when
// it would have one hour after the other: when the total passes the
// budget.
func (r *Reader) sliceHours(qs *queryState, partitions [][]byte, slice func(hqs *queryState, partition []byte) error) error {
	if len(partitions) <= 1 || r.opts.ParallelHours <= 1 {
		for _, p := range partitions {
			if err := slice(qs, p); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancel(qs.ctx)
	defer cancel()
	states := make([]queryState, len(partitions))
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	sem := make(chan struct{}, r.opts.ParallelHours)
	for i, p := range partitions {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			states[i].ctx = ctx
			if err := slice(&states[i], p); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for i := range states {
		qs.trace.Merge(&states[i].trace)
		if states[i].partition != nil {
			qs.partition = states[i].partition
		}
	}
	if firstErr != nil {
		return firstErr
	}
	if err := qs.ctx.Err(); err != nil {
		return fmt.Errorf("cannot slice %s: %w", schema.CountsTable, err)
	}
	if qs.trace.Tombstones > r.opts.FailTombstones {
		s := partitionScan{r: r, table: schema.CountsTable}
		return s.wrap(qs.partition, storage.ErrTooManyTombstones)
	}
	return nil
}

// keyedHours returns the hours that a partition key can name (years
// 2000..2099, bucket.HasPartitionKey), in their order: the writer stores no
// event in any other, so a window reaching past them reads nothing there
// instead of failing.
func keyedHours(hours []time.Time) []time.Time {
	out := hours[:0:0]
	for _, h := range hours {
		if bucket.HasPartitionKey(h) {
			out = append(out, h)
		}
	}
	return out
}
