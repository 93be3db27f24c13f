package reader

import (
	"context"
	"fmt"
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
	// From is truncated to the step; a minute that starts before To is
	// counted whole (counts are kept per minute).
	From, To time.Time
	// Step is a whole number of minutes; 0 means one minute. Points are
	// aligned to multiples of Step since the Unix epoch (UTC).
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

// CountsTrace is Counts with its trace.
func (r *Reader) CountsTrace(ctx context.Context, q CountQuery) (points []CountPoint, trace *Trace, err error) {
	start := time.Now()
	defer func() { r.metrics.observe("counts", start, err) }()
	if err := bucket.ValidateEventType(q.Type); err != nil {
		return nil, nil, fmt.Errorf("%w: parameter type: %w", ErrInvalidQuery, err)
	}
	step := q.Step
	if step == 0 {
		step = time.Minute
	}
	if step < time.Minute || step%time.Minute != 0 {
		return nil, nil, fmt.Errorf("%w: step %s is not a whole number of minutes (use 1m, 5m, 1h, ...)", ErrInvalidQuery, step)
	}
	from, to := q.From.UTC().Truncate(step), q.To.UTC()
	if !from.Before(to) {
		return nil, nil, fmt.Errorf("%w: from %s is not before to %s; the window is [from, to)", ErrInvalidQuery, q.From.UTC().Format(time.RFC3339), to.Format(time.RFC3339))
	}
	n := int64(to.Sub(from)+step-1) / int64(step)
	if to.Sub(from) < 0 || n > MaxCountPoints {
		return nil, nil, fmt.Errorf("%w: from %s to %s in steps of %s is %d points, more than %d; use a larger step or a narrower window",
			ErrInvalidQuery, from.Format(time.RFC3339), to.Format(time.RFC3339), step, n, MaxCountPoints)
	}
	if b := bucket.CountBuckets(from, to); b > int64(r.opts.MaxCountBuckets) {
		return nil, nil, fmt.Errorf("%w: the window %s to %s spans %d hour buckets, more than the limit of %d for counts; narrow from and to",
			ErrInvalidQuery, from.Format(time.RFC3339), to.Format(time.RFC3339), b, r.opts.MaxCountBuckets)
	}
	points = make([]CountPoint, n)
	for i := range points {
		points[i].Time = from.Add(time.Duration(i) * step)
	}
	lower, err := schema.CountsClustering.Encode(nil, from)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: parameter from: %w", ErrInvalidQuery, err)
	}
	upper, err := schema.CountsClustering.Encode(nil, to.Truncate(time.Minute).Add(minuteIfPartial(to)))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: parameter to: %w", ErrInvalidQuery, err)
	}
	qs := &queryState{ctx: ctx}
	for _, hour := range bucket.BucketsCoveringAscending(from, to) {
		partition, err := schema.CountsPartition(q.Type, hour)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrInvalidQuery, err)
		}
		var decodeErr error
		scan := partitionScan{r: r, query: qs, table: schema.CountsTable, partitions: [][]byte{partition},
			start: storage.Bound{Key: lower, Inclusive: true}, end: storage.Bound{Key: upper, Inclusive: false}}
		err = scan.run(func(_ []byte, row *storage.Row) bool {
			minute, count, err := catalog.DecodeCount(row)
			if err != nil {
				decodeErr = err
				return false
			}
			i := int(minute.Sub(from) / step)
			if i >= 0 && i < len(points) {
				points[i].Count += count
			}
			return true
		})
		if err == nil {
			err = decodeErr
		}
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
