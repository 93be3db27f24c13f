package rawjs

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/internal/natstest"
)

// TestFetchLingersUnderLoadAsTheWriter: once a fetch has brought
// messages, the next waits for its batch to fill, in one pull request, as
// the writer's (writer/consumer's TestFetchLingersUnderLoad): the raw
// pipeline's batches then hold what arrives within the linger, not what
// happens to be ready. The messages of the second batch are published one
// at a time, each only after the server delivered the one before, so a
// fetch that takes what is ready returns one message.
func TestFetchLingersUnderLoadAsTheWriter(t *testing.T) {
	const batch = 20
	s := natstest.StartServer(t)
	_, js := natstest.Connect(t, s.ClientURL())
	ctx := context.Background()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "RAWTEST", Subjects: []string{"rawtest"}})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, ConsumerConfig("raw"))
	if err != nil {
		t.Fatal(err)
	}
	// The linger only bounds the test: the batch fills long before.
	f := &fetcher{cons: cons, batch: batch, maxBytes: 1 << 20, linger: time.Minute, wait: 5 * time.Second}
	publish := func(i int) {
		if _, err := js.Publish(ctx, "rawtest", fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	publish(0)
	first, err := f.fetch(ctx, nil)
	if err != nil || len(first) != 1 {
		t.Fatalf("first fetch: %d messages, %v; want 1", len(first), err)
	}
	if err := first[0].Ack(); err != nil {
		t.Fatal(err)
	}

	type result struct {
		msgs []jetstream.Msg
		err  error
	}
	done := make(chan result, 1)
	go func() {
		msgs, err := f.fetch(ctx, nil)
		done <- result{msgs, err}
	}()
	var r result
	returned := false
	for i := 1; i <= batch && !returned; i++ {
		publish(i)
		deadline := time.Now().Add(10 * time.Second)
		for !returned {
			info, err := cons.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.Delivered.Consumer >= uint64(i+1) {
				break
			}
			select {
			case r = <-done:
				returned = true
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("the server delivered %d messages, want %d", info.Delivered.Consumer, i+1)
			}
			time.Sleep(time.Millisecond) // polling the server, with a deadline
		}
	}
	if !returned {
		r = <-done
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.msgs) != batch {
		t.Fatalf("the fetch after one that brought a message returned %d messages, want a full batch of %d", len(r.msgs), batch)
	}
	for i, m := range r.msgs {
		if got, want := string(m.Data()), fmt.Sprintf("m%d", i+1); got != want {
			t.Fatalf("message %d is %q, want %q", i, got, want)
		}
	}
}
