// Command ingestbench measures Eventide's ingest pipeline against raw
// JetStream in the same run, on the same embedded NATS server:
//
//  1. rounds (default 3), each of two phases publishing N ~200-byte
//     events with async publishes: raw, a pull consumer that fetches
//     and acks as the writer does (loadtest/internal/rawjs) without
//     storing anything; then eventide, the
//     writer (validate, one atomic storage batch per fetch with counts and
//     checkpoint, WAL fsync, then ack). Before each raw phase, flushes and
//     compactions left by the previous Eventide phase are waited for, so
//     they never slow the peer down. The ratio reported is the median of
//     the rounds' ratios;
//  2. latency: at a fraction (default 50%) of Eventide's median rate, the
//     publisher runs first against the raw consumer (publish to acked),
//     then against the writer (publish to queryable: the writer's
//     checkpoint covers the message's stream sequence, so its rows are in
//     the memtable), for the same duration each;
//  3. check: per-minute counts read through reader.Counts add up to every
//     event published to the writer.
//
// Usage:
//
//	go run ./loadtest/ingestbench -events 300000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventide/eventide/internal/cputime"
	"github.com/eventide/eventide/internal/natsembed"
	"github.com/eventide/eventide/loadtest/internal/rawjs"
	"github.com/eventide/eventide/reader"
	"github.com/eventide/eventide/storage"
	"github.com/eventide/eventide/writer"
)

func main() {
	events := flag.Int("events", 300000, "events published in each throughput phase")
	rounds := flag.Int("rounds", 3, "throughput rounds (raw then Eventide in each); the ratio reported is the median")
	types := flag.Int("types", 20, "event types")
	fraction := flag.Float64("latency-rate", 0.5, "latency phase rate as a fraction of the measured Eventide rate")
	latencyFor := flag.Duration("latency-duration", 20*time.Second, "length of the latency phase")
	dir := flag.String("dir", "", "working directory (default: a new temporary directory, removed at the end)")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the Eventide throughput phase to this file")
	flag.StringVar(&memProfile, "memprofile", "", "write an allocation profile of the Eventide throughput phase to this file")
	flag.Parse()
	if memProfile != "" {
		runtime.MemProfileRate = 0 // only the Eventide phase is sampled
	}
	if err := run(*events, *rounds, *types, *fraction, *latencyFor, *dir); err != nil {
		log.Fatal(err)
	}
}

var cpuProfile, memProfile string

