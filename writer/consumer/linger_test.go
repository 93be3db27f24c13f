package consumer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// lingerConsumer creates a Consumer on a fresh stream and positions it
// after its (empty) checkpoint, as Run does before its first fetch.
func lingerConsumer(t testing.TB, cfg Config) (*Consumer, jetstream.JetStream) {
	t.Helper()
	nc, js := startJetStream(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SEAM", Subjects: []string{"seam.>"}}); err != nil {
		t.Fatal(err)
	}
	cfg.Stream, cfg.Durable = "SEAM", "seam"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := New(ctx, nc, openStore(t), cfg, &countingHandler{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.repositionConsumer(ctx); err != nil {
		t.Fatal(err)
	}
	return c, js
}

// delivered waits until the server has delivered n messages of the
// consumer, or until waiting returns false.
func delivered(t *testing.T, js jetstream.JetStream, n uint64, waiting func() bool) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		cons, err := js.Consumer(ctx, "SEAM", "seam")
		if err != nil {
			t.Fatal(err)
		}
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Delivered.Consumer >= n || !waiting() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server delivered %d messages, want %d", info.Delivered.Consumer, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFetchLingersUnderLoad: once a fetch has brought messages, the next
// waits for its batch to fill, in one pull request. The messages of the
// second batch are published one at a time, each only after the server
// delivered the one before, so a fetch that takes what is ready after the
// first message (the behaviour without FetchLinger) returns a short batch.
func TestFetchLingersUnderLoad(t *testing.T) {
	const batch = 20
	// The linger only bounds the test: the batch fills long before.
	c, js := lingerConsumer(t, Config{FetchBatch: batch, FetchLinger: time.Minute})
	ctx := context.Background()
	publish := func(i int) {
		if _, err := js.Publish(ctx, "seam.x", fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	publish(0)
	first, err := c.fetch(ctx)
	if err != nil || len(first) != 1 {
		t.Fatalf("first fetch: %d messages, %v; want 1", len(first), err)
	}

	type result struct {
		msgs []jetstream.Msg
		err  error
	}
	done := make(chan result, 1)
	go func() {
		msgs, err := c.fetch(ctx)
		done <- result{msgs, err}
	}()
	var r result
	returned := false
	for i := 1; i <= batch && !returned; i++ {
		publish(i)
		delivered(t, js, uint64(i+1), func() bool {
			select {
			case r = <-done:
				returned = true
			default:
			}
			return !returned
		})
	}
	if !returned {
		r = <-done
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.msgs) != batch {
		t.Fatalf("the fetch after a full one brought %d messages, want a full batch of %d", len(r.msgs), batch)
	}
	for i, m := range r.msgs {
		if got, want := string(m.Data()), fmt.Sprintf("m%d", i+1); got != want {
			t.Fatalf("message %d is %q, want %q", i, got, want)
		}
	}
}

// TestFetchLingerEndsWhenIdle: a fetch under load that brings nothing
// (the load stopped) ends the lingering, so the next fetch takes what is
// ready without waiting for a batch to fill; a negative FetchLinger never
// lingers.
func TestFetchLingerEndsWhenIdle(t *testing.T) {
	for _, tc := range []struct {
		name   string
		linger time.Duration
	}{{"linger", 20 * time.Millisecond}, {"off", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			c, js := lingerConsumer(t, Config{FetchBatch: 100, FetchLinger: tc.linger, FetchWait: time.Second})
			ctx := context.Background()
			publish := func(data string) {
				if _, err := js.Publish(ctx, "seam.x", []byte(data)); err != nil {
					t.Fatal(err)
				}
			}
			publish("a")
			if msgs, err := c.fetch(ctx); err != nil || len(msgs) != 1 {
				t.Fatalf("first fetch: %d messages, %v; want 1", len(msgs), err)
			}
			if got, want := c.loaded, tc.linger > 0; got != want {
				t.Fatalf("after a fetch that brought a message: lingering %v, want %v", got, want)
			}
			// Nothing published: lingers, then waits FetchWait for a
			// first message, and brings nothing.
			if msgs, err := c.fetch(ctx); err != nil || len(msgs) != 0 {
				t.Fatalf("fetch with nothing published: %d messages, %v; want 0", len(msgs), err)
			}
			if c.loaded {
				t.Fatal("still lingering after a fetch that brought nothing")
			}
			publish("b")
			msgs, err := c.fetch(ctx)
			if err != nil || len(msgs) != 1 || string(msgs[0].Data()) != "b" {
				t.Fatalf("idle fetch brought %d messages, %v; want the one published", len(msgs), err)
			}
		})
	}
}
