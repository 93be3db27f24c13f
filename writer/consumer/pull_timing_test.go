package consumer

import (
	"context"
	"testing"
	"time"
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
