package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/eventide/eventide/loadtest/internal/hist"
)

// probeTracker times probe events from their intended publish to the
// moment a query over HTTP returns them: the publish-to-queryable
// latency, measured from the intended start like every other latency, to
// within the polling interval.
//
// Memory: the sets hold only probes in flight; ackedBits records one bit per
// probe of the run (20 probes/s for a day is 216 KB).
type probeTracker struct {
	api       *apiClient
	eventType string
	lat       *hist.Set // kind "queryable", one worker: the poller

	mu        sync.Mutex
	inFlight  map[int64]time.Time // publishing: intended start
	pending   map[int64]time.Time // acked, not seen yet: intended start
	seenEarly map[int64]time.Time // seen before its ack arrived: when
	ackedBits []uint64            // bit set of acked probes
	seen      int64
	drops     int64
}

func newProbeTracker(api *apiClient, eventType string, lat *hist.Set) *probeTracker {
	return &probeTracker{
		api: api, eventType: eventType, lat: lat,
		inFlight: map[int64]time.Time{}, pending: map[int64]time.Time{}, seenEarly: map[int64]time.Time{},
	}
}

func (p *probeTracker) publishing(n int64, intended time.Time) {
	p.mu.Lock()
	p.inFlight[n] = intended
	p.mu.Unlock()
}

func (p *probeTracker) acked(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	intended := p.inFlight[n]
	delete(p.inFlight, n)
	for int(n/64) >= len(p.ackedBits) {
		p.ackedBits = append(p.ackedBits, 0)
	}
	p.ackedBits[n/64] |= 1 << (n % 64)
	if at, ok := p.seenEarly[n]; ok {
		delete(p.seenEarly, n)
		p.lat.Record(0, "queryable", at.Sub(intended))
		p.seen++
		return
	}
	p.pending[n] = intended
}

func (p *probeTracker) failed(n int64) {
	p.mu.Lock()
	delete(p.inFlight, n)
	delete(p.seenEarly, n)
	p.mu.Unlock()
}

func (p *probeTracker) dropped() {
	p.mu.Lock()
	p.drops++
	p.mu.Unlock()
}

// isAcked says whether probe n was acknowledged.
func (p *probeTracker) isAcked(n int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return n >= 0 && int(n/64) < len(p.ackedBits) && p.ackedBits[n/64]&(1<<(n%64)) != 0
}

// outstanding returns how many acked probes have not been seen, and how
// many are still being published.
func (p *probeTracker) outstanding() (pending, inFlight int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pending), len(p.inFlight)
}

// oldest returns the earliest intended start of a probe not seen yet.
func (p *probeTracker) oldest() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var min time.Time
	for _, m := range []map[int64]time.Time{p.inFlight, p.pending} {
		for _, t := range m {
			if min.IsZero() || t.Before(min) {
				min = t
			}
		}
	}
	return min, !min.IsZero()
}

// poll looks for probes every interval until ctx is done. Errors are
// counted in errs (by cause) and the poll goes on.
func (p *probeTracker) poll(ctx context.Context, interval time.Duration, errs *errorCounts) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		from, ok := p.oldest()
		if !ok {
			continue
		}
		// Event times are kept to the millisecond.
		from = from.Truncate(time.Millisecond).Add(-time.Millisecond)
		to := time.Now().Add(time.Minute)
		err := p.api.events(ctx, p.eventType, from, to, func(ev apiEvent, at time.Time) {
			var d struct {
				Probe *int64 `json:"probe"`
			}
			if json.Unmarshal(ev.Data, &d) != nil || d.Probe == nil {
				return
			}
			p.seenAt(*d.Probe, at)
		})
		if err != nil && ctx.Err() == nil {
			errs.add("probe_poll." + apiErrorCause(err))
		}
	}
}

func (p *probeTracker) seenAt(n int64, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if intended, ok := p.pending[n]; ok {
		delete(p.pending, n)
		p.lat.Record(0, "queryable", at.Sub(intended))
		p.seen++
		return
	}
	if _, ok := p.inFlight[n]; ok {
		if _, already := p.seenEarly[n]; !already {
			p.seenEarly[n] = at
		}
	}
}

// apiClient reads Eventide's HTTP API.
type apiClient struct {
	base   string
	client *http.Client
	token  string // bearer token, if any
}

// apiEvent is an event as /v1/events returns it.
type apiEvent struct {
	ID   string          `json:"id"`
	Type string          `json:"type"`
	Time time.Time       `json:"time"`
	Data json.RawMessage `json:"data"`
}

// httpStatusError is a non-200 answer.
type httpStatusError struct {
	Status int
	Body   string
}

func (e *httpStatusError) Error() string {
	return fmt.Sprintf("HTTP %d: %s", e.Status, e.Body)
}

// get fetches path and decodes its JSON into v.
func (a *apiClient) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+path, nil)
	if err != nil {
		return fmt.Errorf("cannot make request %s: %w", path, err)
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("cannot GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %w", path, &httpStatusError{resp.StatusCode, string(b)})
	}
	if v == nil {
		_, err = io.Copy(io.Discard, resp.Body)
	} else {
		err = json.NewDecoder(resp.Body).Decode(v)
	}
	if err != nil {
		return fmt.Errorf("cannot read the answer to GET %s: %w", path, err)
	}
	return nil
}

// events calls fn with every event of type t in [from, to), oldest
// first, following the pages; at is when the page holding the event
// arrived.
func (a *apiClient) events(ctx context.Context, t string, from, to time.Time, fn func(ev apiEvent, at time.Time)) error {
	q := url.Values{
		"type": {t}, "from": {from.UTC().Format(time.RFC3339Nano)}, "to": {to.UTC().Format(time.RFC3339Nano)},
		"order": {"asc"}, "limit": {"10000"},
	}
	for {
		var page struct {
			Events   []apiEvent `json:"events"`
			NextPage string     `json:"next_page"`
		}
		if err := a.get(ctx, "/v1/events?"+q.Encode(), &page); err != nil {
			return err
		}
		at := time.Now()
		for _, ev := range page.Events {
			fn(ev, at)
		}
		if page.NextPage == "" {
			return nil
		}
		q.Set("page", page.NextPage)
	}
}

// count returns the number of events of type t counted in [from, to).
func (a *apiClient) count(ctx context.Context, t string, from, to time.Time) (int64, error) {
	q := url.Values{
		"type": {t}, "from": {from.UTC().Format(time.RFC3339)}, "to": {to.UTC().Format(time.RFC3339)}, "step": {"60m"},
	}
	var ans struct {
		Points []struct {
			Count int64 `json:"count"`
		} `json:"points"`
	}
	if err := a.get(ctx, "/v1/counts?"+q.Encode(), &ans); err != nil {
		return 0, err
	}
	var n int64
	for _, p := range ans.Points {
		n += p.Count
	}
	return n, nil
}

// seenCount returns how many probes were timed.
func (p *probeTracker) seenCount() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen
}
