package consumer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

// runUntil runs c until its checkpoint reaches seq, then stops it.
func runUntil(t *testing.T, c *Consumer, seq uint64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for c.Stats().LastAppliedSeq < seq {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("checkpoint at %d, want %d", c.Stats().LastAppliedSeq, seq)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	if err := c.Health(); err != nil {
		t.Errorf("Health() = %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v", err)
	}
}

func publishN(t *testing.T, js jetstream.JetStream, subject string, n int) {
	t.Helper()
	for i := range n {
		if _, err := js.Publish(context.Background(), subject, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitAckFloor waits until the durable's ack floor is at stream sequence
// seq with nothing pending.
func waitAckFloor(t *testing.T, js jetstream.JetStream, stream, durable string, seq uint64) *jetstream.ConsumerInfo {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		cons, err := js.Consumer(context.Background(), stream, durable)
		if err != nil {
			t.Fatal(err)
		}
		info, err := cons.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.AckFloor.Stream == seq && info.NumAckPending == 0 {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("ack floor %d with %d pending, want %d with none", info.AckFloor.Stream, info.NumAckPending, seq)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}

// TestOneAckPerBatch: on a limits stream the loop acks a stored batch with
// one ack (AckAll), not one per message, and JetStream still sees every
// message acked. The acks are counted on the wire: a plain subscription
// to the consumer's ack subjects receives each ack the loop publishes.
func TestOneAckPerBatch(t *testing.T) {
	nc, js := startJetStream(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SEAM", Subjects: []string{"seam.>"}}); err != nil {
		t.Fatal(err)
	}
	db := openStore(t)
	var acks atomic.Int64
	sub, err := nc.Subscribe("$JS.ACK.SEAM.seam.>", func(*nats.Msg) { acks.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	const n = 100
	publishN(t, js, "seam.a", n)

	h := &countingHandler{minute: time.Now().UTC().Truncate(time.Minute)}
	c, err := New(ctx, nc, db, Config{Stream: "SEAM", Durable: "seam", FetchBatch: 10,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, h)
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, c, n)
	info := waitAckFloor(t, js, "SEAM", "seam", n)
	if info.Config.AckPolicy != jetstream.AckAllPolicy {
		t.Errorf("ack policy %v, want %v", info.Config.AckPolicy, jetstream.AckAllPolicy)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// 100 messages in fetches of at most 10: at most a few more acks than
	// the 10 full batches, far fewer than one per message.
	if got := acks.Load(); got < n/10 || got > n/4 {
		t.Errorf("%d acks for %d messages in batches of at most 10: want one per stored batch", got, n)
	}
	if got := readCount(t, db, h.minute); got != n {
		t.Errorf("stored count %d, want %d", got, n)
	}
}

// TestAckPolicyUpgrade starts from the state an earlier version left: a
// durable consumer with AckExplicit (which the server refuses to change on
// update), messages 1-20 stored and acked, 21-25 delivered and never acked
// (the process died holding them), 26-50 not delivered yet. New replaces
// the consumer with an AckAll one, and every message takes effect exactly
// once.
func TestAckPolicyUpgrade(t *testing.T) {
	nc, js := startJetStream(t)
	ctx := context.Background()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SEAM", Subjects: []string{"seam.>"}})
	if err != nil {
		t.Fatal(err)
	}
	db := openStore(t)
	h := &countingHandler{minute: time.Now().UTC().Truncate(time.Minute)}
	publishN(t, js, "seam.a", 50)

	old, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "seam", DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: DefaultAckWait, MaxDeliver: -1, MaxAckPending: 2 * DefaultFetchBatch,
	})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := old.Fetch(25, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for m := range batch.Messages() {
		if got++; got <= 20 {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got != 25 {
		t.Fatalf("fetched %d messages from the old consumer, want 25", got)
	}
	if err := catalog.EnsureBuiltinTables(db); err != nil {
		t.Fatal(err)
	}
	var b storage.Batch
	if err := catalog.AddCount(&b, "seam", h.minute, 20); err != nil {
		t.Fatal(err)
	}
	catalog.PutCheckpoint(&b, "seam", 20)
	if err := db.Apply(ctx, &b); err != nil {
		t.Fatal(err)
	}

	c, err := New(ctx, nc, db, Config{Stream: "SEAM", Durable: "seam", FetchBatch: 7,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, h)
	if err != nil {
		t.Fatalf("New over an AckExplicit consumer: %v", err)
	}
	publishN(t, js, "seam.b", 30)
	runUntil(t, c, 80)
	info := waitAckFloor(t, js, "SEAM", "seam", 80)
	if info.Config.AckPolicy != jetstream.AckAllPolicy {
		t.Errorf("ack policy %v after New, want %v", info.Config.AckPolicy, jetstream.AckAllPolicy)
	}
	if got := readCount(t, db, h.minute); got != 80 {
		t.Errorf("stored count %d, want 80: some message took effect more or less than once", got)
	}
}

// TestExplicitAcksWhereRequired: work-queue streams (the server requires
// explicit acks) and interest streams (an existing consumer cannot be
// recreated without losing messages) keep AckExplicit, and every message
// still takes effect exactly once over two runs.
func TestExplicitAcksWhereRequired(t *testing.T) {
	for _, retention := range []jetstream.RetentionPolicy{jetstream.WorkQueuePolicy, jetstream.InterestPolicy} {
		t.Run(retention.String(), func(t *testing.T) {
			nc, js := startJetStream(t)
			ctx := context.Background()
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SEAM", Subjects: []string{"seam.>"}, Retention: retention}); err != nil {
				t.Fatal(err)
			}
			db := openStore(t)
			h := &countingHandler{minute: time.Now().UTC().Truncate(time.Minute)}
			cfg := Config{Stream: "SEAM", Durable: "seam", FetchBatch: 7, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			for run := range 2 {
				c, err := New(ctx, nc, db, cfg, h)
				if err != nil {
					t.Fatal(err)
				}
				publishN(t, js, fmt.Sprintf("seam.r%d", run), 30)
				runUntil(t, c, uint64(30*(run+1)))
				info, err := c.cons.Info(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if info.Config.AckPolicy != jetstream.AckExplicitPolicy {
					t.Errorf("ack policy %v, want %v", info.Config.AckPolicy, jetstream.AckExplicitPolicy)
				}
			}
			if got := readCount(t, db, h.minute); got != 60 {
				t.Errorf("stored count %d, want 60", got)
			}
		})
	}
}
