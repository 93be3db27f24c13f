// Package rawjs is the raw JetStream pipeline the harness and
// loadtest/ingestbench measure Eventide against: a pull consumer that
// fetches and acknowledges exactly as Eventide's writer does
// (writer/consumer), and stores nothing. The ratio of Eventide's rate to
// this pipeline's is then what validation and storage cost, not a
// difference in how the two fetch and ack.
//
// What it shares with the writer, and must keep sharing: the consumer's
// ack policy (AckAll, one ack per fetched batch, of its last message), its
// ack wait and pending bound (two fetches), and the fetch pattern: under
// load (the last fetch brought messages) one pull that lingers up to
// consumer.DefaultFetchLinger for a full batch; otherwise a pull for
// whatever is ready, else a pull of one message waiting up to
// consumer.DefaultFetchWait and then what else is ready. What it does not
// do: the writer also checks delivery sequences and overlaps the next
// fetch with storing the batch; with nothing to store there is nothing to
// overlap.
package rawjs

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/writer/consumer"
)

// ConsumerConfig is a durable pull consumer configured as Eventide's
// writer configures its own: cumulative acks and at most two fetches
// unacknowledged.
func ConsumerConfig(durable string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable: durable, AckPolicy: jetstream.AckAllPolicy, AckWait: consumer.DefaultAckWait,
		MaxAckPending: 2 * consumer.DefaultFetchBatch,
	}
}

// Consume consumes cons on a goroutine of its own, the way Eventide's
// writer consumes its stream, without storing anything: while the last
// fetch brought messages, a pull of up to consumer.DefaultFetchBatch
// messages and consumer.DefaultFetchBytes bytes that lingers up to
// consumer.DefaultFetchLinger for them; otherwise a pull for whatever is
// ready (within the same bounds, expiring after a millisecond), and when
// nothing is ready, a pull of one message waiting up to
// consumer.DefaultFetchWait, then what else is ready; then one ack for the
// batch, of its last message (cons must ack cumulatively: ConsumerConfig).
// handle sees each message in order; acked(n) follows each batch's ack.
// stop ends the goroutine and waits for it.
func Consume(ctx context.Context, cons jetstream.Consumer, handle func(jetstream.Msg), acked func(n int)) (stop func()) {
	return consume(ctx, &fetcher{
		cons: cons, batch: consumer.DefaultFetchBatch, maxBytes: consumer.DefaultFetchBytes,
		linger: consumer.DefaultFetchLinger, wait: consumer.DefaultFetchWait,
	}, handle, acked)
}

// consume is Consume with f's fetch pattern.
func consume(ctx context.Context, f *fetcher, handle func(jetstream.Msg), acked func(n int)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var msgs []jetstream.Msg
		for ctx.Err() == nil {
			var err error
			if msgs, err = f.fetch(ctx, msgs[:0]); len(msgs) == 0 {
				if err != nil {
					consumer.Backoff(ctx, 0) // not a hot loop while the server refuses pulls
				}
				continue
			}
			for _, m := range msgs {
				handle(m)
			}
			_ = msgs[len(msgs)-1].Ack() // a lost ack is covered by the next one
			acked(len(msgs))
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// fetcher is Consume's fetch pattern, with the writer's bounds (the
// tests shrink them).
type fetcher struct {
	cons         jetstream.Consumer
	batch        int
	maxBytes     int
	linger, wait time.Duration
	// loaded is true when the last fetch brought messages: the next one
	// lingers for a full batch, as the writer's does
	// (writer/consumer.Consumer.fetch).
	loaded bool
}

// fetch is one fetch of Consume, appended to msgs. The error is that of a
// pull that failed, not of one that found nothing.
func (f *fetcher) fetch(ctx context.Context, msgs []jetstream.Msg) ([]jetstream.Msg, error) {
	msgs, err := f.fetchPending(ctx, msgs)
	f.loaded = len(msgs) > 0 && f.linger > 0
	return msgs, err
}

func (f *fetcher) fetchPending(ctx context.Context, msgs []jetstream.Msg) ([]jetstream.Msg, error) {
	pull := func(msgs []jetstream.Msg, n, maxBytes int, expiry time.Duration) ([]jetstream.Msg, error) {
		batch, err := f.cons.Fetch(n, jetstream.FetchMaxBytes(maxBytes), jetstream.FetchMaxWait(expiry))
		if err != nil {
			return msgs, err
		}
		for m := range batch.Messages() {
			msgs = append(msgs, m)
		}
		return msgs, nil
	}
	if f.loaded {
		if msgs, err := pull(msgs, f.batch, f.maxBytes, f.linger); len(msgs) > 0 || err != nil {
			return msgs, err
		}
		// Nothing came within the linger: wait for a first message.
	}
	msgs, err := pull(msgs, f.batch, f.maxBytes, time.Millisecond)
	if len(msgs) > 0 || err != nil {
		return msgs, err
	}
	fctx, cancel := context.WithTimeout(ctx, f.wait)
	defer cancel()
	first, err := f.cons.Fetch(1, jetstream.FetchContext(fctx))
	if err != nil {
		return msgs, err
	}
	for m := range first.Messages() {
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 || f.batch == 1 {
		return msgs, nil
	}
	return pull(msgs, f.batch-1, f.maxBytes-len(msgs[0].Data()), time.Millisecond)
}
