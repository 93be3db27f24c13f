// Command ingestbench measures Eventide's ingest pipeline against raw
// JetStream in the same run, on the same embedded NATS server:
//
//  1. raw: a pull consumer that fetches batches and acks them without
//     storing anything, while a publisher sends N ~200-byte events;
//  2. eventide: the writer (validate, one atomic storage batch per fetch
//     with counts and checkpoint, WAL fsync, then ack), same publisher;
//  3. latency: the publisher runs at a fraction (default 50%) of the rate
//     measured in 2 and, for every message, the time from publish to
//     "queryable" (the writer's checkpoint covers its stream sequence, so
//     its rows are in the memtable) is recorded;
//  4. check: per-minute counts read through reader.Counts add up to every
//     event published to the writer.
//
// Usage:
//
//	go run ./loadtest/ingestbench -events 300000
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
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

	"github.com/eventide/eventide/reader"
	"github.com/eventide/eventide/storage"
	"github.com/eventide/eventide/writer"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

func main() {
	events := flag.Int("events", 300000, "events published in each throughput phase")
	types := flag.Int("types", 20, "event types")
	fraction := flag.Float64("latency-rate", 0.5, "latency phase rate as a fraction of the measured Eventide rate")
	latencyFor := flag.Duration("latency-duration", 20*time.Second, "length of the latency phase")
	dir := flag.String("dir", "", "working directory (default: a new temporary directory, removed at the end)")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the Eventide throughput phase to this file")
	flag.Parse()
	if err := run(*events, *types, *fraction, *latencyFor, *dir); err != nil {
		log.Fatal(err)
	}
}

var cpuProfile string

func run(n, types int, fraction float64, latencyFor time.Duration, dir string) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "ingestbench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: filepath.Join(dir, "nats"), NoLog: true, NoSigs: true})
	if err != nil {
		return fmt.Errorf("start nats: %w", err)
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		return fmt.Errorf("nats server not ready")
	}
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

	// Phase 1: raw JetStream.
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "RAW", Subjects: []string{"raw.>"}, Storage: jetstream.FileStorage}); err != nil {
		return err
	}
	rawCons, err := js.CreateOrUpdateConsumer(ctx, "RAW", jetstream.ConsumerConfig{Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 20000})
	if err != nil {
		return err
	}
	var rawAcked atomic.Int64
	rawCtx, stopRaw := context.WithCancel(ctx)
	var rawWG sync.WaitGroup
	rawWG.Add(1)
	go func() {
		defer rawWG.Done()
		for rawCtx.Err() == nil {
			batch, err := rawCons.Fetch(1000, jetstream.FetchMaxWait(100*time.Millisecond))
			if err != nil {
				continue
			}
			for m := range batch.Messages() {
				m.Ack()
				rawAcked.Add(1)
			}
		}
	}()
	rawRate, err := throughput(js, "raw", n, types, func() int64 { return rawAcked.Load() })
	stopRaw()
	rawWG.Wait()
	if err != nil {
		return err
	}
	fmt.Printf("raw JetStream (fetch 1000 + ack each): %.0f events/s\n", rawRate)

	// Phase 2: Eventide's writer into storage.
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
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	start := time.Now()
	evRate, err := throughput(js, "events", n, types, func() int64 { return int64(w.Stats().LastAppliedSeq) })
	pprof.StopCPUProfile()
	if err != nil {
		return err
	}
	fmt.Printf("eventide (validate, store with counts and checkpoint, WAL fsync, ack): %.0f events/s = %.2fx raw (target >= 0.70x)\n", evRate, evRate/rawRate)
	printHistograms(reg)

	// Phase 3: latency at a fraction of the measured rate.
	rate := evRate * fraction
	lat, published, err := latency(js, w, rate, latencyFor, types)
	if err != nil {
		return err
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	fmt.Printf("publish-to-queryable at %.0f events/s (%.0f%% of max) over %s, %d events: p50 %s p90 %s p99 %s max %s (target p99 <= 100ms)\n",
		rate, fraction*100, latencyFor, len(lat), q(0.50), q(0.90), q(0.99), lat[len(lat)-1])

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
	want := int64(n) + int64(published)
	fmt.Printf("check: counts sum to %d, published %d: %s\n", total, want, map[bool]string{true: "ok", false: "MISMATCH"}[total == want])
	fmt.Println(db.Metrics().String())
	if total != want {
		return fmt.Errorf("counts %d != published %d", total, want)
	}
	return nil
}

func typeName(i int) string { return fmt.Sprintf("type%02d", i) }

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
		if _, err := js.PublishAsync(prefix+"."+typ, body(rng, typ, time.Now())); err != nil {
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
func latency(js jetstream.JetStream, w *writer.Writer, rate float64, d time.Duration, types int) ([]time.Duration, int, error) {
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
			cur := w.Stats().LastAppliedSeq
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
		ack, err := js.PublishAsync("events."+typ, body(rng, typ, at))
		if err != nil {
			return nil, 0, err
		}
		count++
		go func() {
			select {
			case a := <-ack.Ok():
				mu.Lock()
				if a.Sequence > w.Stats().LastAppliedSeq {
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
func printHistograms(reg *prometheus.Registry) {
	families, err := reg.Gather()
	if err != nil {
		return
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if h := m.GetHistogram(); h != nil && h.GetSampleCount() > 0 {
				fmt.Printf("  %s: %d samples, mean %.4g\n", f.GetName(), h.GetSampleCount(), h.GetSampleSum()/float64(h.GetSampleCount()))
			}
		}
	}
}
