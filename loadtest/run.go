package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eventide/eventide/internal/natsconn"
	"github.com/eventide/eventide/loadtest/internal/arrival"
	"github.com/eventide/eventide/loadtest/internal/hist"
	"github.com/eventide/eventide/loadtest/internal/report"
	"github.com/eventide/eventide/loadtest/internal/target"
	"github.com/eventide/eventide/loadtest/internal/workload"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// run performs one load test (or, with --find-max, a ramp of them) and
// writes its reports; it returns whether every objective and the
// correctness check passed. An error means the run could not be done
// (configError: because of its configuration).
func run(ctx context.Context, cfg *config, stdout, stderr io.Writer) (bool, error) {
	rep := &report.Report{
		FormatVersion: report.FormatVersion, Tool: "eventide-loadtest", Run: cfg.Run, Seed: cfg.Seed,
		Parameters: cfg.Flags, Machine: machineInfo(), Started: time.Now().UTC(),
		Latency: map[string]hist.Summary{}, Series: map[string]hist.Series{}, Errors: map[string]int64{},
	}
	if dir, err := target.ModuleRoot(ctx); err == nil {
		rep.Git = gitInfo(ctx, dir)
	}
	if cfg.CPUProfile != "" {
		stop, err := startCPUProfile(cfg.CPUProfile)
		if err != nil {
			return false, configError{err}
		}
		defer func() {
			if err := stop(); err != nil {
				fmt.Fprintf(stderr, "loadtest: %v\n", err)
			}
		}()
	}
	e := &env{cfg: cfg, progress: newProgress(cfg.Progress, stderr), start: time.Now()}
	fmt.Fprintf(stderr, "loadtest: run %s, seed %d\n", cfg.Run, cfg.Seed)

	if cfg.Spawn {
		srv, cleanup, err := spawn(ctx, cfg, stderr)
		if err != nil {
			return false, err
		}
		defer cleanup()
		cfg.NATSURL, cfg.HTTPURL = srv.NATSURL, srv.HTTPURL
		e.server = &serverSampler{pid: srv.PID(), start: e.start}
	}
	rep.Target = report.Target{Spawned: cfg.Spawn, NATSURL: cfg.NATSURL, HTTPURL: cfg.HTTPURL}

	var err error
	e.nc, e.js, e.api, err = connect(ctx, cfg)
	if err != nil {
		return false, err
	}
	defer e.nc.Close()
	defer e.api.client.CloseIdleConnections()
	if e.server != nil {
		e.server.counters = e.api.serverCounters
	}

	// The server's RSS and CPU are sampled over the whole run.
	sampleCtx, stopSampling := context.WithCancel(ctx)
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		if e.server == nil {
			return
		}
		e.server.sample()
		t := time.NewTicker(cfg.Tick)
		defer t.Stop()
		for {
			select {
			case <-sampleCtx.Done():
				return
			case <-t.C:
				e.server.sample()
			}
		}
	}()
	stop := func() {
		stopSampling()
		<-samplerDone
	}
	defer stop()

	var rawLat *hist.Set
	if cfg.Workloads["events"] && cfg.RawDuration > 0 {
		e.progress.note("raw JetStream phase (%s)", cfg.RawDuration)
		raw, lat, err := rawCeiling(ctx, e.nc, cfg.Run, cfg.RawDuration, cfg.Events.PayloadMedian)
		if err != nil {
			return false, fmt.Errorf("raw JetStream phase: %w", err)
		}
		rep.Raw, rawLat = raw, lat
	}

	if cfg.Workloads["social"] {
		if e.social, err = newSocialLoad(cfg, e.js, e.nc, e.api); err != nil {
			return false, configError{err}
		}
		if err := e.social.runSetup(ctx, e.progress); err != nil {
			return false, err
		}
	}

	var res *stepResult
	if cfg.FindMax {
		var fm *report.FindMax
		fm, res, err = e.findMax(ctx, rep)
		rep.FindMax = fm
	} else {
		res, err = e.step(ctx, cfg.EventRate, cfg.Run)
	}
	if err != nil {
		return false, err
	}
	res.rawLat = rawLat
	res.fill(rep, cfg)
	stop()
	if e.server != nil {
		e.server.sample()
		rep.Server = e.server.stats(res.loadEnd)
	}
	rep.Passed = rep.Correctness.Passed && len(report.Failed(rep.Objectives)) == 0
	if rep.FindMax != nil {
		// A ramp passes when some rate held and nothing was incorrect.
		rep.Passed = rep.FindMax.MaxRate > 0 && rep.FindMax.AllCorrect
	}
	rep.Finished = time.Now().UTC()

	rep.WriteSummary(stdout)
	var werr error
	if cfg.JSONPath != "" {
		werr = errors.Join(werr, rep.WriteJSON(cfg.JSONPath))
	}
	if cfg.HTMLPath != "" {
		werr = errors.Join(werr, rep.WriteHTML(cfg.HTMLPath))
	}
	if rep.FindMax == nil {
		for _, f := range report.Failed(rep.Objectives) {
			fmt.Fprintf(stderr, "loadtest: objective failed: %s (%s)\n", f.Text, f.Describe())
		}
	} else if rep.FindMax.MaxRate == 0 {
		fmt.Fprintf(stderr, "loadtest: --find-max: no rate held the objectives, down to %.0f/s\n", rep.FindMax.Steps[len(rep.FindMax.Steps)-1].TargetRate)
	}
	if !rep.Correctness.Passed || (rep.FindMax != nil && !rep.FindMax.AllCorrect) {
		fmt.Fprintln(stderr, "loadtest: correctness check failed:")
		for _, c := range rep.Correctness.Checks {
			if !c.Passed {
				fmt.Fprintf(stderr, "  %s: %s\n", c.Name, c.Detail)
			}
		}
	}
	if werr != nil {
		return false, werr
	}
	return rep.Passed, nil
}

