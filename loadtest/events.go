package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventide/eventide/loadtest/internal/arrival"
	"github.com/eventide/eventide/loadtest/internal/hist"
	"github.com/eventide/eventide/loadtest/internal/jspub"
	"github.com/eventide/eventide/loadtest/internal/workload"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// HeaderExpectedReason rides on each invalid event: the rejection reason
// it was made for. The writer copies producer headers into the dead
// letter, so the correctness check can compare it with Eventide-Error.
const HeaderExpectedReason = "Eventide-Loadtest-Reason"

// eventLoad publishes the event stream: one arrival.RunAsync whose
// operations are JetStream publishes sent by the scheduler itself
// (jspub) and ended by their ack, error or timeout, at most --workers in
// flight. Latency is from the intended start to the ack.
type eventLoad struct {
	cfg    *config
	nc     *nats.Conn
	gen    *workload.EventGen
	lat    *hist.Set // kind "publish", one slot: only the ack handler records
	probes *probeTracker

	// buf and msg are the scheduler's, reused for every publish.
	buf []byte
	msg nats.Msg

	acked  atomic.Int64 // for the progress line
	failed atomic.Int64
	// dropped counts dropped events by kind, on the scheduler goroutine.
	dropped map[string]int64

	// mu guards counts: outcomes come from the ack handler, the timeout
	// sweeper and the scheduler (a publish that fails at once).
	mu     sync.Mutex
	counts eventTotals
}

// eventLatSlots is the number of histogram slots the event workload
// records into (hist.NewSet).
const eventLatSlots = 1

// eventOp is one publish in flight: its event and its permit.
type eventOp struct {
	ev      workload.Event
	release func()
}

func newEventLoad(cfg *config, nc *nats.Conn, lat *hist.Set, probes *probeTracker) (*eventLoad, error) {
	gen, err := workload.NewEventGen(cfg.Events)
	if err != nil {
		return nil, err
	}
	return &eventLoad{cfg: cfg, nc: nc, gen: gen, lat: lat, probes: probes, dropped: map[string]int64{}, counts: newEventTotals()}, nil
}

func (l *eventLoad) run(ctx context.Context) (arrival.Stats, error) {
	pub, err := jspub.New(ctx, l.nc, jspub.Config[eventOp]{Timeout: l.cfg.PublishLimit, Done: l.done})
	if err != nil {
		return arrival.Stats{}, err
	}
	defer pub.Close()
	return arrival.RunAsync(ctx, arrival.AsyncConfig[workload.Event]{
		Rate: l.cfg.EventRate, Duration: l.cfg.Duration, InFlight: l.cfg.Workers,
		MaxLateness: l.cfg.MaxLateness,
		Next:        l.gen.Next,
		Start: func(_ context.Context, ev workload.Event, intended time.Time, release func()) {
			l.publish(pub, ev, intended, release)
		},
		Dropped: func(ev workload.Event, intended time.Time) {
			l.dropped[ev.Kind]++
			if ev.Kind == workload.KindProbe {
				l.probes.dropped()
			}
		},
	})
}

// publish sends ev; its intended start is the event's time (minus its
// offset). done receives the outcome.
func (l *eventLoad) publish(pub *jspub.Publisher[eventOp], ev workload.Event, intended time.Time, release func()) {
	l.buf = ev.Body(l.buf[:0], intended)
	l.msg = nats.Msg{Subject: ev.Subject, Data: l.buf}
	if ev.Kind == workload.KindInvalid {
		l.msg.Header = nats.Header{HeaderExpectedReason: {ev.Reason}}
	}
	if ev.Kind == workload.KindProbe {
		l.probes.publishing(ev.Probe, intended)
	}
	pub.Publish(&l.msg, eventOp{ev: ev, release: release}, intended)
}

// done counts one publish's outcome and releases its permit.
func (l *eventLoad) done(op eventOp, intended, at time.Time, _ uint64, err error) {
	defer op.release()
	ev := op.ev
	if err != nil {
		l.failed.Add(1)
		l.mu.Lock()
		l.counts.errors["publish."+publishErrorCause(err)]++
		switch ev.Kind {
		case workload.KindValid:
			l.counts.failedValid[ev.Type]++
		case workload.KindInvalid:
			l.counts.failedInvalid++
		}
		l.mu.Unlock()
		if ev.Kind == workload.KindProbe {
			l.probes.failed(ev.Probe)
		}
		return
	}
	l.lat.Record(0, "publish", at.Sub(intended))
	l.acked.Add(1)
	l.mu.Lock()
	switch ev.Kind {
	case workload.KindValid:
		l.counts.ackedValid[ev.Type]++
		if ev.Late {
			l.counts.late++
		}
		if ev.OutOfOrder {
			l.counts.outOfOrder++
		}
	case workload.KindInvalid:
		l.counts.ackedInvalid[ev.Reason]++
	case workload.KindProbe:
		l.counts.ackedProbes++
	}
	l.mu.Unlock()
	if ev.Kind == workload.KindProbe {
		l.probes.acked(ev.Probe)
	}
}

// publishErrorCause names a publish failure for the error counts.
func publishErrorCause(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout), errors.Is(err, jspub.ErrTimeout):
		return "timeout"
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders), errors.Is(err, jspub.ErrNoResponders):
		return "no_stream"
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrConnectionDraining):
		return "disconnected"
	case errors.Is(err, context.Canceled), errors.Is(err, jspub.ErrCancelled):
		return "cancelled"
	}
	var apiErr *jetstream.APIError
	var ackErr *jspub.AckError
	if errors.As(err, &apiErr) || errors.As(err, &ackErr) {
		return "jetstream_api"
	}
	return "other"
}

// eventTotals are the event workload's counts.
type eventTotals struct {
	ackedValid, failedValid map[string]int64 // by type
	ackedInvalid            map[string]int64 // by reason
	failedInvalid           int64
	ackedProbes             int64
	late, outOfOrder        int64
	errors                  map[string]int64
}

func newEventTotals() eventTotals {
	return eventTotals{ackedValid: map[string]int64{}, failedValid: map[string]int64{}, ackedInvalid: map[string]int64{}, errors: map[string]int64{}}
}

// totals returns the counts; call after run returned.
func (l *eventLoad) totals() eventTotals {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts
}
