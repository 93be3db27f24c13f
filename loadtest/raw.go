package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/eventide/eventide/loadtest/internal/arrival"
	"github.com/eventide/eventide/loadtest/internal/hist"
	"github.com/eventide/eventide/loadtest/internal/jspub"
	"github.com/eventide/eventide/loadtest/internal/rawjs"
	"github.com/eventide/eventide/loadtest/internal/report"
	"github.com/eventide/eventide/loadtest/internal/target"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// rawStreamName is the name of run's raw stream.
func rawStreamName(run string) string { return "LT_RAW_" + strings.ToUpper(run) }

// createRawStream creates the raw phase's own file stream for run, on
// subject ltraw.<run>.event, with a durable consumer configured as
// Eventide's writer configures its own (writer/consumer): cumulative acks
// (AckAll) and at most two fetches unacknowledged; remove deletes the
// stream (and so the consumer).
func createRawStream(ctx context.Context, js jetstream.JetStream, run string) (subject string, cons jetstream.Consumer, remove func(), err error) {
	name := rawStreamName(run)
	subject = "ltraw." + run + ".event"
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{subject}, Storage: jetstream.FileStorage, Replicas: 1,
	})
	if err != nil {
		return "", nil, nil, fmt.Errorf("cannot create raw stream %s: %w", name, err)
	}
	remove = func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = js.DeleteStream(dctx, name)
	}
	cons, err = s.CreateOrUpdateConsumer(ctx, rawjs.ConsumerConfig("raw"))
	if err != nil {
		remove()
		return "", nil, nil, fmt.Errorf("cannot create the raw consumer: %w", err)
	}
	return subject, cons, remove, nil
}

// rawCeiling measures the raw JetStream pipeline on the server under
// test: async publishes of events of the run's median size into a file
// stream of its own, a pull consumer that fetches and acks as the writer
// does (rawjs), nothing stored anywhere else. It runs for d as fast as it goes and returns the
// consumed rate, and each publish's latency from its send to its ack
// (kind "raw.publish": closed loop, so from the send, not from an
// intended start). The stream is deleted afterwards.
//
// It is what Eventide's ingest cannot beat on the same server: the writer
// does the same consume and ack (rawjs.Consume), plus validation and storage.
func rawCeiling(ctx context.Context, nc *nats.Conn, run string, d time.Duration, payload int) (*report.RawResult, *hist.Set, error) {
	const maxPending = 4096
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(maxPending))
	if err != nil {
		return nil, nil, fmt.Errorf("cannot open JetStream for the raw phase: %w", err)
	}
	subject, cons, remove, err := createRawStream(ctx, js, run)
	if err != nil {
		return nil, nil, err
	}
	defer remove()
	var consumed atomic.Int64
	var lastConsumed atomic.Int64 // unix nanos
	stopConsuming := rawjs.Consume(ctx, cons, func(jetstream.Msg) {}, func(n int) {
		consumed.Add(int64(n))
		lastConsumed.Store(time.Now().UnixNano())
	})
	defer stopConsuming()

	body := []byte(fmt.Sprintf(`{"time":%d,"data":{"pad":"%s"}}`, time.Now().UnixMilli(), strings.Repeat("x", max(payload-48, 1))))
	start := time.Now()
	// One goroutine times the acks, in publish order (JetStream acks a
	// stream's publishes in order, so waiting on each in turn records
	// each ack when it came, give or take that goroutine's scheduling).
	lat := hist.NewSet(1, start)
	type sentPublish struct {
		ack    jetstream.PubAckFuture
		sentAt time.Time
	}
	sent := make(chan sentPublish, 2*maxPending)
	timed, abandon := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(timed)
		for p := range sent {
			select {
			case <-p.ack.Ok():
				lat.Record(0, "raw.publish", time.Since(p.sentAt))
			case <-p.ack.Err():
			case <-abandon:
			}
		}
	}()
	// stopTiming waits for the acks' timing to end: once every publish
	// completed, or at once when the phase failed (abandoned).
	stopTiming := func(abandoned bool) {
		if abandoned {
			close(abandon)
		}
		close(sent)
		<-timed
	}
	giveUp := time.After(d + 30*time.Second)
	var published, failed int64
	for time.Since(start) < d && ctx.Err() == nil {
		sentAt := time.Now()
		ack, err := js.PublishAsync(subject, body)
		if err != nil {
			if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				select {
				case <-js.PublishAsyncComplete():
				case <-time.After(time.Second):
				}
				continue
			}
			failed++
			continue
		}
		published++
		// Waits while the timing is behind (slowing the publishes, as
		// more in flight would), but not past the phase's end plus the
		// 30 s its acks get below: an ack that never comes holds the
		// timing up, and the phase then fails there.
		select {
		case sent <- sentPublish{ack, sentAt}:
			continue
		case <-giveUp:
		case <-ctx.Done():
		}
		break
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		stopTiming(true)
		return nil, nil, errors.New("raw phase: publishes not acknowledged within 30s")
	case <-ctx.Done():
		stopTiming(true)
		return nil, nil, ctx.Err()
	}
	stopTiming(false)
	lat.Tick(time.Now())
	deadline := time.Now().Add(30 * time.Second)
	for consumed.Load() < published {
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("raw phase: consumed %d of %d messages within 30s", consumed.Load(), published)
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	elapsed := time.Unix(0, lastConsumed.Load()).Sub(start).Seconds()
	if elapsed <= 0 || published == 0 {
		return nil, nil, errors.New("raw phase: nothing was consumed")
	}
	return &report.RawResult{
		Stream: rawStreamName(run), Messages: published, Seconds: elapsed, RatePerSecond: float64(published) / elapsed,
	}, lat, nil
}

