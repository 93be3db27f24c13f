package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/reader"
	"github.com/google/uuid"
)

const (
	latestLimit  = 100
	latestWindow = 24 * time.Hour
)

// results is everything the report prints.
type results struct {
	load      loadResult
	diskBytes int64
	mem       memory

	// latest holds the latency of each measured latest-100 query.
	latest []time.Duration

	// scans holds the time of each hour scan (all its pages).
	scans      []time.Duration
	scanRows   int64
	scanPages  int
	scanTime   time.Duration
	scanMaxRow int

	latestTrace, scanTrace, countsTrace string

	queryPhase         time.Duration
	gcCount            uint32
	gcPause            time.Duration
	storeEventsCounted int64
}

// runQueries checks the store's total count, then runs the latest-100
// queries, the hour scans and one traced query of each kind.
func runQueries(ctx context.Context, rd *reader.Reader, cfg config) (*results, error) {
	res := &results{}
	total, err := countAll(ctx, rd, cfg)
	if err != nil {
		return nil, err
	}
	if total != int64(cfg.events) {
		return nil, fmt.Errorf("reader.Counts over the whole span adds up to %d events, want %d", total, cfg.events)
	}
	res.storeEventsCounted = total

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rng := rand.New(rand.NewPCG(cfg.seed, 0x71756572696573))
	start := time.Now()

	fmt.Fprintf(os.Stderr, "latest-100: %d queries (+%d warm-up)\n", cfg.queries, cfg.warmup)
	for i := range cfg.warmup + cfg.queries {
		typ := typeName(rng.IntN(cfg.types))
		d, err := latest(ctx, rd, typ, false)
		if err != nil {
			return nil, err
		}
		if i >= cfg.warmup {
			res.latest = append(res.latest, d.took)
		}
	}

	fmt.Fprintf(os.Stderr, "hour scans: %d (page limit %d, order %s)\n", cfg.hourScans, cfg.pageLimit, cfg.scanOrder)
	for range cfg.hourScans {
		typ := typeName(rng.IntN(cfg.types))
		hour := benchNow.Add(-time.Duration(1+rng.IntN(cfg.hours)) * time.Hour)
		s, err := scanHour(ctx, rd, cfg, typ, hour, false)
		if err != nil {
			return nil, err
		}
		res.scans = append(res.scans, s.took)
		res.scanRows += int64(s.rows)
		res.scanPages += s.pages
		res.scanTime += s.took
		res.scanMaxRow = max(res.scanMaxRow, s.rows)
	}
	res.queryPhase = time.Since(start)
	runtime.ReadMemStats(&after)
	res.gcCount = after.NumGC - before.NumGC
	res.gcPause = time.Duration(after.PauseTotalNs - before.PauseTotalNs)

	// One traced query of each kind, outside the measurements.
	typ := typeName(0)
	l, err := latest(ctx, rd, typ, true)
	if err != nil {
		return nil, err
	}
	res.latestTrace = fmt.Sprintf("latest-100 of %s, %s: %s", typ, l.took.Round(time.Microsecond), describeTrace(l.trace))
	hour := benchNow.Add(-time.Duration(cfg.hours/2) * time.Hour)
	s, err := scanHour(ctx, rd, cfg, typ, hour, true)
	if err != nil {
		return nil, err
	}
	res.scanTrace = fmt.Sprintf("hour scan of %s at %s, %d rows in %d pages, %s; first page: %s",
		typ, hour.Format(time.RFC3339), s.rows, s.pages, s.took.Round(time.Microsecond), describeTrace(s.trace))
	_, ct, err := rd.CountsTrace(ctx, reader.CountQuery{Type: typ, From: hour, To: hour.Add(time.Hour), Step: time.Hour, Trace: true})
	if err != nil {
		return nil, fmt.Errorf("cannot count %s at %s: %w", typ, hour.Format(time.RFC3339), err)
	}
	res.countsTrace = fmt.Sprintf("counts of %s at %s (step 1h): %s", typ, hour.Format(time.RFC3339), describeTrace(ct))
	return res, nil
}

// countAll adds up reader.Counts of every type over the whole span.
func countAll(ctx context.Context, rd *reader.Reader, cfg config) (int64, error) {
	from := benchNow.Add(-time.Duration(cfg.hours) * time.Hour)
	var total int64
	for i := range cfg.types {
		typ := typeName(i)
		points, err := rd.Counts(ctx, reader.CountQuery{Type: typ, From: from, To: benchNow, Step: time.Hour})
		if err != nil {
			return 0, fmt.Errorf("cannot count %s over %d hours: %w", typ, cfg.hours, err)
		}
		for _, p := range points {
			total += p.Count
		}
	}
	return total, nil
}

