package fanout

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/eventide/eventide/internal/cputime"
	"github.com/eventide/eventide/reader"
	"github.com/eventide/eventide/storage"
)

var (
	benchNoTrim      = flag.Bool("bench.notrim", false, "BenchmarkFanout: never check timelines for trimming")
	benchShards      = flag.Int("bench.shards", 2, "BenchmarkFanout: shards (a shard's chunks run one after the other)")
	benchChunk       = flag.Int("bench.chunk", DefaultOptions().ChunkSize, "BenchmarkFanout: Options.ChunkSize")
	benchWorkers     = flag.Int("bench.workers", 2, "BenchmarkFanout: Options.Workers")
	benchBurst       = flag.Int("bench.burst", 1, "BenchmarkFanout: posts applied at once per iteration (by as many authors with the same followers): jobs pending together, which Options.Workers works in parallel")
	benchParts       = flag.Int("bench.parts", DefaultOptions().PartsPerShard, "BenchmarkFanout: Options.PartsPerShard")
	benchTrimEvery   = flag.Int("bench.trimevery", 0, "BenchmarkFanout: Options.TrimEvery (0: the default)")
	benchFollowers   = flag.Int("bench.followers", 0, "BenchmarkFanout: this one follower count instead of 10,000 and 100,000")
	benchPrefill     = flag.Int("bench.prefill", 0, "BenchmarkFanout: posts of another author that fill every follower's timeline before the timed posts (TimelineCap is 800: from 800 on every trim check reads a full timeline); the store is then flushed and compacted")
	benchWALPeriodic = flag.Bool("bench.walperiodic", false, "BenchmarkFanout: WAL in periodic mode (no fsync per batch): what chunk batches that did not wait for their sync would gain")
	benchStallDetail = flag.Bool("bench.stalldetail", false, "BenchmarkFanout: also report what the engine did per post (flushes, compactions, WAL syncs, stalls) and the sampled time its frozen memtables were at the stall limit")
)

