// Command syncbench measures what JetStream's sync_interval costs on a
// 3-node cluster with an R3 stream, for each setting in one run: the
// server default (fsync every 2 minutes), "always" (fsync every write),
// and short intervals (100ms, 1s by default). The numbers choose the
// default of deploy/nats (deploy/README.md says what each setting
// guarantees).
//
// For each round (default 2) and each setting, in that order, it starts a
// fresh cluster of three nats-servers in this process on loopback (the
// config of each is text parsed by nats-server's own ProcessConfigFile,
// the same syntax as deploy/nats/*.conf: server_name, cluster routes,
// jetstream { store_dir, sync_interval }), creates an R3 file stream and
// measures, from one client connected to all three servers:
//
//  1. throughput: async publishes of ~200-byte messages with at most
//     -window unacknowledged, for -duration (or -max messages): acked
//     messages per second, and the publish-to-ack latency under that load
//     (p50, p99), which includes the queueing the window allows;
//  2. unloaded latency: one publish at a time, waiting for each ack, for
//     -latency-duration: p50 and p99 of a single publish's round trip, the
//     price of one acknowledged write with nothing queued.
//
// Three servers in one process share one Go runtime and the machine's
// cores; the disk is whatever -dir is on (fsync reaches it). The figures
// printed per round and the median over rounds go into BENCHMARKS.md.
//
// Usage:
//
//	go run ./loadtest/syncbench -rounds 2 -duration 10s
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	settings := flag.String("settings", "default,always,100ms,1s", "comma-separated sync_interval settings: default (unset: the server's 2m), always, or a duration")
	rounds := flag.Int("rounds", 2, "rounds over all settings; each figure reported is the median over rounds")
	duration := flag.Duration("duration", 10*time.Second, "length of each throughput phase")
	maxMsgs := flag.Int("max", 2_000_000, "most messages per throughput phase")
	window := flag.Int("window", 4096, "most unacknowledged async publishes")
	latencyFor := flag.Duration("latency-duration", 5*time.Second, "length of each unloaded-latency phase")
	size := flag.Int("size", 200, "message body in bytes")
	dir := flag.String("dir", "", "directory for the stores (default: a temporary directory, removed at the end)")
	flag.Parse()

	base := *dir
	if base == "" {
		d, err := os.MkdirTemp("", "syncbench")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		base = d
	}
	names := strings.Split(*settings, ",")
	fmt.Printf("syncbench: %s, %d CPUs, Go %s, stores under %s; %d rounds of %s each; window %d, %d-byte messages\n",
		time.Now().UTC().Format(time.RFC3339), runtime.NumCPU(), runtime.Version(), base, *rounds, strings.Join(names, ", "), *window, *size)
	results := map[string][]result{}
	for r := 1; r <= *rounds; r++ {
		for _, s := range names {
			res, err := measure(filepath.Join(base, fmt.Sprintf("r%d-%s", r, s)), s, *duration, *maxMsgs, *window, *latencyFor, *size)
			if err != nil {
				if *dir == "" {
					os.RemoveAll(base) // log.Fatal skips the deferred removal
				}
				log.Fatalf("round %d, sync_interval %s: %v", r, s, err)
			}
			fmt.Printf("round %d  %-8s %s  load %s\n", r, s, res, loadAverage())
			results[s] = append(results[s], res)
		}
	}
	fmt.Printf("\nmedian over %d rounds (R3, 3 nodes, loopback):\n", *rounds)
	var ratios []string
	for _, s := range names[1:] {
		// Phases of one round ran back to back: their ratio suffers less
		// from load that changes between rounds than the medians do.
		var rs []result
		for i, r := range results[s] {
			rs = append(rs, result{rate: r.rate / results[names[0]][i].rate})
		}
		ratios = append(ratios, fmt.Sprintf("%s %.2fx", s, median(rs, func(r result) float64 { return r.rate })))
	}
	fmt.Printf("median of per-round throughput ratios to %s: %s\n", names[0], strings.Join(ratios, ", "))
	fmt.Printf("| sync_interval | publish msg/s (async, window %d) | ack p50 / p99 under load | one publish at a time: p50 / p99 | vs default |\n|---|---|---|---|---|\n", *window)
	def := median(results[names[0]], func(r result) float64 { return r.rate })
	for _, s := range names {
		rs := results[s]
		rate := median(rs, func(r result) float64 { return r.rate })
		fmt.Printf("| %s | %.0f | %s / %s | %s / %s | %.2fx |\n", s, rate,
			ms(median(rs, func(r result) float64 { return r.loadP50 })), ms(median(rs, func(r result) float64 { return r.loadP99 })),
			ms(median(rs, func(r result) float64 { return r.oneP50 })), ms(median(rs, func(r result) float64 { return r.oneP99 })),
			rate/def)
	}
}

type result struct {
	rate             float64 // acked msg/s
	acked            int
	loadP50, loadP99 float64 // seconds
	oneP50, oneP99   float64
	oneCount         int
}

func (r result) String() string {
	return fmt.Sprintf("%9.0f msg/s (%d acked)  ack p50 %s p99 %s  |  one at a time: p50 %s p99 %s (%d)",
		r.rate, r.acked, ms(r.loadP50), ms(r.loadP99), ms(r.oneP50), ms(r.oneP99), r.oneCount)
}

