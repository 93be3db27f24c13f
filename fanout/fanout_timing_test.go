package fanout

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"testing"
	"time"

	"github.com/eventide/eventide/reader"
)

var (
	benchNoTrim = flag.Bool("bench.notrim", false, "BenchmarkFanout: never check timelines for trimming")
	benchShards = flag.Int("bench.shards", 2, "BenchmarkFanout: shards (a shard's chunks run one after the other)")
)

// BenchmarkFanout measures one post by an author with that many pushed
// followers, delivered to every timeline by Run (Workers 2; Shards 2 so
// that both workers write chunks of the same job): rows/s is timeline
// rows written per second (-bench.shards=1, the one-node default, leaves
// one worker per job), ms/post the time from the post's batch to its
// last chunk, p99-ms the slowest of the iterations (up to the 99th
// percentile), stall-s/post the time writers waited for the storage
// engine's flushes and compactions, per post.
//
//	go test ./fanout -run XXX -bench BenchmarkFanout -benchtime 10x
func BenchmarkFanout(b *testing.B) {
	for _, followers := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("followers=%d", followers), func(b *testing.B) {
			o := DefaultOptions()
			o.LargeThreshold = 1 << 40
			o.Shards = *benchShards
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
			stallsBefore := e.db.Metrics().WriteStallTime
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
			b.ReportMetric((e.db.Metrics().WriteStallTime-stallsBefore).Seconds()/float64(b.N), "stall-s/post")
		})
	}
}

// BenchmarkTimelineRead measures the first page (limit 20) of a timeline
// that merges 10 pulled authors' userlines (100 posts each) with a pushed
// timeline of 5 pushed authors' posts (100 each), after a flush, so the
// reads go to SSTables: ns/op is the mean, p99-ms the 99th percentile.
//
//	go test ./fanout -run XXX -bench BenchmarkTimelineRead
func BenchmarkTimelineRead(b *testing.B) {
	o := DefaultOptions()
	o.LargeThreshold = 2
	e := newEnv(b, o)
	var msgs []Message
	for i := 0; i < 10; i++ {
		a := fmt.Sprintf("big%d", i)
		msgs = append(msgs, e.follow("u", a), e.follow("x1", a), e.follow("x2", a))
	}
	for i := 0; i < 5; i++ {
		msgs = append(msgs, e.follow("u", fmt.Sprintf("small%d", i)))
	}
	e.apply(msgs...)
	for n := 0; n < 100; n++ {
		msgs = msgs[:0]
		for i := 0; i < 10; i++ {
			a := fmt.Sprintf("big%d", i)
			msgs = append(msgs, e.post(a, fmt.Sprintf("%s.%d", a, n), "hello"))
		}
		for i := 0; i < 5; i++ {
			a := fmt.Sprintf("small%d", i)
			msgs = append(msgs, e.post(a, fmt.Sprintf("%s.%d", a, n), "hello"))
		}
		e.apply(msgs...)
	}
	e.work()
	if err := e.db.Flush(); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		p, err := e.tl.Timeline(ctx, reader.TimelineQuery{User: "u", Limit: 20})
		if err != nil || len(p.Posts) != 20 || p.Pulled != 10 {
			b.Fatalf("page of %d posts, %d pulled: %v", len(p.Posts), p.Pulled, err)
		}
		times = append(times, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[(len(times)*99)/100].Microseconds())/1000, "p99-ms")
}

var (
	benchMemFollowers = flag.Int("bench.memfollowers", 1_000_000, "BenchmarkFanoutMemory: followers of the author")
	benchHeapProfile  = flag.String("bench.heapprofile", "", "BenchmarkFanoutMemory: write a heap profile here when half the rows are written")
)

// BenchmarkFanoutMemory reports how much the Go heap grows (peak in use,
// sampled every millisecond, minus the heap before the post) while one
// post by an author with -bench.memfollowers followers is delivered by
// Run: the fan-out's chunks plus the storage engine's memtables and
// flushes, which the fan-out's writes fill.
//
//	go test ./fanout -run XXX -bench BenchmarkFanoutMemory -benchtime 1x
func BenchmarkFanoutMemory(b *testing.B) {
	o := DefaultOptions()
	o.LargeThreshold = 1 << 40
	e := newEnv(b, o)
	e.followMany("star", *benchMemFollowers)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.f.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base, peak := ms.HeapInuse, ms.HeapInuse
		want := e.counter("eventide_fanout_timeline_rows_written_total") + float64(*benchMemFollowers)
		e.apply(e.post("star", fmt.Sprintf("p%d", i), "hello"))
		profiled := *benchHeapProfile == ""
		for n := e.counter("eventide_fanout_timeline_rows_written_total"); n < want; n = e.counter("eventide_fanout_timeline_rows_written_total") {
			if !profiled && n >= want-float64(*benchMemFollowers)/2 {
				profiled = true
				f, err := os.Create(*benchHeapProfile)
				if err != nil {
					b.Fatal(err)
				}
				if err := pprof.WriteHeapProfile(f); err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
			time.Sleep(time.Millisecond)
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
		}
		b.ReportMetric(float64(peak-base)/(1<<20), "peak-heap-growth-MiB")
	}
}
