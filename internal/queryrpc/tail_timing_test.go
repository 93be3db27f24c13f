package queryrpc

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/internal/cputime"
	"github.com/eventide/eventide/internal/natsembed"
	"github.com/eventide/eventide/writer"
)

// BenchmarkTailPublisherNoListener times what the all-in-one's tail
// publisher costs the process when no query service listens: batches of
// 100 stored events of ~200-byte bodies (as the loadtest sends them)
// handed to the publisher on an in-process connection to the embedded
// server, as cmd/ingest wires it. cpu-ns/event is the whole process's CPU
// (the embedded server's included) per event.
func BenchmarkTailPublisherNoListener(b *testing.B) {
	for _, withInterest := range []bool{false, true} {
		b.Run(fmt.Sprintf("interest-check=%v", withInterest), func(b *testing.B) {
			ns, err := natsembed.Start(natsembed.Config{Listen: "127.0.0.1:0", StoreDir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer natsembed.Stop(ns)
			nc, err := nats.Connect("", nats.InProcessServer(ns))
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			var interest func(string) bool
			if withInterest {
				interest = natsembed.Interest(ns)
			}
			p := newTailPublisher(nc, "node-a", nil, 0, interest)
			const n = 100
			batch := make([]writer.StoredEvent, n)
			pad := strings.Repeat("x", 150)
			for i := range batch {
				batch[i] = writer.StoredEvent{Event: schema.Event{ID: uuid.Must(uuid.NewUUID()), Type: fmt.Sprintf("t%02d", i%20), User: fmt.Sprintf("u%d", i),
					Data: []byte(fmt.Sprintf(`{"seq":%d,"pad":"%s"}`, i, pad))}}
			}
			b.ReportAllocs()
			cpu0 := cputime.MustProcess(b.Fatal)
			b.ResetTimer()
			seq := uint64(0)
			for range b.N {
				for i := range batch {
					seq++
					batch[i].Seq = seq
				}
				p.add(batch)
			}
			if err := nc.Flush(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64((cputime.MustProcess(b.Fatal)-cpu0).Nanoseconds())/float64(b.N*n), "cpu-ns/event")
		})
	}
}