// env is what the steps of a run share.
type env struct {
	cfg      *config
	progress *progress
	start    time.Time
	server   *serverSampler // nil unless spawned
	nc       *nats.Conn
	js       jetstream.JetStream
	api      *apiClient
	social   *socialLoad // set up before the first step; nil without the social workload
}

// stepResult is one load phase at one event rate, drained and checked.
type stepResult struct {
	cfg                *config // the step's: its rate, run id and probe spacing
	loadStart, loadEnd time.Time
	sets               []*hist.Set
	// rawLat is the raw JetStream phase's "raw.publish" latencies, nil
	// without that phase. It ran before the load, so the report has its
	// summary but no series.
	rawLat      *hist.Set
	events      *report.EventsResult
	queries     *report.QueriesResult
	social      *report.SocialResult
	tail        *report.TailResult
	dlq         *report.DLQResult
	errors      map[string]int64
	checks      []report.Check
	harness     *report.HarnessStats
	counters    map[string]float64 // the server's /metrics counters' deltas over the load
	serverCores float64            // the spawned server's CPU over the load; 0 if not spawned
}

// step runs the workloads at the given event rate for --duration with
// the types of run id, waits for the drain, and checks correctness.
func (e *env) step(ctx context.Context, rate float64, run string) (*stepResult, error) {
	c := *e.cfg
	c.EventRate, c.Run = rate, run
	c.Events.Run = run
	if c.ProbeRate > 0 {
		c.Events.ProbeEvery = max(1, int64(rate/c.ProbeRate))
	}
	cfg := &c
	res := &stepResult{cfg: cfg, errors: map[string]int64{}}
	countersBefore, countersErr := e.api.serverCounters(ctx)
	serverCoresSince := e.serverCoresSince()
	selfStart, selfErr := target.ReadProc(os.Getpid())
	start := time.Now()
	res.loadStart = start
	eventLat := hist.NewSet(eventLatSlots, start)
	queryLat := hist.NewSet(cfg.QueryWorkers, start)
	probeLat := hist.NewSet(1, start)
	res.sets = []*hist.Set{eventLat, queryLat, probeLat}
	var pollErrs errorCounts

	probeType := workload.ProbeType(cfg.Run)
	probes := newProbeTracker(e.api, probeType, probeLat)
	var events *eventLoad
	var queries *queryLoad
	var err error
	if cfg.Workloads["events"] {
		if events, err = newEventLoad(cfg, e.nc, eventLat, probes); err != nil {
			return nil, configError{err}
		}
	}
	if cfg.Workloads["queries"] {
		gen, err := workload.NewEventGen(cfg.Events)
		if err != nil {
			return nil, configError{err}
		}
		types, weights := gen.Types(), workload.ZipfWeights(len(gen.Types()), cfg.Events.ZipfS)
		if len(cfg.Events.Mix) > 0 {
			weights = weights[:0]
			for _, m := range cfg.Events.Mix {
				weights = append(weights, m.Weight)
			}
		}
		if len(cfg.QueryTypes) > 0 {
			types, weights = nil, nil
			for _, m := range cfg.QueryTypes {
				types = append(types, m.Name)
				weights = append(weights, m.Weight)
			}
		}
		if queries, err = newQueryLoad(cfg, e.api, types, weights, queryLat); err != nil {
			return nil, configError{err}
		}
	}

	var social *socialLoad
	var fan *fanoutTracker
	if cfg.Workloads["social"] && e.social != nil {
		socialLat := hist.NewSet(socialLatSlots, start)
		fanLat := hist.NewSet(1, start)
		res.sets = append(res.sets, socialLat, fanLat)
		social = e.social
		fan = newFanoutTracker(e.api, social.run, social.gen, fanLat)
		social.start(socialLat, fan)
	}

	// The ticker merges the histograms and draws the progress line until
	// the end of the step, drain included.
	stopTicking := every(ctx, cfg.Tick, func(now time.Time) {
		for _, s := range res.sets {
			s.Tick(now)
		}
		e.progress.line(now.Sub(start), rate, events, queries, probes, eventLat, social, fan)
	})
	defer stopTicking()

	pollCtx, stopPolling := context.WithCancel(ctx)
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		probes.poll(pollCtx, cfg.ProbeInterval, &pollErrs)
	}()
	defer func() {
		stopPolling()
		<-pollDone
	}()

	// Tail subscribers are connected before the load, so none misses the
	// first probes.
	var tail *tailLoad
	tailCtx, stopTail := context.WithCancel(ctx)
	var tailWG sync.WaitGroup
	defer func() {
		stopTail()
		tailWG.Wait()
	}()
	if cfg.Workloads["tail"] && events != nil {
		tailLat := hist.NewSet(cfg.TailSubscribers, start)
		res.sets = append(res.sets, tailLat)
		tail = newTailLoad(e.api, probeType, cfg.TailSubscribers, tailLat)
		if err := tail.start(tailCtx, &tailWG, 10*time.Second); err != nil {
			return nil, configError{err}
		}
	}

	var fanErrs errorCounts
	fanCtx, stopFanPolling := context.WithCancel(ctx)
	fanDone := make(chan struct{})
	go func() {
		defer close(fanDone)
		if fan != nil {
			fan.poll(fanCtx, cfg.FanoutInterval, &fanErrs)
		}
	}()
	defer func() {
		stopFanPolling()
		<-fanDone
	}()

	var wg sync.WaitGroup
	var eventStats, queryStats, socialStats arrival.Stats
	var eventErr, queryErr, socialErr error
	if events != nil {
		wg.Go(func() { eventStats, eventErr = events.run(ctx) })
	}
	if queries != nil {
		wg.Go(func() { queryStats, queryErr = queries.run(ctx) })
	}
	if social != nil {
		wg.Go(func() { socialStats, socialErr = social.runOps(ctx) })
	}
	wg.Wait()
	loadEnd := time.Now()
	res.loadEnd = loadEnd
	res.serverCores = serverCoresSince()
	if selfEnd, err := target.ReadProc(os.Getpid()); err == nil && selfErr == nil {
		cpu := selfEnd.CPUSeconds - selfStart.CPUSeconds
		res.harness = &report.HarnessStats{CPUSeconds: cpu, AvgCores: cpu / loadEnd.Sub(start).Seconds()}
	}
	if countersErr == nil {
		if after, err := e.api.serverCounters(ctx); err == nil {
			res.counters = counterDeltas(countersBefore, after)
		}
	}
	if err := errors.Join(eventErr, queryErr, socialErr); err != nil {
		return nil, configError{err}
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	e.progress.note("load at %.0f/s done; waiting for every event to be readable (at most %s)", rate, cfg.DrainTimeout)

	if events != nil {
		tot := events.totals()
		types := sortedTypes(events.gen)
		// Late events reach back LateMax from their intended start.
		from := start.Add(-cfg.Events.LateMax - time.Hour).Truncate(time.Hour)
		to := loadEnd.Add(time.Hour).Truncate(time.Hour).Add(time.Hour)
		drainSeconds := -1.0
		var counts map[string]int64
		deadline := loadEnd.Add(cfg.DrainTimeout)
		for {
			ready, got, err := countsReady(ctx, e.api, types, tot.ackedValid, from, to)
			if err != nil {
				res.errors["drain."+apiErrorCause(err)]++
			} else {
				counts = got
			}
			pending, inFlight := probes.outstanding()
			if err == nil && ready && pending == 0 && inFlight == 0 {
				drainSeconds = time.Since(loadEnd).Seconds()
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				break
			}
			time.Sleep(50 * time.Millisecond) // polling the server's state, with a deadline
		}
		stopPolling()
		<-pollDone

		var probesTotal int64
		if cfg.Events.ProbeEvery > 0 {
			probesTotal = (eventStats.Scheduled + cfg.Events.ProbeEvery - 1) / cfg.Events.ProbeEvery
		}
		pending, _ := probes.outstanding()
		res.events = &report.EventsResult{
			Schedule:        schedule(rate, eventStats, events.failed.Load(), loadEnd.Sub(start), events.dropped),
			Types:           types,
			AckedValid:      sum(tot.ackedValid),
			AckedInvalid:    sum(tot.ackedInvalid),
			AckedProbes:     tot.ackedProbes,
			Late:            tot.late,
			OutOfOrder:      tot.outOfOrder,
			InvalidByReason: tot.ackedInvalid,
			ProbesQueryable: probes.seenCount(),
			ProbesMissing:   int64(pending),
			DrainSeconds:    drainSeconds,
		}
		maps.Copy(res.errors, tot.errors)
		maps.Copy(res.errors, pollErrs.snapshot())

		if counts != nil {
			res.checks = append(res.checks, checkCounts(types, counts, tot.ackedValid, tot.failedValid))
		} else {
			res.checks = append(res.checks, report.Check{Name: "counts match accepted", Detail: "counts could not be read"})
		}
		if probesTotal > 0 {
			res.checks = append(res.checks, checkProbes(ctx, e.api, probeType, probes, probesTotal, start.Add(-time.Minute), loadEnd.Add(time.Minute)))
		}
		if tail != nil {
			for !tail.complete(probes, probesTotal) && time.Now().Before(deadline) && ctx.Err() == nil {
				time.Sleep(50 * time.Millisecond) // polling the subscribers, with a deadline
			}
			stopTail()
			tailWG.Wait()
			c, tr := tail.check(probes, probesTotal)
			res.checks = append(res.checks, c)
			res.tail = tr
			maps.Copy(res.errors, tail.errs.snapshot())
		}
		d := &report.DLQResult{InvalidAcked: res.events.AckedInvalid}
		var dlqErr error
		d.InDLQ, d.ReasonMismatches, dlqErr = dlqLetters(ctx, e.js, cfg.DLQ, types, d.InvalidAcked, max(cfg.DrainTimeout-time.Since(loadEnd), 2*time.Second))
		res.dlq = d
		res.checks = append(res.checks, checkDLQ(d, tot.failedInvalid, dlqErr))
	}
	if social != nil {
		// Drained when every probe post is timed and the fan-out worker
		// has applied every acknowledged operation.
		deadline := loadEnd.Add(cfg.DrainTimeout)
		drainSeconds := -1.0
		for {
			pending, inFlight := fan.outstanding()
			if pending == 0 && inFlight == 0 {
				social.mu.Lock()
				seq := social.maxSeq
				social.mu.Unlock()
				if err := social.waitApplied(ctx, seq, deadline); err == nil {
					drainSeconds = time.Since(loadEnd).Seconds()
				} else {
					res.errors["drain.social_not_applied"]++
				}
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				break
			}
			time.Sleep(50 * time.Millisecond) // polling the server's state, with a deadline
		}
		stopFanPolling()
		<-fanDone
		reached, gone, deletes := social.checkFanout(ctx, later(deadline, time.Now().Add(2*time.Second)))
		acked, timed := fan.counts()
		sc := social.gen.Config()
		so := &report.SocialResult{
			Schedule: schedule(sc.Rate(), socialStats, social.failed.Load(), loadEnd.Sub(start), social.dropped),
			Users:    sc.Users, Edges: social.gen.Edges(), FanoutThreshold: sc.Threshold, BigAuthors: sc.BigAuthors,
			Setup: social.setup, Acked: map[string]int64{}, ProbePostsAcked: acked, ProbePostsTimed: timed,
			DeletesChecked: deletes, DrainSeconds: drainSeconds,
		}
		for _, pa := range social.gen.ProbeAuthors() {
			spa := report.SocialProbeAuthor{User: social.user(pa.Author), Followers: pa.Followers, Pull: pa.Pull, Sample: len(pa.Sample)}
			if lag, ok := fan.authorLag(pa.Author); ok {
				spa.Lag = &lag
			}
			so.ProbeAuthors = append(so.ProbeAuthors, spa)
		}
		social.mu.Lock()
		maps.Copy(so.Acked, social.ackedByKind)
		social.mu.Unlock()
		res.social = so
		maps.Copy(res.errors, social.errorTotals())
		maps.Copy(res.errors, fanErrs.snapshot())
		res.checks = append(res.checks, social.graphCheck, reached, gone)
	}
	if queries != nil {
		ok, errs := queries.totals()
		res.queries = &report.QueriesResult{
			Schedule: schedule(cfg.QueryRate, queryStats, queries.failed.Load(), loadEnd.Sub(start), queries.dropped),
			ByKind:   ok,
		}
		maps.Copy(res.errors, errs)
	}
	stopTicking()
	now := time.Now()
	for _, s := range res.sets {
		s.Tick(now)
	}
	e.progress.clear()
	return res, nil
}