type latestResult struct {
	took  time.Duration
	trace *reader.Trace
}

// latest runs one latest-100 query and checks its page: 100 events of typ,
// newest first, inside the window, with a next page.
func latest(ctx context.Context, rd *reader.Reader, typ string, trace bool) (latestResult, error) {
	from := benchNow.Add(-latestWindow)
	q := reader.EventQuery{Type: typ, From: from, To: benchNow, Limit: latestLimit, Trace: trace}
	t0 := time.Now()
	page, err := rd.Events(ctx, q)
	took := time.Since(t0)
	if err != nil {
		return latestResult{}, fmt.Errorf("latest-100 of %s failed: %w", typ, err)
	}
	if len(page.Events) != latestLimit || page.NextPage == "" {
		return latestResult{}, fmt.Errorf("latest-100 of %s returned %d events (next page %t), want %d and a next page",
			typ, len(page.Events), page.NextPage != "", latestLimit)
	}
	if err := checkEvents(page.Events, typ, from, benchNow, reader.Desc, uuid.UUID{}); err != nil {
		return latestResult{}, fmt.Errorf("latest-100 of %s: %w", typ, err)
	}
	return latestResult{took: took, trace: page.Trace}, nil
}

type scanResult struct {
	took        time.Duration
	rows, pages int
	trace       *reader.Trace // of the first page
}

// scanHour reads every event of typ in [hour, hour+1h), page by page, and
// checks the rows against reader.Counts for the same hour. Only the Events
// calls are timed.
func scanHour(ctx context.Context, rd *reader.Reader, cfg config, typ string, hour time.Time, trace bool) (scanResult, error) {
	end := hour.Add(time.Hour)
	q := reader.EventQuery{Type: typ, From: hour, To: end, Limit: cfg.pageLimit, Order: cfg.scanOrder, Trace: trace}
	var res scanResult
	var last uuid.UUID
	for {
		t0 := time.Now()
		page, err := rd.Events(ctx, q)
		res.took += time.Since(t0)
		if err != nil {
			return res, fmt.Errorf("hour scan of %s at %s, page %d: %w", typ, hour.Format(time.RFC3339), res.pages+1, err)
		}
		res.pages++
		if res.pages == 1 {
			res.trace = page.Trace
		}
		if err := checkEvents(page.Events, typ, hour, end, cfg.scanOrder, last); err != nil {
			return res, fmt.Errorf("hour scan of %s at %s, page %d: %w", typ, hour.Format(time.RFC3339), res.pages, err)
		}
		res.rows += len(page.Events)
		if len(page.Events) > 0 {
			last = page.Events[len(page.Events)-1].ID
		}
		if page.NextPage == "" {
			break
		}
		q.PageToken, q.Trace = page.NextPage, false
	}
	points, err := rd.Counts(ctx, reader.CountQuery{Type: typ, From: hour, To: end, Step: time.Hour})
	if err != nil {
		return res, fmt.Errorf("cannot count %s at %s: %w", typ, hour.Format(time.RFC3339), err)
	}
	if len(points) != 1 || int64(res.rows) != points[0].Count {
		return res, fmt.Errorf("hour scan of %s at %s read %d events in %d pages, but reader.Counts says %v: the event and count tables disagree",
			typ, hour.Format(time.RFC3339), res.rows, res.pages, points)
	}
	return res, nil
}

// checkEvents checks that events are of typ, inside [from, to), strictly in
// order and after prev (a zero prev: the first page).
func checkEvents(events []schema.Event, typ string, from, to time.Time, order reader.Order, prev uuid.UUID) error {
	for i := range events {
		e := &events[i]
		if e.Type != typ {
			return fmt.Errorf("event %s has type %q, want %q", e.ID, e.Type, typ)
		}
		t := e.Time()
		if t.Before(from) || !t.Before(to) {
			return fmt.Errorf("event %s at %s is outside [%s, %s)", e.ID, t.Format(time.RFC3339Nano), from.Format(time.RFC3339), to.Format(time.RFC3339))
		}
		if prev != (uuid.UUID{}) {
			c := bucket.CompareTimeUUID(e.ID, prev)
			if order == reader.Desc && c >= 0 || order == reader.Asc && c <= 0 {
				return fmt.Errorf("event %s follows %s out of %s order", e.ID, prev, order)
			}
		}
		prev = e.ID
	}
	return nil
}

func describeTrace(t *reader.Trace) string {
	if t == nil {
		return "no trace returned"
	}
	return fmt.Sprintf("%s; %d rows, %d SSTables skipped, %d memtables", t, t.Rows, t.SSTablesSkipped, t.Memtables)
}
