package consumer

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/internal/cputime"
	"github.com/eventide/eventide/internal/natsembed"
	"github.com/eventide/eventide/internal/natstest"
)

// BenchmarkFetch fetches batches of 32 messages and acks each batch with
// one ack, as the loop does under load: the client's allocations and bytes
// per fetch (the time includes the embedded server's work). "ready": 32
// messages are ready and FetchBatch is 32; "linger": FetchBatch is the
// default 1000 and the 32 messages published before each fetch are what
// arrives within a 1 ms linger, as in the split deployment at 25,000
// events/s (the time includes the linger).
func BenchmarkFetch(b *testing.B) {
	const batch = 32
	for _, bc := range []struct {
		name  string
		cfg   Config
		ahead int // batches published ahead
	}{
		{"ready", Config{FetchBatch: batch}, 64},
		{"linger", Config{FetchLinger: time.Millisecond}, 1},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c, js := lingerConsumer(b, bc.cfg)
			ctx := context.Background()
			payload := make([]byte, 200)
			pub := func(n int) {
				for range n {
					if _, err := js.PublishAsync("seam.x", payload); err != nil {
						b.Fatal(err)
					}
				}
				<-js.PublishAsyncComplete()
			}
			pub(batch * bc.ahead)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%bc.ahead == bc.ahead-1 {
					b.StopTimer()
					pub(batch * bc.ahead)
					b.StartTimer()
				}
				msgs, err := c.fetch(ctx)
				if err != nil || len(msgs) == 0 {
					b.Fatalf("fetch %d: %d messages, %v", i, len(msgs), err)
				}
				if err := msgs[len(msgs)-1].Ack(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLingeringPull is the lingering pull while messages trickle in,
// as under a steady load: a publisher on a TCP connection sends rate
// messages a second, spread over each millisecond, and the loop, on an
// in-process connection as in cmd/ingest, pulls batches with the default
// 5 ms linger and acks each. "queued" takes the
// deliveries when the request expires (the loop's way, awaitFill); "each"
// waits for them one by one as they arrive; "queued-tcp" is "queued" with
// the loop's connection over loopback TCP instead of in-process
// (net.Pipe). cpu-ns/msg is the whole
// process's CPU (the embedded server and the publisher included) per
// message; the difference between the two is the consumer's.
func BenchmarkLingeringPull(b *testing.B) {
	const rate = 70000
	for _, bc := range []struct {
		name string
		fill bool
		tcp  bool // the loop's connection over loopback TCP, not in-process
	}{{"queued", true, false}, {"each", false, false}, {"queued-tcp", true, true}} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := natsembed.Start(natsembed.Config{Listen: "127.0.0.1:0", StoreDir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer natsembed.Stop(s)
			url, opts := "", []nats.Option{nats.InProcessServer(s)}
			if bc.tcp {
				url, opts = s.ClientURL(), nil
			}
			nc, err := nats.Connect(url, opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SEAM", Subjects: []string{"seam.>"}}); err != nil {
				b.Fatal(err)
			}
			c, err := New(ctx, nc, openStore(b), Config{Stream: "SEAM", Durable: "seam",
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, &countingHandler{})
			if err != nil {
				b.Fatal(err)
			}
			if err := c.repositionConsumer(ctx); err != nil {
				b.Fatal(err)
			}
			pubc, err := nats.Connect(s.ClientURL())
			if err != nil {
				b.Fatal(err)
			}
			defer pubc.Close()
			payload := make([]byte, 200)
			published := natstest.PublishPaced(ctx, rate, 0, func(int) error { return pubc.Publish("seam.x", payload) })
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cputime.MustProcess(b.Fatal)
			got := 0
			for got < b.N {
				msgs, err := c.pull.pull(ctx, nil, DefaultFetchBatch, DefaultFetchBytes, DefaultFetchLinger, bc.fill)
				if err != nil {
					b.Fatal(err)
				}
				if len(msgs) > 0 {
					if err := msgs[len(msgs)-1].Ack(); err != nil {
						b.Fatal(err)
					}
				}
				got += len(msgs)
			}
			b.ReportMetric(float64((cputime.MustProcess(b.Fatal)-cpu0).Nanoseconds())/float64(got), "cpu-ns/msg")
			b.StopTimer()
			cancel()
			<-published
		})
	}
}
