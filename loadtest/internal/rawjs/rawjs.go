// Package rawjs is the raw JetStream pipeline the harness and
// loadtest/ingestbench measure Eventide against: a pull consumer that
// fetches and acknowledges exactly as Eventide's writer does
// (writer/consumer), and stores nothing. The ratio of Eventide's rate to
// this pipeline's is then what validation and storage cost, not a
// difference in how the two fetch and ack.
//
// What it shares with the writer, and must keep sharing: the consumer's
// ack policy (AckAll, one ack per fetched batch, of its last message), its
// ack wait and pending bound (two fetches), and the fetch pattern (a pull
// for whatever is ready, else a pull of one message waiting up to
// consumer.DefaultFetchWait and then what else is ready). What it does not
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
// writer consumes its stream, without storing anything: a pull for
// whatever is ready (up to consumer.DefaultFetchBatch messages and
// consumer.DefaultFetchBytes bytes, expiring after a millisecond); when
// nothing is ready, a pull of one message waiting up to
// consumer.DefaultFetchWait, then what else is ready; then one ack for the
// batch, of its last message (cons must ack cumulatively: ConsumerConfig).
// handle sees each message in order; acked(n) follows each batch's ack.
// stop ends the goroutine and waits for it.
func Consume(ctx context.Context, cons jetstream.Consumer, handle func(jetstream.Msg), acked func(n int)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var msgs []jetstream.Msg
		for ctx.Err() == nil {
			var err error
			if msgs, err = fetch(ctx, cons, msgs[:0]); len(msgs) == 0 {
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

// fetch is one fetch of Consume, appended to msgs. The error is that of a
// pull that failed, not of one that found nothing.
func fetch(ctx context.Context, cons jetstream.Consumer, msgs []jetstream.Msg) ([]jetstream.Msg, error) {
	ready := func(msgs []jetstream.Msg, n, maxBytes int) ([]jetstream.Msg, error) {
		batch, err := cons.Fetch(n, jetstream.FetchMaxBytes(maxBytes), jetstream.FetchMaxWait(time.Millisecond))
		if err != nil {
			return msgs, err
		}
		for m := range batch.Messages() {
			msgs = append(msgs, m)
		}
		return msgs, nil
	}
	msgs, err := ready(msgs, consumer.DefaultFetchBatch, consumer.DefaultFetchBytes)
	if len(msgs) > 0 || err != nil {
		return msgs, err
	}
	fctx, cancel := context.WithTimeout(ctx, consumer.DefaultFetchWait)
	defer cancel()
	first, err := cons.Fetch(1, jetstream.FetchContext(fctx))
	if err != nil {
		return msgs, err
	}
	for m := range first.Messages() {
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return msgs, nil
	}
	return ready(msgs, consumer.DefaultFetchBatch-1, consumer.DefaultFetchBytes-len(msgs[0].Data()))
}