// fill puts the step's results into rep and checks the objectives on it.
func (res *stepResult) fill(rep *report.Report, cfg *config) {
	rep.DurationSeconds = res.loadEnd.Sub(res.loadStart).Seconds()
	rep.Events, rep.Queries, rep.DLQ, rep.Harness = res.events, res.queries, res.dlq, res.harness
	rep.Social, rep.Tail = res.social, res.tail
	rep.ServerCounters = res.counters
	rep.Errors = maps.Clone(res.errors)
	rep.Correctness = &report.Correctness{Passed: true, Checks: res.checks}
	for _, c := range res.checks {
		rep.Correctness.Passed = rep.Correctness.Passed && c.Passed
	}
	if rep.Raw != nil && rep.Raw.RatePerSecond > 0 && res.events != nil {
		rep.Raw.EventsRatio = res.events.AchievedRate / rep.Raw.RatePerSecond
	}
	rep.Latency, rep.Series = map[string]hist.Summary{}, map[string]hist.Series{}
	sets := res.sets
	if res.rawLat != nil {
		sets = append(slices.Clip(sets), res.rawLat)
	}
	for _, s := range sets {
		for _, kind := range s.Kinds() {
			sum := s.Summary(kind)
			for _, o := range cfg.Objectives {
				if p, ok := o.Percentile(); ok && o.Arg == kind {
					sum.Percentiles[o.Func], _ = s.Quantile(kind, p)
				}
			}
			rep.Latency[kind] = sum
			if s != res.rawLat {
				rep.Series[kind] = s.Series(kind)
			}
		}
	}
	rep.Objectives = report.CheckObjectives(cfg.Objectives, rep)
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// schedule summarizes an arrival run. The achieved rate divides the
// successes by the longer of the elapsed time and the scheduled window
// (the last operation starts just before the window's end).
func schedule(rate float64, s arrival.Stats, failed int64, elapsed time.Duration, droppedByKind map[string]int64) report.Schedule {
	out := report.Schedule{TargetRate: rate, Scheduled: s.Scheduled, Started: s.Started, Dropped: s.Dropped, Failed: failed}
	if len(droppedByKind) > 0 {
		out.DroppedByKind = maps.Clone(droppedByKind)
	}
	if s.Scheduled > 0 {
		out.DroppedRatio = float64(s.Dropped) / float64(s.Scheduled)
	}
	if window := time.Duration(float64(s.Scheduled) / rate * float64(time.Second)); window > elapsed {
		elapsed = window
	}
	if elapsed > 0 {
		out.AchievedRate = float64(s.Started-failed) / elapsed.Seconds()
	}
	return out
}

// startCPUProfile starts profiling the harness's CPU into path; stop ends
// the profile and closes the file.
func startCPUProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile %s: %w", path, err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("--cpuprofile %s: %w", path, err)
		}
		return nil
	}, nil
}