func ms(sec float64) string { return fmt.Sprintf("%.2fms", sec*1000) }

func median(rs []result, f func(result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// nodeConfig is one server's configuration, in nats-server's config
// syntax.
func nodeConfig(name string, clientPort, clusterPort int, routes []string, storeDir, syncInterval string) string {
	sync := ""
	if syncInterval != "default" {
		sync = "  sync_interval: " + syncInterval + "\n"
	}
	return fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
jetstream {
  store_dir: %q
%s}
cluster {
  name: syncbench
  listen: 127.0.0.1:%d
  routes: [%s]
}
`, name, clientPort, storeDir, sync, clusterPort, strings.Join(routes, ", "))
}

func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// startCluster starts three clustered servers with the sync setting.
func startCluster(dir, setting string) ([]*natsserver.Server, error) {
	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	var routes []string
	for i := range 3 {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[3+i]))
	}
	var servers []*natsserver.Server
	stop := func() {
		for _, s := range servers {
			s.Shutdown()
			s.WaitForShutdown()
		}
	}
	for i := range 3 {
		name := fmt.Sprintf("n%d", i+1)
		conf := filepath.Join(dir, name+".conf")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(conf, []byte(nodeConfig(name, ports[i], ports[3+i], routes, filepath.Join(dir, name), setting)), 0o644); err != nil {
			return nil, err
		}
		opts, err := natsserver.ProcessConfigFile(conf)
		if err != nil {
			stop()
			return nil, fmt.Errorf("cannot parse %s: %w", conf, err)
		}
		opts.NoSigs = true
		opts.NoLog = os.Getenv("SYNCBENCH_LOG") == ""
		s, err := natsserver.NewServer(opts)
		if err != nil {
			stop()
			return nil, fmt.Errorf("cannot create %s: %w", name, err)
		}
		s.Start()
		servers = append(servers, s)
	}
	for _, s := range servers {
		if !s.ReadyForConnections(20 * time.Second) {
			stop()
			return nil, fmt.Errorf("%s did not take connections", s.Name())
		}
	}
	return servers, nil
}

func measure(dir, setting string, duration time.Duration, maxMsgs, window int, latencyFor time.Duration, size int) (result, error) {
	servers, err := startCluster(dir, setting)
	if err != nil {
		return result{}, err
	}
	defer func() {
		for _, s := range servers {
			s.Shutdown()
			s.WaitForShutdown()
		}
	}()
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.ClientURL())
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.Name("syncbench"))
	if err != nil {
		return result{}, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(2*window)) // the window is bounded by q below
	if err != nil {
		return result{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The meta leader is elected after the routes connect: retry.
	deadline := time.Now().Add(60 * time.Second)
	for {
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = js.CreateStream(actx, jetstream.StreamConfig{Name: "BENCH", Subjects: []string{"bench.>"}, Replicas: 3, Storage: jetstream.FileStorage})
		acancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return result{}, fmt.Errorf("cannot create the R3 stream: %w", err)
		}
		time.Sleep(200 * time.Millisecond) // polling an election, not waiting for work
	}
	body := make([]byte, size)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}

	var res result
	// 1. Throughput with a window of async publishes.
	type inflight struct {
		f  jetstream.PubAckFuture
		t0 time.Time
	}
	q := make(chan inflight, window)
	lat := make([]float64, 0, 1<<20)
	collected := make(chan error, 1)
	go func() {
		var firstErr error
		for in := range q {
			select {
			case <-in.f.Ok():
				lat = append(lat, time.Since(in.t0).Seconds())
			case err := <-in.f.Err():
				if firstErr == nil {
					firstErr = err
				}
			}
		}
		collected <- firstErr
	}()
	start := time.Now()
	sent := 0
	for ; sent < maxMsgs && time.Since(start) < duration; sent++ {
		t0 := time.Now()
		f, err := js.PublishAsync(fmt.Sprintf("bench.%d", sent%16), body)
		if err != nil {
			close(q)
			<-collected
			return result{}, fmt.Errorf("publish %d: %w", sent, err)
		}
		q <- inflight{f, t0}
	}
	close(q)
	if err := <-collected; err != nil {
		return result{}, fmt.Errorf("a publish was not acknowledged: %w", err)
	}
	elapsed := time.Since(start)
	res.acked = len(lat)
	res.rate = float64(len(lat)) / elapsed.Seconds()
	res.loadP50, res.loadP99 = percentile(lat, 0.50), percentile(lat, 0.99)

	// 2. One publish at a time.
	one := make([]float64, 0, 1<<16)
	for start := time.Now(); time.Since(start) < latencyFor; {
		t0 := time.Now()
		if _, err := js.Publish(ctx, "bench.one", body); err != nil {
			return result{}, fmt.Errorf("synchronous publish: %w", err)
		}
		one = append(one, time.Since(t0).Seconds())
	}
	res.oneCount = len(one)
	res.oneP50, res.oneP99 = percentile(one, 0.50), percentile(one, 0.99)

	info, err := js.Stream(ctx, "BENCH")
	if err != nil {
		return result{}, err
	}
	if got := info.CachedInfo().State.Msgs; got != uint64(res.acked+res.oneCount) {
		return result{}, fmt.Errorf("stream holds %d messages, %d were acknowledged", got, res.acked+res.oneCount)
	}
	return res, nil
}

// loadAverage is the 1-minute load average, to judge how much else ran.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}
