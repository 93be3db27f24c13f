package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventide/eventide/loadtest/internal/hist"
	"github.com/eventide/eventide/loadtest/internal/report"
)

// tailLoad is the live tail workload: --tail-subscribers Server-Sent
// Events streams (GET /v1/events/stream) following the run's probe event
// type, each timing every probe from its event time (the intended
// publish, to the millisecond) to its arrival: kind "tail". A stream the
// server ends (slow_client, shutdown) or that breaks is reopened with
// Last-Event-ID, as EventSource does; the check at the end wants every
// acknowledged probe delivered to every subscriber exactly once.
type tailLoad struct {
	api       *apiClient
	probeType string
	lat       *hist.Set // one worker per subscriber
	subs      []*tailSubscriber
	errs      errorCounts
}

type tailSubscriber struct {
	n int

	mu       sync.Mutex
	received []uint32 // per probe number: how many times
	count    int64
	lastID   string

	connected          chan struct{} // closed at the first 200
	reconnects, resets atomic.Int64
	connectOnce        sync.Once
}

func newTailLoad(api *apiClient, probeType string, subscribers int, lat *hist.Set) *tailLoad {
	t := &tailLoad{api: api, probeType: probeType, lat: lat}
	for i := range subscribers {
		t.subs = append(t.subs, &tailSubscriber{n: i, connected: make(chan struct{})})
	}
	return t
}

// start opens every stream and returns once each has been answered 200
// (so none misses the first probes), or with an error if one could not
// be opened within timeout. The streams run until ctx ends.
func (t *tailLoad) start(ctx context.Context, wg *sync.WaitGroup, timeout time.Duration) error {
	first := make(chan error, len(t.subs))
	for _, s := range t.subs {
		wg.Go(func() { t.follow(ctx, s, first) })
	}
	deadline := time.After(timeout)
	for _, s := range t.subs {
		select {
		case <-s.connected:
		case err := <-first:
			return fmt.Errorf("cannot open the live tail (GET /v1/events/stream): %w", err)
		case <-deadline:
			return fmt.Errorf("the live tail (GET /v1/events/stream) did not answer within %s", timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// follow keeps subscriber s's stream open until ctx ends. The first
// failure to connect is reported on first.
func (t *tailLoad) follow(ctx context.Context, s *tailSubscriber, first chan<- error) {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		err := t.stream(ctx, s)
		if ctx.Err() != nil {
			return
		}
		select {
		case <-s.connected:
			t.errs.add("tail." + tailErrorCause(err))
			s.reconnects.Add(1)
		default:
			first <- err
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond): // EventSource's reconnection delay, shortened
		}
	}
}

// errTailEnded is a stream the server ended with event: error.
var errTailEnded = errors.New("the server ended the stream")

func tailErrorCause(err error) string {
	if errors.Is(err, errTailEnded) {
		return "ended"
	}
	return apiErrorCause(err)
}

// stream reads one connection of s until it ends.
func (t *tailLoad) stream(ctx context.Context, s *tailSubscriber) error {
	q := url.Values{"type": {t.probeType}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.api.base+"/v1/events/stream?"+q.Encode(), nil)
	if err != nil {
		return fmt.Errorf("cannot make the live tail request: %w", err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if t.api.token != "" {
		req.Header.Set("Authorization", "Bearer "+t.api.token)
	}
	s.mu.Lock()
	if s.lastID != "" {
		req.Header.Set("Last-Event-ID", s.lastID)
	}
	s.mu.Unlock()
	resp, err := t.api.client.Do(req)
	if err != nil {
		return fmt.Errorf("cannot GET /v1/events/stream: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /v1/events/stream: %w", &httpStatusError{Status: resp.StatusCode})
	}
	s.connectOnce.Do(func() { close(s.connected) })
	return readSSE(resp.Body, func(m sseMessage) error {
		at := time.Now()
		if m.ID != "" {
			s.mu.Lock()
			s.lastID = m.ID
			s.mu.Unlock()
		}
		switch m.Event {
		case "":
		case "reset":
			s.resets.Add(1)
			return nil
		case "error":
			return fmt.Errorf("%w: %s", errTailEnded, m.Data)
		default:
			return nil
		}
		var ev struct {
			Time time.Time `json:"time"`
			Data struct {
				Probe *int64 `json:"probe"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(m.Data), &ev); err != nil || ev.Data.Probe == nil || *ev.Data.Probe < 0 {
			t.errs.add("tail.unreadable_event")
			return nil
		}
		t.lat.Record(s.n, "tail", at.Sub(ev.Time))
		s.mu.Lock()
		defer s.mu.Unlock()
		n := *ev.Data.Probe
		for int64(len(s.received)) <= n {
			s.received = append(s.received, 0)
		}
		s.received[n]++
		s.count++
		return nil
	})
}

// complete says whether every subscriber has every probe acked so far.
func (t *tailLoad) complete(probes *probeTracker, total int64) bool {
	for _, s := range t.subs {
		s.mu.Lock()
		for n := range total {
			if probes.isAcked(n) && (n >= int64(len(s.received)) || s.received[n] == 0) {
				s.mu.Unlock()
				return false
			}
		}
		s.mu.Unlock()
	}
	return true
}

// check wants every acknowledged probe delivered once to every
// subscriber; a probe delivered that was not acknowledged (its ack was
// lost) is allowed.
func (t *tailLoad) check(probes *probeTracker, total int64) (report.Check, *report.TailResult) {
	c := report.Check{Name: "tail delivered probes once"}
	res := &report.TailResult{Subscribers: len(t.subs)}
	var missing, dup int64
	for _, s := range t.subs {
		s.mu.Lock()
		for n := range total {
			got := uint32(0)
			if n < int64(len(s.received)) {
				got = s.received[n]
			}
			if probes.isAcked(n) && got == 0 {
				missing++
			}
			if got > 1 {
				dup++
			}
		}
		res.Received += s.count
		s.mu.Unlock()
		res.Reconnects += s.reconnects.Load()
		res.Resets += s.resets.Load()
	}
	c.Passed = missing == 0 && dup == 0
	c.Detail = fmt.Sprintf("%d subscribers, %d probe events received: %d acked probes missing at a subscriber, %d more than once; %d reconnects, %d resets",
		len(t.subs), res.Received, missing, dup, res.Reconnects, res.Resets)
	return c, res
}
