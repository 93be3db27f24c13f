package consumer

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/storage"
)

// gatedHandler stores the first batch at once and holds every later one
// in Write until gate is closed.
type gatedHandler struct {
	countingHandler
	gate    chan struct{}
	batches int
}

type gatedBatch struct {
	countingBatch
	gate chan struct{}
}

func (h *gatedHandler) Prepare(ds []Delivery, epoch uint64) Batch {
	h.batches++
	b := &gatedBatch{countingBatch: countingBatch{h: &h.countingHandler, n: len(ds)}}
	if h.batches > 1 {
		b.gate = h.gate
	}
	return b
}

func (b *gatedBatch) Write(ctx context.Context, sb *storage.Batch) error {
	if b.gate != nil {
		select {
		case <-b.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return b.countingBatch.Write(ctx, sb)
}

// TestStatsFreshness holds a consumer behind a backlog and checks what
// Stats says it reflects: the checkpoint, the stream time of the message
// there, and the messages still to come; then that it catches up to
// pending 0, and that a new Consumer knows the checkpoint's time before
// it stores anything.
func TestStatsFreshness(t *testing.T) {
	nc, js := startJetStream(t)
	ctx := context.Background()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "FRESH", Subjects: []string{"fresh.>"}})
	if err != nil {
		t.Fatal(err)
	}
	db := openStore(t)
	const backlog = 30
	for i := range backlog {
		if _, err := js.Publish(ctx, "fresh.a", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	streamTime := func(seq uint64) time.Time {
		t.Helper()
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		return m.Time
	}

	h := &gatedHandler{countingHandler: countingHandler{minute: time.Now().UTC().Truncate(time.Minute)}, gate: make(chan struct{})}
	cfg := Config{Stream: "FRESH", Durable: "fresh", FetchBatch: 10, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	c, err := New(ctx, nc, db, cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.LastAppliedSeq != 0 || !st.LastAppliedTime.IsZero() || st.PendingKnown {
		t.Fatalf("before Run: Stats = %+v, want nothing applied and pending unknown", st)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run returned %v", err)
			}
		}
	}
	defer stop()

	waitStats := func(what string, ok func(Stats) bool) Stats {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			st := c.Stats()
			if ok(st) {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 20s: Stats = %+v", what, st)
			}
			time.Sleep(5 * time.Millisecond) // polling with a deadline
		}
	}
	// The first batch is stored; the rest wait at the gate.
	st := waitStats("first batch stored", func(st Stats) bool { return st.LastAppliedSeq > 0 })
	if st.LastAppliedSeq >= backlog {
		t.Fatalf("checkpoint %d: the gate did not hold back the backlog", st.LastAppliedSeq)
	}
	if !st.PendingKnown || st.Pending != backlog-st.LastAppliedSeq {
		t.Errorf("behind: Stats = %+v, want pending %d (the messages after the checkpoint)", st, backlog-st.LastAppliedSeq)
	}
	if want := streamTime(st.LastAppliedSeq); !st.LastAppliedTime.Equal(want) {
		t.Errorf("behind: LastAppliedTime = %v, want %v (the stream time of sequence %d)", st.LastAppliedTime, want, st.LastAppliedSeq)
	}

	close(h.gate)
	st = waitStats("catch-up", func(st Stats) bool { return st.LastAppliedSeq == backlog && st.PendingKnown && st.Pending == 0 })
	if want := streamTime(backlog); !st.LastAppliedTime.Equal(want) {
		t.Errorf("caught up: LastAppliedTime = %v, want %v", st.LastAppliedTime, want)
	}
	stop()

	// A new Consumer reads the checkpoint's time from the stream.
	c2, err := New(ctx, nc, db, cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	if st := c2.Stats(); st.LastAppliedSeq != backlog || !st.LastAppliedTime.Equal(streamTime(backlog)) {
		t.Errorf("after New: Stats = %+v, want seq %d at %v", st, backlog, streamTime(backlog))
	}
}