func run(n, rounds, types int, fraction float64, latencyFor time.Duration, dir string) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "ingestbench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	ns, err := natsembed.Start(natsembed.Config{Listen: "127.0.0.1:0", StoreDir: filepath.Join(dir, "nats")})
	if err != nil {
		return err
	}
	defer natsembed.Stop(ns)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx := context.Background()
	fmt.Printf("ingestbench: %d events per phase, %d types, ~200-byte events, GOMAXPROCS=%d, %s\n",
		n, types, runtime.GOMAXPROCS(0), time.Now().UTC().Format(time.RFC3339))

	// The raw consumer and the writer both run from here to the end, each
	// idle while the other's phase publishes.
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "RAW", Subjects: []string{"raw.>"}, Storage: jetstream.FileStorage}); err != nil {
		return err
	}
	// The raw consumer fetches and acks as the writer does (rawjs), so the
	// ratio is what validation and storage cost.
	rawCons, err := js.CreateOrUpdateConsumer(ctx, "RAW", rawjs.ConsumerConfig("raw"))
	if err != nil {
		return err
	}
	var rawAcked atomic.Int64
	var rawAckedSeq atomic.Uint64 // the stream sequence of the last message acked
	var rawLastSeq uint64         // the consumer goroutine's: the last handled message's
	stopRaw := rawjs.Consume(ctx, rawCons, func(m jetstream.Msg) {
		if md, err := m.Metadata(); err == nil {
			rawLastSeq = md.Sequence.Stream
		}
	}, func(n int) {
		rawAcked.Add(int64(n))
		rawAckedSeq.Store(rawLastSeq)
	})
	defer stopRaw()

	opts := storage.DefaultOptions()
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	db, err := storage.Open(filepath.Join(dir, "storage"), opts)
	if err != nil {
		return err
	}
	defer db.Close()
	reg := prometheus.NewRegistry()
	w, err := writer.New(ctx, nc, db, writer.Config{Logger: opts.Logger, Registerer: reg})
	if err != nil {
		return err
	}
	wctx, stopWriter := context.WithCancel(ctx)
	var wWG sync.WaitGroup
	wWG.Add(1)
	go func() { defer wWG.Done(); w.Run(wctx) }()
	defer func() { stopWriter(); wWG.Wait() }()

	// Rounds: raw, then Eventide, each publishing n events. Flushes and
	// compactions left over from an Eventide phase finish before the next
	// raw phase starts, so they never slow the peer down.
	start := time.Now()
	var ratios, evRates []float64
	for round := 1; round <= rounds; round++ {
		waitStorageIdle(db)
		cpu0, err := cputime.Process()
		if err != nil {
			return err
		}
		rawRate, err := throughput(js, "raw", n, types, func() int64 { return rawAcked.Load() })
		if err != nil {
			return err
		}
		cpu1, err := cputime.Process()
		if err != nil {
			return err
		}
		rawCPU := cpu1 - cpu0
		if round == 1 && cpuProfile != "" {
			f, err := os.Create(cpuProfile)
			if err != nil {
				return err
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				return err
			}
		}
		if round == 1 && memProfile != "" {
			runtime.MemProfileRate = 64 << 10 // sampling starts with the phase (main turned it off)
		}
		// Process read the time above, so it cannot fail here.
		cpu0, _ = cputime.Process()
		evRate, err := throughput(js, "events", n, types, func() int64 { return int64(w.Stats().LastAppliedSeq) })
		cpu1, _ = cputime.Process()
		evCPU := cpu1 - cpu0
		if round == 1 {
			pprof.StopCPUProfile()
			if memProfile != "" {
				if err := writeAllocProfile(memProfile); err != nil {
					return err
				}
				runtime.MemProfileRate = 0
			}
		}
		if err != nil {
			return err
		}
		ratios, evRates = append(ratios, evRate/rawRate), append(evRates, evRate)
		fmt.Printf("round %d: raw JetStream (fetch and ack as the writer) %.0f events/s, eventide (validate, store with counts and checkpoint, WAL fsync, ack) %.0f events/s = %.2fx\n",
			round, rawRate, evRate, evRate/rawRate)
		// The process's CPU (publisher, embedded server, consumer or
		// writer) per event moves far less with the machine's other load
		// than the rates do.
		fmt.Printf("round %d: CPU per event (publish included): raw %.2f µs, eventide %.2f µs (+%.2f µs)\n",
			round, perEventMicros(rawCPU, n), perEventMicros(evCPU, n), perEventMicros(evCPU-rawCPU, n))
	}
	sortedRatios := slices.Sorted(slices.Values(ratios))
	fmt.Printf("eventide / raw JetStream over %d rounds: median %.2fx (min %.2fx, max %.2fx; target >= 0.70x)\n",
		rounds, median(ratios), sortedRatios[0], sortedRatios[len(sortedRatios)-1])
	printHistograms(reg, nil)
	evRate := median(evRates)

	// Phase 3: latency at a fraction of the measured rate.
	rate := evRate * fraction // of the median Eventide rate
	rawLat, _, err := latency(js, "raw", rawAckedSeq.Load, rate, latencyFor, types)
	if err != nil {
		return err
	}
	beforeLatency := gatherHistograms(reg)
	lat, published, err := latency(js, "events", func() uint64 { return w.Stats().LastAppliedSeq }, rate, latencyFor, types)
	if err != nil {
		return err
	}
	fmt.Printf("publish-to-acked, raw JetStream, at %.0f events/s (%.0f%% of Eventide's median rate) over %s: %s\n",
		rate, fraction*100, latencyFor, quantiles(rawLat))
	fmt.Printf("publish-to-queryable, Eventide, at the same rate: %s (target p99 <= 100ms)\n", quantiles(lat))
	printHistograms(reg, beforeLatency)

	// Check: counts add up to every event published to the writer.
	r, err := reader.New(db, reader.Options{})
	if err != nil {
		return err
	}
	var total int64
	for t := range types {
		points, err := r.Counts(ctx, reader.CountQuery{Type: typeName(t), From: start.Add(-time.Hour), To: time.Now().Add(time.Hour), Step: time.Hour})
		if err != nil {
			return err
		}
		for _, p := range points {
			total += p.Count
		}
	}
	want := int64(rounds*n) + int64(published)
	fmt.Printf("check: counts sum to %d, published %d: %s\n", total, want, map[bool]string{true: "ok", false: "MISMATCH"}[total == want])
	fmt.Println(db.Metrics().String())
	if total != want {
		return fmt.Errorf("counts %d != published %d", total, want)
	}
	return nil
}

func typeName(i int) string { return fmt.Sprintf("type%02d", i) }

func perEventMicros(d time.Duration, n int) float64 {
	return float64(d.Microseconds()) / float64(n)
}

// body returns a ~200-byte event.
func body(rng *rand.Rand, typ string, at time.Time) []byte {
	return fmt.Appendf(nil, `{"type":%q,"time":%d,"user":"user-%06d","data":{"page":"/products/%05d","referrer":"https://example.com/%08x","session":"%016x","ms":%d}}`,
		typ, at.UnixMilli(), rng.IntN(1000000), rng.IntN(100000), rng.Uint32(), rng.Uint64(), rng.IntN(5000))
}

