package fanout

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"
)

var benchNoTrim = flag.Bool("bench.notrim", false, "BenchmarkFanout: never check timelines for trimming")

// BenchmarkFanout measures one post by an author with that many pushed
// followers, delivered to every timeline by Run (Workers 2; Shards 2 so
// that both workers write chunks of the same job): rows/s is timeline
// rows written per second, ms/post the time from the post's batch to its
// last chunk, p99-ms the slowest of the iterations (up to the 99th
// percentile).
//
//	go test ./fanout -run XXX -bench BenchmarkFanout -benchtime 10x
func BenchmarkFanout(b *testing.B) {
	for _, followers := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("followers=%d", followers), func(b *testing.B) {
			o := DefaultOptions()
			o.LargeThreshold = 1 << 40
			o.Shards = 2
			o.Workers = 2
			if *benchNoTrim {
				o.TrimEvery = 1 << 30
			}
			e := newEnv(b, o)
			e.followMany("star", followers)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- e.f.Run(ctx) }()
			defer func() {
				cancel()
				<-done
			}()
			var times []time.Duration
			written := e.counter("eventide_fanout_timeline_rows_written_total")
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				e.apply(e.post("star", fmt.Sprintf("p%d", i), "hello"))
				written += float64(followers)
				for e.counter("eventide_fanout_timeline_rows_written_total") < written {
					time.Sleep(100 * time.Microsecond)
				}
				times = append(times, time.Since(t0))
			}
			elapsed := time.Since(start)
			b.StopTimer()
			slices.Sort(times)
			b.ReportMetric(float64(followers*b.N)/elapsed.Seconds(), "rows/s")
			b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N), "ms/post")
			b.ReportMetric(float64(times[(len(times)*99)/100].Microseconds())/1000, "p99-ms")
		})
	}
}