// BenchmarkFanout measures one post by an author with that many pushed
// followers, delivered to every timeline by Run (Workers 2; Shards 2 so
// that both workers write chunks of the same job): rows/s is timeline
// rows written per second (-bench.shards=1, the one-node default, leaves
// one worker per job), ms/post the time from the post's batch to its
// last chunk, p99-ms the slowest of the iterations (up to the 99th
// percentile), stall-s/post the time writers waited for the storage
// engine's flushes and compactions, per post, cpu-ns/row the process's
// CPU time (every goroutine: the engine's flushes and compactions too)
// per row. With -bench.burst=N each iteration is N posts by N authors
// with the same followers, applied in one batch: ms/post and p99-ms are
// then per burst, from its batch to the last chunk of its N jobs.
//
//	go test ./fanout -run XXX -bench BenchmarkFanout -benchtime 10x
func BenchmarkFanout(b *testing.B) {
	counts := []int{10_000, 100_000}
	if *benchFollowers > 0 {
		counts = []int{*benchFollowers}
	}
	for _, followers := range counts {
		b.Run(fmt.Sprintf("followers=%d", followers), func(b *testing.B) {
			o := DefaultOptions()
			o.LargeThreshold = 1 << 40
			o.Shards = *benchShards
			o.Workers = *benchWorkers
			o.PartsPerShard = *benchParts
			o.ChunkSize = *benchChunk
			if *benchTrimEvery > 0 {
				o.TrimEvery = *benchTrimEvery
			}
			if *benchNoTrim {
				o.TrimEvery = 1 << 30
			}
			benchMemLimit(&o)
			e := newEnvStorage(b, o, func(so *storage.Options) {
				if *benchWALPeriodic {
					so.WALSyncMode = storage.WALPeriodic
				}
			})
			for a := 0; a < *benchBurst; a++ {
				e.followMany(starName(a), followers)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- e.f.Run(ctx) }()
			defer func() {
				cancel()
				<-done
			}()
			if *benchPrefill > 0 {
				// Every follower also follows "filler", whose posts fill
				// their timelines before the timed posts.
				e.followMany("filler", followers)
				want := rowsWritten(e.f) + float64(followers**benchPrefill)
				var msgs []Message
				for i := 0; i < *benchPrefill; i++ {
					msgs = append(msgs, e.post("filler", fmt.Sprintf("fill%d", i), "hello"))
					if len(msgs) == 50 || i == *benchPrefill-1 {
						e.apply(msgs...)
						msgs = msgs[:0]
					}
				}
				for rowsWritten(e.f) < want {
					time.Sleep(time.Millisecond)
				}
				// The prefill's flushes and compactions end before the
				// timed posts, which would otherwise pay for them (its
				// 1.8 million rows at 2,000 followers). The timelines are
				// then in few SSTables, so trim checks read fewer sources
				// than in a store that has run for a while.
				if err := e.db.Flush(); err != nil {
					b.Fatal(err)
				}
				if err := e.db.CompactAll(); err != nil {
					b.Fatal(err)
				}
			}
			var times []time.Duration
			written := rowsWritten(e.f)
			before := e.db.Metrics()
			maxFrozen := storage.DefaultOptions().MaxImmutableMemtables
			var frozenFull time.Duration // sampled: writers stall on "memtable"
			maxSSTables := 0
			b.ResetTimer()
			start := time.Now()
			cpuBefore := cputime.MustProcess(b.Fatal)
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				var posts []Message
				for a := 0; a < *benchBurst; a++ {
					posts = append(posts, e.post(starName(a), fmt.Sprintf("p%d.%d", i, a), "hello"))
				}
				e.apply(posts...)
				written += float64(followers * *benchBurst)
				sampled := time.Now()
				for n := 0; rowsWritten(e.f) < written; n++ {
					time.Sleep(100 * time.Microsecond)
					if *benchStallDetail && n%10 == 0 {
						m, now := e.db.Metrics(), time.Now()
						if m.FrozenMemtables >= maxFrozen {
							frozenFull += now.Sub(sampled)
						}
						sampled = now
						for _, t := range m.Tables {
							maxSSTables = max(maxSSTables, t.SSTables)
						}
					}
				}
				times = append(times, time.Since(t0))
				if *benchStallDetail {
					m := e.db.Metrics()
					b.Logf("post %d: %.1f ms, cpu so far %.0f ns/row; since start: %d flushes, %d compactions, %d stalls (%.1f ms), %d wal syncs",
						i, float64(times[i].Microseconds())/1000, float64((cputime.MustProcess(b.Fatal)-cpuBefore).Nanoseconds())/float64(followers**benchBurst*(i+1)),
						m.Flushes-before.Flushes, m.Compactions-before.Compactions, m.WriteStalls-before.WriteStalls,
						float64((m.WriteStallTime-before.WriteStallTime).Microseconds())/1000, m.WALSyncs-before.WALSyncs)
				}
			}
			elapsed := time.Since(start)
			cpu := cputime.MustProcess(b.Fatal) - cpuBefore
			b.StopTimer()
			after := e.db.Metrics()
			if *benchStallDetail {
				per := func(n int64) float64 { return float64(n) / float64(b.N) }
				b.ReportMetric(frozenFull.Seconds()/float64(b.N), "memtable-full-s/post")
				b.ReportMetric(float64(maxSSTables), "max-sstables")
				b.ReportMetric(per(after.Flushes-before.Flushes), "flushes/post")
				b.ReportMetric(per(after.Compactions-before.Compactions), "compactions/post")
				b.ReportMetric(per(after.WALSyncs-before.WALSyncs), "wal-syncs/post")
				b.ReportMetric(per(after.WriteStalls-before.WriteStalls), "stalls/post")
			}
			slices.Sort(times)
			rows := followers * *benchBurst * b.N
			b.ReportMetric(float64(rows)/elapsed.Seconds(), "rows/s")
			b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N), "ms/post")
			b.ReportMetric(float64(times[(len(times)*99)/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric((after.WriteStallTime-before.WriteStallTime).Seconds()/float64(b.N), "stall-s/post")
			if n := e.counter("eventide_fanout_chunk_errors_total"); n > 0 {
				b.ReportMetric(n, "chunk-errors") // retried after a second each
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(rows), "cpu-ns/row")
		})
	}
}