// throughput publishes n events to prefix.<type> with async publishes and
// returns n divided by the time until done() reports them all consumed.
func throughput(js jetstream.JetStream, prefix string, n, types int, done func() int64) (float64, error) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := done()
	start := time.Now()
	for i := range n {
		typ := typeName(i % types)
		msg := body(rng, typ, time.Now())
		_, err := js.PublishAsync(prefix+"."+typ, msg)
		for errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			// The server is behind (a busy machine): wait for the acks
			// in flight and publish this one again, as a producer would.
			<-js.PublishAsyncComplete()
			_, err = js.PublishAsync(prefix+"."+typ, msg)
		}
		if err != nil {
			return 0, err
		}
		if i%5000 == 4999 {
			<-js.PublishAsyncComplete()
		}
	}
	<-js.PublishAsyncComplete()
	for done()-base < int64(n) {
		if time.Since(start) > 10*time.Minute {
			return 0, fmt.Errorf("%s: only %d of %d consumed after 10 minutes", prefix, done()-base, n)
		}
		time.Sleep(time.Millisecond)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// latency publishes at rate for d and returns, per event, the time from
// its publish to the writer's checkpoint covering its sequence.
// latency publishes to prefix.<type> at rate for d and returns, per
// event, the time from its publish until done() (the highest stream
// sequence stored, or acked) covers its sequence.
func latency(js jetstream.JetStream, prefix string, done func() uint64, rate float64, d time.Duration, types int) ([]time.Duration, int, error) {
	rng := rand.New(rand.NewPCG(3, 4))
	var mu sync.Mutex
	sent := map[uint64]time.Time{}
	var lat []time.Duration
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the probe: which sequences became queryable, and when
		defer wg.Done()
		var seen uint64
		for {
			cur := done()
			now := time.Now()
			mu.Lock()
			for s := seen + 1; s <= cur; s++ {
				if at, ok := sent[s]; ok {
					lat = append(lat, now.Sub(at))
					delete(sent, s)
				}
			}
			pending := len(sent)
			mu.Unlock()
			seen = max(seen, cur)
			select {
			case <-stop:
				if pending == 0 {
					return
				}
			default:
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	count := 0
	var errs []string
	for time.Since(start) < d {
		next := start.Add(time.Duration(count) * interval)
		if wait := time.Until(next); wait > 0 {
			time.Sleep(wait)
		}
		typ := typeName(count % types)
		at := time.Now()
		ack, err := js.PublishAsync(prefix+"."+typ, body(rng, typ, at))
		if err != nil {
			return nil, 0, err
		}
		count++
		go func() {
			select {
			case a := <-ack.Ok():
				mu.Lock()
				if a.Sequence > done() {
					sent[a.Sequence] = at
				} else {
					lat = append(lat, time.Since(at)) // applied before the ack came back
				}
				mu.Unlock()
			case err := <-ack.Err():
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
			}
		}()
	}
	<-js.PublishAsyncComplete()
	time.Sleep(50 * time.Millisecond) // let the ack goroutines record
	close(stop)
	wg.Wait()
	if len(errs) > 0 {
		return nil, 0, fmt.Errorf("%d publishes failed: %s", len(errs), strings.Join(errs[:min(3, len(errs))], "; "))
	}
	return lat, count, nil
}

// printHistograms prints the count and mean of the writer's histograms:
// batch sizes and apply latency say where the time of a batch goes.
// histTotals are the sample count and sum of each histogram.
type histTotals map[string][2]float64

func gatherHistograms(reg *prometheus.Registry) histTotals {
	out := histTotals{}
	families, err := reg.Gather()
	if err != nil {
		return out
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				out[f.GetName()] = [2]float64{float64(h.GetSampleCount()), h.GetSampleSum()}
			}
		}
	}
	return out
}

// printHistograms prints the count and mean of what each histogram
// recorded since before.
func printHistograms(reg *prometheus.Registry, before histTotals) {
	now := gatherHistograms(reg)
	for _, name := range slices.Sorted(maps.Keys(now)) {
		count, sum := now[name][0]-before[name][0], now[name][1]-before[name][1]
		if count > 0 {
			fmt.Printf("  %s: %.0f samples, mean %.4g\n", name, count, sum/count)
		}
	}
}

// writeAllocProfile writes the allocations sampled so far.
func writeAllocProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// waitStorageIdle waits until no memtable waits for a flush and no
// compaction runs, twice in a row 100 ms apart (a flush can start a
// compaction).
func waitStorageIdle(db *storage.DB) {
	idle := func() bool {
		m := db.Metrics()
		if m.FrozenMemtables > 0 {
			return false
		}
		for _, t := range m.Tables {
			if t.Compacting > 0 {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); {
		if idle() {
			time.Sleep(100 * time.Millisecond)
			if idle() {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// quantiles formats the count, p50, p90, p99 and max of lat (sorted in place).
func quantiles(lat []time.Duration) string {
	if len(lat) == 0 {
		return "no samples"
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration {
		return lat[min(len(lat)-1, int(p*float64(len(lat))))].Round(10 * time.Microsecond)
	}
	return fmt.Sprintf("%d events, p50 %s p90 %s p99 %s max %s", len(lat), q(0.50), q(0.90), q(0.99), lat[len(lat)-1].Round(10*time.Microsecond))
}
