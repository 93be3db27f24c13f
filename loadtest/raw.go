package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/eventide/eventide/loadtest/internal/report"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// rawCeiling measures the raw JetStream pipeline on the server under
// test: async publishes of events of the run's median size into a file
// stream of its own, a pull consumer that acks each message, nothing
// stored anywhere else. It runs for d as fast as it goes and returns the
// consumed rate. The stream is deleted afterwards.
//
// It is what Eventide's ingest cannot beat on the same server: the writer
// does the same consume and ack, plus validation and storage.
func rawCeiling(ctx context.Context, nc *nats.Conn, run string, d time.Duration, payload int) (*report.RawResult, error) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return nil, fmt.Errorf("cannot open JetStream for the raw phase: %w", err)
	}
	name := "LT_RAW_" + strings.ToUpper(run)
	subject := "ltraw." + run + ".event"
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{subject}, Storage: jetstream.FileStorage, Replicas: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot create raw stream %s: %w", name, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = js.DeleteStream(dctx, name)
	}()
	cons, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 100000,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot create the raw consumer: %w", err)
	}
	var consumed atomic.Int64
	var lastConsumed atomic.Int64 // unix nanos
	cc, err := cons.Consume(func(m jetstream.Msg) {
		_ = m.Ack()
		consumed.Add(1)
		lastConsumed.Store(time.Now().UnixNano())
	}, jetstream.PullMaxMessages(1000))
	if err != nil {
		return nil, fmt.Errorf("cannot consume the raw stream: %w", err)
	}
	defer cc.Stop()

	body := []byte(fmt.Sprintf(`{"time":%d,"data":{"pad":"%s"}}`, time.Now().UnixMilli(), strings.Repeat("x", max(payload-48, 1))))
	start := time.Now()
	var published, failed int64
	for time.Since(start) < d && ctx.Err() == nil {
		if _, err := js.PublishAsync(subject, body); err != nil {
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
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		return nil, errors.New("raw phase: publishes not acknowledged within 30s")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	deadline := time.Now().Add(30 * time.Second)
	for consumed.Load() < published {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("raw phase: consumed %d of %d messages within 30s", consumed.Load(), published)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	elapsed := time.Unix(0, lastConsumed.Load()).Sub(start).Seconds()
	if elapsed <= 0 || published == 0 {
		return nil, errors.New("raw phase: nothing was consumed")
	}
	return &report.RawResult{
		Stream: name, Messages: published, Seconds: elapsed, RatePerSecond: float64(published) / elapsed,
	}, nil
}
