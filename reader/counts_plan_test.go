package reader

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestCountsHugeStep runs count queries whose step or window once
// overflowed the point count (a makeslice panic, or an empty answer): each
// must be refused with ErrInvalidQuery or answered with points that cover
// the window.
func TestCountsHugeStep(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	clock := &fixedClock{now: now}
	db := openStore(t, clock)
	r, err := New(db, Options{Now: clock.Now, MaxCountBuckets: 200000})
	if err != nil {
		t.Fatal(err)
	}
	maxStep := time.Duration(1<<63-1) / time.Minute * time.Minute
	year := 8766 * time.Hour
	in1975 := time.Date(1975, 6, 1, 12, 0, 0, 0, time.UTC)
	queries := []CountQuery{
		// time.Truncate put from 14 years back (at a multiple of 280 years
		// since year 1), and 14 + 280 years overflowed time.Duration.
		{Type: "click", From: in1975.Add(-time.Hour), To: in1975, Step: 280 * year},
		{Type: "click", From: now.Add(-time.Hour), To: now, Step: 200 * year},
		{Type: "click", From: now.Add(-time.Hour), To: now, Step: maxStep},
		{Type: "click", From: now.Add(-time.Hour), To: now, Step: 40 * 24 * time.Hour},
		{Type: "click", From: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), To: now, Step: maxStep},
		{Type: "click", From: time.Date(-5000, 1, 1, 0, 0, 0, 0, time.UTC), To: now, Step: time.Hour},
		{Type: "click", From: now, To: time.Date(1<<40, 1, 1, 0, 0, 0, 0, time.UTC), Step: maxStep},
	}
	for _, q := range queries {
		points, err := r.Counts(context.Background(), q)
		if err != nil {
			if !errors.Is(err, ErrInvalidQuery) {
				t.Errorf("%s..%s step %s: got %v, want ErrInvalidQuery or points", q.From, q.To, q.Step, err)
			}
			continue
		}
		if len(points) == 0 || points[0].Time.After(q.From) || !points[len(points)-1].Time.Add(q.Step).After(q.To.Add(-time.Nanosecond)) {
			t.Errorf("%s..%s step %s: %d points do not cover the window", q.From, q.To, q.Step, len(points))
		}
	}
}

// TestCountPointsAlignedToEpoch checks points are multiples of the step
// since the Unix epoch, as docs/http-api.md says, also for steps that do not
// divide a day (time.Truncate would align them to year 1).
func TestCountPointsAlignedToEpoch(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	clock := &fixedClock{now: now}
	r, err := New(openStore(t, clock), Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []time.Duration{time.Minute, 7 * time.Minute, 13 * time.Minute, 90 * time.Minute, 24 * time.Hour} {
		q := CountQuery{Type: "click", From: now.Add(-3*time.Hour - 17*time.Second), To: now, Step: step}
		points, err := r.Counts(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		stepSeconds := int64(step / time.Second)
		first := points[0].Time
		if first.Unix()%stepSeconds != 0 || first.After(q.From) || !first.Add(step).After(q.From) {
			t.Errorf("step %s: first point %s is not the multiple of the step since the epoch holding from %s", step, first, q.From)
		}
		if last := points[len(points)-1].Time; !last.Before(q.To) || last.Add(step).Before(q.To) {
			t.Errorf("step %s: last point %s does not hold the end of the window %s", step, last, q.To)
		}
	}
}

// FuzzPlanCounts checks planning a count query never panics or overflows:
// it returns ErrInvalidQuery or points aligned to the step since the epoch,
// at most MaxCountPoints of them, that cover [From, To) and no more.
func FuzzPlanCounts(f *testing.F) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	f.Add(now.Add(-time.Hour).Unix(), int64(0), now.Unix(), int64(0), int64(time.Minute))
	f.Add(now.Add(-time.Hour).Unix(), int64(500), now.Unix(), int64(999999999), int64(7*time.Minute))
	f.Add(now.Add(-7*24*time.Hour).Unix(), int64(0), now.Unix(), int64(0), int64(time.Minute))
	f.Add(now.Add(-time.Hour).Unix(), int64(0), now.Unix(), int64(0), int64(1<<63-1))
	f.Add(int64(-62135596800), int64(0), now.Unix(), int64(0), int64(1<<63-1))
	f.Add(int64(-1<<62), int64(0), int64(1<<62), int64(0), int64(time.Hour))
	f.Add(int64(-90), int64(0), int64(30), int64(0), int64(time.Minute))
	f.Add(now.Unix(), int64(0), now.Unix(), int64(0), int64(-time.Minute))
	f.Fuzz(func(t *testing.T, fromSec, fromNsec, toSec, toNsec, step int64) {
		q := CountQuery{From: time.Unix(fromSec, fromNsec%1e9), To: time.Unix(toSec, toNsec%1e9), Step: time.Duration(step)}
		p, err := planCounts(q, 1<<20)
		if err != nil {
			if !errors.Is(err, ErrInvalidQuery) {
				t.Fatalf("got %v, want ErrInvalidQuery", err)
			}
			return
		}
		if q.Step == 0 {
			q.Step = time.Minute
		}
		if p.n < 1 || p.n > MaxCountPoints {
			t.Fatalf("%d points", p.n)
		}
		if p.stepSeconds*int64(time.Second) != int64(q.Step) || p.fromUnix%p.stepSeconds != 0 {
			t.Fatalf("from %d is not a multiple of the step %d s", p.fromUnix, p.stepSeconds)
		}
		if !p.from.Equal(time.Unix(p.fromUnix, 0)) || p.from.After(q.From) || p.fromUnix+p.stepSeconds <= q.From.Unix() {
			t.Fatalf("first point %s does not hold from %s", p.from, q.From)
		}
		// The last point starts before To and ends at or after it.
		last := p.fromUnix + int64(p.n-1)*p.stepSeconds
		if !time.Unix(last, 0).Before(q.To) || time.Unix(last+p.stepSeconds, 0).Before(q.To) {
			t.Fatalf("last point at %d s does not hold the end of [%s, %s)", last, q.From, q.To)
		}
	})
}