// spawn starts an all-in-one Eventide (cfg.SpawnBin, or cmd/ingest built
// from this checkout) with its data in a temporary directory; cleanup
// stops it and removes the directory.
func spawn(ctx context.Context, cfg *config, stderr io.Writer) (*target.Server, func(), error) {
	root := ""
	if cfg.SpawnBin == "" {
		var err error
		if root, err = target.ModuleRoot(ctx); err != nil {
			return nil, nil, configError{fmt.Errorf("--spawn: %w (or give a built cmd/ingest with --spawn-bin)", err)}
		}
	}
	dir, err := os.MkdirTemp("", "eventide-loadtest-")
	if err != nil {
		return nil, nil, fmt.Errorf("--spawn: cannot make a temporary directory: %w", err)
	}
	bin := cfg.SpawnBin
	if bin == "" {
		fmt.Fprintf(stderr, "loadtest: building cmd/ingest into %s\n", dir)
		if bin, err = target.BuildIngest(ctx, root, dir); err != nil {
			os.RemoveAll(dir)
			return nil, nil, err
		}
	}
	var extra []string
	if cfg.SpawnArgs != "" {
		extra = strings.Fields(cfg.SpawnArgs)
	}
	// The spawned server's fan-out threshold is the one the social graph
	// was made for, unless --spawn-args sets it.
	if cfg.Workloads["social"] && !strings.Contains(cfg.SpawnArgs, "fanout-threshold") {
		extra = append(extra, "--fanout-threshold", strconv.Itoa(cfg.Social.Threshold))
	}
	srv, err := target.Spawn(ctx, bin, filepath.Join(dir, "data"), filepath.Join(dir, "server.log"), extra, cfg.SpawnEnv, 60*time.Second)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	fmt.Fprintf(stderr, "loadtest: spawned Eventide (pid %d): NATS %s, HTTP %s\n", srv.PID(), srv.NATSURL, srv.HTTPURL)
	return srv, func() {
		if err := srv.Stop(30 * time.Second); err != nil {
			fmt.Fprintf(stderr, "loadtest: stopping the spawned server: %v\n", err)
		}
		os.RemoveAll(dir)
	}, nil
}

