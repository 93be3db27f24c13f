package main

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/eventide/eventide/loadtest/internal/arrival"
	"github.com/eventide/eventide/loadtest/internal/hist"
	"github.com/eventide/eventide/loadtest/internal/workload"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// HeaderExpectedReason rides on each invalid event: the rejection reason
// it was made for. The writer copies producer headers into the dead
// letter, so the correctness check can compare it with Eventide-Error.
const HeaderExpectedReason = "Eventide-Loadtest-Reason"

// eventLoad publishes the event stream: one arrival.Run whose operations
// are publishes awaiting the JetStream ack.
type eventLoad struct {
	cfg     *config
	js      jetstream.JetStream
	gen     *workload.EventGen
	lat     *hist.Set // kind "publish"
	probes  *probeTracker
	workers []*eventWorker

	acked  atomic.Int64 // for the progress line
	failed atomic.Int64
	// dropped counts dropped events by kind, on the scheduler goroutine.
	dropped map[string]int64
}

// eventWorker is one worker's state; only its goroutine touches it until
// the run is over.
type eventWorker struct {
	buf     []byte
	lastErr error

	ackedValid, failedValid map[string]int64 // by type
	ackedInvalid            map[string]int64 // by reason
	failedInvalid           int64
	ackedProbes             int64
	late, outOfOrder        int64
	errors                  map[string]int64
}

func newEventLoad(cfg *config, js jetstream.JetStream, lat *hist.Set, probes *probeTracker) (*eventLoad, error) {
	gen, err := workload.NewEventGen(cfg.Events)
	if err != nil {
		return nil, err
	}
	l := &eventLoad{cfg: cfg, js: js, gen: gen, lat: lat, probes: probes, dropped: map[string]int64{}}
	for range cfg.Workers {
		l.workers = append(l.workers, &eventWorker{
			ackedValid: map[string]int64{}, failedValid: map[string]int64{},
			ackedInvalid: map[string]int64{}, errors: map[string]int64{},
		})
	}
	return l, nil
}

func (l *eventLoad) run(ctx context.Context) (arrival.Stats, error) {
	return arrival.Run(ctx, arrival.Config[workload.Event]{
		Rate: l.cfg.EventRate, Duration: l.cfg.Duration, Workers: l.cfg.Workers,
		MaxLateness: l.cfg.MaxLateness,
		Next:        l.gen.Next,
		Do:          l.publish,
		Done: func(w int, ev workload.Event, intended time.Time, latency time.Duration) {
			if l.workers[w].lastErr == nil {
				l.lat.Record(w, "publish", latency)
			}
		},
		Dropped: func(ev workload.Event, intended time.Time) {
			l.dropped[ev.Kind]++
			if ev.Kind == workload.KindProbe {
				l.probes.dropped()
			}
		},
	})
}

// publish is one operation: publish ev and wait for its ack. Its intended
// start is the event's time (minus its offset).
func (l *eventLoad) publish(ctx context.Context, w int, ev workload.Event, intended time.Time) {
	wk := l.workers[w]
	wk.buf = ev.Body(wk.buf[:0], intended)
	msg := &nats.Msg{Subject: ev.Subject, Data: wk.buf}
	if ev.Kind == workload.KindInvalid {
		msg.Header = nats.Header{HeaderExpectedReason: {ev.Reason}}
	}
	if ev.Kind == workload.KindProbe {
		l.probes.publishing(ev.Probe, intended)
	}
	pctx, cancel := context.WithTimeout(ctx, l.cfg.PublishLimit)
	_, err := l.js.PublishMsg(pctx, msg)
	cancel()
	wk.lastErr = err
	if err != nil {
		l.failed.Add(1)
		wk.errors["publish."+publishErrorCause(err)]++
		switch ev.Kind {
		case workload.KindValid:
			wk.failedValid[ev.Type]++
		case workload.KindInvalid:
			wk.failedInvalid++
		case workload.KindProbe:
			l.probes.failed(ev.Probe)
		}
		return
	}
	l.acked.Add(1)
	switch ev.Kind {
	case workload.KindValid:
		wk.ackedValid[ev.Type]++
		if ev.Late {
			wk.late++
		}
		if ev.OutOfOrder {
			wk.outOfOrder++
		}
	case workload.KindInvalid:
		wk.ackedInvalid[ev.Reason]++
	case workload.KindProbe:
		wk.ackedProbes++
		l.probes.acked(ev.Probe)
	}
}

// publishErrorCause names a publish failure for the error counts.
func publishErrorCause(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return "timeout"
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		return "no_stream"
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrConnectionDraining):
		return "disconnected"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return "jetstream_api"
	}
	return "other"
}

// totals merges the workers' counts; call after run returned.
type eventTotals struct {
	ackedValid, failedValid map[string]int64
	ackedInvalid            map[string]int64
	failedInvalid           int64
	ackedProbes             int64
	late, outOfOrder        int64
	errors                  map[string]int64
}

func (l *eventLoad) totals() eventTotals {
	t := eventTotals{ackedValid: map[string]int64{}, failedValid: map[string]int64{}, ackedInvalid: map[string]int64{}, errors: map[string]int64{}}
	add := func(dst, src map[string]int64) {
		for k, v := range src {
			dst[k] += v
		}
	}
	for _, w := range l.workers {
		add(t.ackedValid, w.ackedValid)
		add(t.failedValid, w.failedValid)
		add(t.ackedInvalid, w.ackedInvalid)
		add(t.errors, w.errors)
		t.failedInvalid += w.failedInvalid
		t.ackedProbes += w.ackedProbes
		t.late += w.late
		t.outOfOrder += w.outOfOrder
	}
	return t
}