// A raw step's message carries its intended publish start in its body,
// not in a header: Eventide's events have no headers, and a header costs
// the server a scan of it in every JetStream publish and the consumer a
// parse into a map. The body opens with the start in Unix nanoseconds,
// zero-padded to a fixed width, then the rest of an event's body.
const (
	rawIntendedPrefix = `{"t":"`
	rawIntendedDigits = 19 // Unix nanoseconds until the year 2262
)

// appendRawBody appends a raw message's body: intended, then time and a
// padding string of pad bytes.
func appendRawBody(dst []byte, intended time.Time, pad string) []byte {
	dst = append(dst, rawIntendedPrefix...)
	var digits [20]byte
	ns := strconv.AppendInt(digits[:0], intended.UnixNano(), 10)
	for range rawIntendedDigits - len(ns) {
		dst = append(dst, '0')
	}
	dst = append(dst, ns...)
	dst = append(dst, `","time":`...)
	dst = strconv.AppendInt(dst, intended.UnixMilli(), 10)
	dst = append(dst, `,"data":{"pad":"`...)
	dst = append(dst, pad...)
	return append(dst, `"}}`...)
}

// rawIntended reads the intended publish start of a raw message's body
// (appendRawBody); false if the body does not hold one.
func rawIntended(body []byte) (time.Time, bool) {
	end := len(rawIntendedPrefix) + rawIntendedDigits
	if len(body) < end || string(body[:len(rawIntendedPrefix)]) != rawIntendedPrefix {
		return time.Time{}, false
	}
	var ns int64
	for _, c := range body[len(rawIntendedPrefix):end] {
		if c < '0' || c > '9' {
			return time.Time{}, false
		}
		ns = ns*10 + int64(c-'0')
	}
	if ns < 0 { // overflowed
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}

// rawStep runs the raw JetStream pipeline open loop at rate for
// --duration, on a stream of its own deleted afterwards: publishes
// waiting for their ack, as the event workload's, and a consumer that
// fetches and acks as Eventide's writer does (rawjs.Consume). It returns a report whose "publish" latency is
// intended start to publish ack and "queryable" intended start to
// consumed, with the schedule in Events, so the run's objectives apply
// to it as to Eventide.
func (e *env) rawStep(ctx context.Context, rate float64, run string) (_ *report.Report, serverCores float64, _ error) {
	cfg := e.cfg
	js := e.js
	subject, cons, remove, err := createRawStream(ctx, js, run)
	if err != nil {
		return nil, 0, err
	}
	defer remove()
	// The server's counters say what Eventide's storage did meanwhile
	// (flushes and compactions of earlier steps' events).
	countersBefore, countersErr := e.api.serverCounters(ctx)
	serverCoresSince := e.serverCoresSince()
	selfStart, selfErr := target.ReadProc(os.Getpid())
	start := time.Now()
	// Slot 0 is the publish acks' (one handler goroutine), slot 1 the
	// consumer's (one goroutine consumes).
	lat := hist.NewSet(2, start)
	const ackSlot, consumerSlot = 0, 1
	var consumed atomic.Int64
	stopConsuming := rawjs.Consume(ctx, cons, func(m jetstream.Msg) {
		if intended, ok := rawIntended(m.Data()); ok {
			lat.Record(consumerSlot, "queryable", time.Since(intended))
		}
	}, func(n int) { consumed.Add(int64(n)) })
	defer stopConsuming()

	// Bodies of the events' median size less 8 bytes, as before the
	// intended start moved from a header into them (appendRawBody's own
	// bytes are 66 besides the padding).
	pad := strings.Repeat("x", max(cfg.Events.PayloadMedian-8-66, 1))
	var acked, failed atomic.Int64
	stopTicking := every(ctx, cfg.Tick, lat.Tick)
	// Publishes go as the event workload's (eventLoad): sent by the
	// scheduler, ended by their ack, at most --workers in flight.
	pub, err := jspub.New(ctx, e.nc, jspub.Config[func()]{Timeout: cfg.PublishLimit,
		Done: func(release func(), intended, at time.Time, _ uint64, err error) {
			if err != nil {
				failed.Add(1)
			} else {
				lat.Record(ackSlot, "publish", at.Sub(intended))
				acked.Add(1)
			}
			release()
		}})
	if err != nil {
		stopTicking()
		return nil, 0, err
	}
	var buf []byte
	var msg nats.Msg
	stats, err := arrival.RunAsync(ctx, arrival.AsyncConfig[int64]{
		Rate: rate, Duration: cfg.Duration, InFlight: cfg.Workers, MaxLateness: cfg.MaxLateness,
		Next: func(seq int64) int64 { return seq },
		Start: func(_ context.Context, _ int64, intended time.Time, release func()) {
			buf = appendRawBody(buf[:0], intended, pad)
			msg = nats.Msg{Subject: subject, Data: buf}
			pub.Publish(&msg, release, intended)
		},
	})
	_ = pub.Close()
	loadEnd := time.Now()
	serverCores = serverCoresSince()
	var harness *report.HarnessStats
	if selfEnd, err := target.ReadProc(os.Getpid()); err == nil && selfErr == nil {
		cpu := selfEnd.CPUSeconds - selfStart.CPUSeconds
		harness = &report.HarnessStats{CPUSeconds: cpu, AvgCores: cpu / loadEnd.Sub(start).Seconds()}
	}
	if err != nil {
		stopTicking()
		return nil, 0, configError{err}
	}
	var counters map[string]float64
	if countersErr == nil {
		if after, err := e.api.serverCounters(ctx); err == nil {
			counters = counterDeltas(countersBefore, after)
		}
	}
	deadline := loadEnd.Add(cfg.DrainTimeout)
	for consumed.Load() < acked.Load() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond) // polling the consumer's count, with a deadline
	}
	stopTicking()
	lat.Tick(time.Now())
	// Started and Finished bound the load, for the server's CPU.
	r := &report.Report{
		Started: start, Finished: loadEnd, Harness: harness, ServerCounters: counters,
		Events:  &report.EventsResult{Schedule: schedule(rate, stats, failed.Load(), loadEnd.Sub(start), nil)},
		Latency: map[string]hist.Summary{},
	}
	for _, kind := range lat.Kinds() {
		sum := lat.Summary(kind)
		for _, o := range cfg.Objectives {
			if p, ok := o.Percentile(); ok && o.Arg == kind {
				sum.Percentiles[o.Func], _ = lat.Quantile(kind, p)
			}
		}
		r.Latency[kind] = sum
	}
	if n := consumed.Load(); n < acked.Load() {
		return nil, 0, fmt.Errorf("raw step at %.0f/s: consumed %d of %d acked messages within %s", rate, n, acked.Load(), cfg.DrainTimeout)
	}
	return r, serverCores, nil
}