// connect reaches the server's NATS and HTTP API and checks that the
// event stream exists and the API is ready: an unreachable or wrong
// server is a configuration error, found before any load.
func connect(ctx context.Context, cfg *config) (*nats.Conn, jetstream.JetStream, *apiClient, error) {
	nopts := cfg.NATS
	nopts.URL = cfg.NATSURL
	nc, err := natsconn.Connect(ctx, nopts, nats.Name("eventide-loadtest "+cfg.Run), nats.Timeout(5*time.Second), nats.MaxReconnects(-1))
	if err != nil {
		return nil, nil, nil, configError{fmt.Errorf("%w (--nats-url)", err)}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, nil, fmt.Errorf("cannot open JetStream: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := js.Stream(sctx, cfg.Stream); err != nil {
		nc.Close()
		return nil, nil, nil, configError{fmt.Errorf("event stream %s not found on %s (is Eventide running there? --stream): %w", cfg.Stream, cfg.NATSURL, err)}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Queries, live tail streams, and the probe, fan-out and check
	// readers each keep a connection.
	tr.MaxIdleConnsPerHost = cfg.QueryWorkers + cfg.TailSubscribers + 16
	api := &apiClient{base: strings.TrimRight(cfg.HTTPURL, "/"), client: &http.Client{Transport: tr}, token: cfg.HTTPToken}
	if err := api.get(sctx, "/readyz", nil); err != nil {
		nc.Close()
		return nil, nil, nil, configError{fmt.Errorf("Eventide's HTTP API at %s is not ready (--http-url): %w", cfg.HTTPURL, err)}
	}
	// /readyz is open to everyone; /metrics needs the token, if the API
	// wants one.
	if _, err := api.serverCounters(sctx); err != nil {
		var st *httpStatusError
		if errors.As(err, &st) && st.Status == http.StatusUnauthorized {
			nc.Close()
			return nil, nil, nil, configError{fmt.Errorf("Eventide's HTTP API at %s refuses the harness (401): give its bearer token with --http-token-file or --http-token", cfg.HTTPURL)}
		}
	}
	return nc, js, api, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