// starName is the author of the a-th post of a -bench.burst.
func starName(a int) string {
	if a == 0 {
		return "star"
	}
	return fmt.Sprintf("star%d", a)
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

// rowsWritten reads the fan-out's timeline rows counter directly: the
// benchmarks poll it every 100 µs, and gathering the registry that often
// took a visible share of the two cores.
func rowsWritten(f *Fanout) float64 { return testutil.ToFloat64(f.m.rowsWritten) }

var (
	benchMemFollowers = flag.Int("bench.memfollowers", 1_000_000, "BenchmarkFanoutMemory: followers of the author")
	benchMemtableMiB  = flag.Int("bench.memtable", 0, "BenchmarkFanoutMemory: storage MemtableSize in MiB (0: the default)")
	benchCacheMiB     = flag.Int("bench.cache", 0, "BenchmarkFanoutMemory: storage BlockCacheSize in MiB (0: the default)")
	benchMemLimitMiB  = flag.Int("bench.memlimit", -1, "BenchmarkFanout, BenchmarkFanoutMemory: Options.MaxMemtableBytes in MiB (-1: the default, 0: no limit)")
	benchHeapProfile  = flag.String("bench.heapprofile", "", "BenchmarkFanoutMemory: write a heap profile here when half the rows are written")
)

// BenchmarkFanoutMemory reports how much memory one post by an author
// with -bench.memfollowers followers takes while Run delivers it: the
// growth of the process's resident set (peak-rss-growth-MiB: VmHWM after
// the post, reset through /proc/self/clear_refs, minus VmRSS before it)
// and of the Go heap in use (peak-heap-growth-MiB, sampled every
// millisecond, so it includes garbage not yet collected). Both include
// the storage engine's memtables, flushes and compactions that the
// fan-out's writes cause, not only the fan-out's chunks. Before the post
// the follows are flushed and compacted, so the engine is quiet, and the
// heap is collected and returned to the OS.
//
// What the growth is made of: the memtable and block cache arenas'
// growth (outside the Go heap; the memtables' peak with
// peak-frozen-memtables, the flushes during the post and
// memtable-wait-s, the time chunks waited for them:
// Options.MaxMemtableBytes, -bench.memlimit), and the Go heap's: the
// collector lets the heap grow to its goal, twice the live heap
// (GOGC=100), so heap-live-before-MiB, peak-heap-live-MiB (the live
// heap after the post's collections, gcs of them) and
// peak-heap-goal-MiB say how much of peak-heap-growth-MiB is headroom.
//
//	go test ./fanout -run XXX -bench BenchmarkFanoutMemory -benchtime 1x
func BenchmarkFanoutMemory(b *testing.B) {
	o := DefaultOptions()
	o.LargeThreshold = 1 << 40
	benchMemLimit(&o)
	e := newEnvStorage(b, o, func(so *storage.Options) {
		if *benchMemtableMiB > 0 {
			so.MemtableSize = int64(*benchMemtableMiB) << 20
		}
		if *benchCacheMiB > 0 {
			so.BlockCacheSize = int64(*benchCacheMiB) << 20
		}
	})
	e.followMany("star", *benchMemFollowers)
	if err := e.db.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := e.db.CompactAll(); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.f.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		debug.FreeOSMemory()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base, peak := ms.HeapInuse, ms.HeapInuse
		hwmReset := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
		rssBase := procStatusKiB(b, "VmRSS")
		rssPeak := rssBase
		// The engine's two arenas, outside the Go heap: the memtables'
		// and the block cache's (sampled every 10 ms).
		sm := e.db.Metrics()
		memBase, cacheBase := sm.MemtableMappedBytes, sm.BlockCacheMappedBytes
		memPeak, cachePeak := memBase, cacheBase
		var lastSample time.Time
		// What the Go heap's growth is made of: the live heap at the
		// start (the collector lets the heap grow to twice it, GOGC=100),
		// the heap goal at its highest, and the collections during the post.
		rm := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/goal:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
		rtmetrics.Read(rm)
		liveBase, goalPeak, gcBase := rm[0].Value.Uint64(), rm[1].Value.Uint64(), rm[2].Value.Uint64()
		livePeak := liveBase
		frozenPeak, flushesBase := sm.FrozenMemtables, sm.Flushes
		want := rowsWritten(e.f) + float64(*benchMemFollowers)
		start := time.Now()
		e.apply(e.post("star", fmt.Sprintf("p%d", i), "hello"))
		profiled := *benchHeapProfile == ""
		for n := rowsWritten(e.f); n < want; n = rowsWritten(e.f) {
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
			rssPeak = max(rssPeak, procStatusKiB(b, "VmRSS"))
			rtmetrics.Read(rm)
			livePeak, goalPeak = max(livePeak, rm[0].Value.Uint64()), max(goalPeak, rm[1].Value.Uint64())
			if time.Since(lastSample) >= 10*time.Millisecond {
				sm := e.db.Metrics()
				memPeak, cachePeak = max(memPeak, sm.MemtableMappedBytes), max(cachePeak, sm.BlockCacheMappedBytes)
				frozenPeak = max(frozenPeak, sm.FrozenMemtables)
				lastSample = time.Now()
			}
		}
		rtmetrics.Read(rm)
		b.ReportMetric(float64(liveBase)/(1<<20), "heap-live-before-MiB")
		b.ReportMetric(float64(livePeak)/(1<<20), "peak-heap-live-MiB")
		b.ReportMetric(float64(goalPeak)/(1<<20), "peak-heap-goal-MiB")
		b.ReportMetric(float64(rm[2].Value.Uint64()-gcBase), "gcs")
		b.ReportMetric(float64(frozenPeak), "peak-frozen-memtables")
		b.ReportMetric(float64(e.db.Metrics().Flushes-flushesBase), "flushes")
		b.ReportMetric(testutil.ToFloat64(e.f.m.memtableWait), "memtable-wait-s")
		if hwmReset {
			rssPeak = max(rssPeak, procStatusKiB(b, "VmHWM"))
		}
		b.ReportMetric(time.Since(start).Seconds(), "s-delivered")
		b.ReportMetric(float64(peak-base)/(1<<20), "peak-heap-growth-MiB")
		b.ReportMetric(float64(rssPeak-rssBase)/1024, "peak-rss-growth-MiB")
		b.ReportMetric(float64(memPeak-memBase)/(1<<20), "peak-memtable-mapped-growth-MiB")
		b.ReportMetric(float64(cachePeak-cacheBase)/(1<<20), "peak-cache-mapped-growth-MiB")
		b.ReportMetric(float64(memBase)/(1<<20), "memtable-mapped-before-MiB")
		b.ReportMetric(float64(cacheBase)/(1<<20), "cache-mapped-before-MiB")
	}
}

// benchMemLimit sets o.MaxMemtableBytes from -bench.memlimit.
func benchMemLimit(o *Options) {
	switch {
	case *benchMemLimitMiB == 0:
		o.MaxMemtableBytes = -1
	case *benchMemLimitMiB > 0:
		o.MaxMemtableBytes = int64(*benchMemLimitMiB) << 20
	}
}

// procStatusKiB reads a "Vm..." line of /proc/self/status, in KiB.
func procStatusKiB(b *testing.B, field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				b.Fatalf("cannot parse %s in /proc/self/status: %v", field, err)
			}
			return n
		}
	}
	b.Fatalf("no %s in /proc/self/status", field)
	return 0
}
