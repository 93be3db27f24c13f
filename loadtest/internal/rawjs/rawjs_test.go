package rawjs

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/internal/cputime"
	"github.com/eventide/eventide/internal/natstest"
	"github.com/eventide/eventide/writer/consumer"
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

// BenchmarkConsumeAtRate is the raw pipeline's consumer while messages
// trickle in, as in a find-max step: a publisher on its own connection
// sends 70,000 ~200-byte messages a second, spread over each millisecond,
// and Consume takes them. cpu-ns/msg is the whole process's CPU (embedded
// server, publisher and consumer) per message consumed, msgs/fetch the
// mean batch. "linger" is Consume's pattern; "ready" takes only what is
// ready, as before the consumer lingered like the writer's.
func BenchmarkConsumeAtRate(b *testing.B) {
	const rate = 70000
	for _, bc := range []struct {
		name   string
		linger time.Duration
	}{{"linger", consumer.DefaultFetchLinger}, {"ready", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			s := natstest.StartServer(b)
			_, js := natstest.Connect(b, s.ClientURL())
			pub, _ := natstest.Connect(b, s.ClientURL())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "RAWBENCH", Subjects: []string{"rawbench"}})
			if err != nil {
				b.Fatal(err)
			}
			cons, err := stream.CreateOrUpdateConsumer(ctx, ConsumerConfig("raw"))
			if err != nil {
				b.Fatal(err)
			}
			payload := make([]byte, 200)
			published := natstest.PublishPaced(ctx, rate, 0, func(int) error { return pub.Publish("rawbench", payload) })
			var consumed, fetches atomic.Int64
			f := &fetcher{cons: cons, batch: consumer.DefaultFetchBatch, maxBytes: consumer.DefaultFetchBytes,
				linger: bc.linger, wait: consumer.DefaultFetchWait}
			stop := consume(ctx, f, func(jetstream.Msg) {}, func(n int) {
				consumed.Add(int64(n))
				fetches.Add(1)
			})
			wait := func(n int64) {
				deadline := time.Now().Add(time.Minute)
				for consumed.Load() < n {
					if time.Now().After(deadline) {
						b.Fatalf("%d of %d messages consumed within a minute", consumed.Load(), n)
					}
					time.Sleep(time.Millisecond) // polling the consumer's count, with a deadline
				}
			}
			wait(rate / 10)
			n0, f0, cpu0 := consumed.Load(), fetches.Load(), cputime.MustProcess(b.Fatal)
			b.ResetTimer()
			wait(n0 + int64(b.N))
			b.StopTimer()
			n, nf := consumed.Load()-n0, fetches.Load()-f0
			b.ReportMetric(float64((cputime.MustProcess(b.Fatal)-cpu0).Nanoseconds())/float64(n), "cpu-ns/msg")
			b.ReportMetric(float64(n)/float64(max(nf, 1)), "msgs/fetch")
			stop()
			cancel()
			<-published
		})
	}
}
