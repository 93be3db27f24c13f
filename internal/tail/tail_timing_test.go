package tail

import (
	"fmt"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
)

// BenchmarkPublish: one batch of 1000 events of 200 bytes to 10
// subscribers that keep up, as the writer's hook and the streams run it.
func BenchmarkPublish(b *testing.B) {
	for _, subscribers := range []int{0, 10} {
		b.Run(fmt.Sprintf("subscribers=%d", subscribers), func(b *testing.B) {
			br := New(Options{ClientBuffer: 4096}, 0)
			subs := make([]*Subscription, subscribers)
			for i := range subs {
				subs[i], _ = br.Subscribe(nil, 0, false)
			}
			batch := make([]Event, 1000)
			data := make([]byte, 200)
			for i := range batch {
				id, err := bucket.NewTimeUUID(time.Date(2026, 11, 22, 10, 0, i, 0, time.UTC), [8]byte{})
				if err != nil {
					b.Fatal(err)
				}
				batch[i] = Event{ID: id, Type: "click", Data: data}
			}
			var buf []*Event
			b.SetBytes(int64(len(batch) * len(data)))
			b.ReportAllocs()
			seq := uint64(0)
			for b.Loop() {
				for i := range batch {
					seq++
					batch[i].Seq = seq
				}
				br.Publish(batch)
				for _, s := range subs {
					buf, _ = s.Take(buf[:0])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/event")
		})
	}
}
