package main

import (
	"context"
	"fmt"
	"time"

	"github.com/eventide/eventide/loadtest/internal/report"
	"github.com/eventide/eventide/loadtest/internal/target"
)

// rampState is one ramp of steps at rising rates: from the first rate,
// multiplying by --ramp while every objective holds; after the first
// rate that breaks one, it halves the gap between the highest rate that
// held and the lowest that broke until the gap is under 5% or
// --max-steps rates ran. If the first rate breaks, it halves the rate
// instead. A step that breaks an objective is run again at the same rate
// up to --retry-broken times before the rate counts as broken (a retry
// that holds makes it held): on a shared machine one hiccup, a flush
// that met another process's burst, must not set the ceiling, and
// least of all at the first rate, above which a ramp never looks again.
// Retries are steps of their own in the report, not counted in
// --max-steps. A step that is not correct ends the ramp: a pipeline that
// loses events has no capacity figure.
type rampState struct {
	cfg       *config
	rate      float64
	good, bad float64 // the highest rate that held, the lowest that broke; 0 if none
	best      int     // index in steps of the step at good; -1 if none
	steps     []report.FindMaxStep
	rates     int // distinct rates run
	retries   int // retries run at the current rate
	done      bool
}

func newRamp(cfg *config, rate float64) *rampState {
	return &rampState{cfg: cfg, rate: rate, best: -1, done: cfg.MaxSteps < 1}
}

// record adds the step just run at r.rate and picks the next rate.
func (r *rampState) record(st report.FindMaxStep) {
	i := len(r.steps)
	st.Retry = r.retries > 0
	r.steps = append(r.steps, st)
	if !st.Correct {
		r.done = true
		return
	}
	if !st.Held && r.retries < r.cfg.RetryBroken {
		r.retries++
		return
	}
	r.retries = 0
	r.rates++
	if st.Held {
		r.good, r.best = r.rate, i
	} else {
		r.bad = r.rate
	}
	switch {
	case r.bad == 0:
		r.rate *= r.cfg.Ramp
	case r.good == 0:
		r.rate /= 2
	default:
		r.rate = (r.good + r.bad) / 2
	}
	if r.rates >= r.cfg.MaxSteps || (r.good > 0 && r.bad > 0 && (r.bad-r.good)/r.good < 0.05) || r.rate < 1 || r.rate > maxRate {
		r.done = true
	}
}

// stepFunc runs step i of a ramp at rate.
type stepFunc func(i int, rate float64) (report.FindMaxStep, error)

// interleave runs the ramps' steps in turn, one step of each while it is
// not done, so that on a shared machine every ramp sees the same
// background load over the run rather than one ramp its first minutes
// and the other its last: their ratio is what matters.
func interleave(ctx context.Context, ramps []*rampState, steps []stepFunc) error {
	for {
		ran := false
		for k, r := range ramps {
			if r.done {
				continue
			}
			if ctx.Err() != nil {
				return fmt.Errorf("interrupted: %w", context.Cause(ctx))
			}
			st, err := steps[k](len(r.steps), r.rate)
			if err != nil {
				return err
			}
			r.record(st)
			ran = true
		}
		if !ran {
			return nil
		}
	}
}

// findMax ramps Eventide's event rate (steps of --duration, each a full
// load, drain and check with its own run id) and, unless --raw-duration
// is 0, the raw JetStream pipeline under the same objectives, one step of
// each in turn. It returns the ramps and the step of Eventide's highest
// rate that held (its last step if none did).
func (e *env) findMax(ctx context.Context, rep *report.Report) (*report.FindMax, *stepResult, error) {
	cfg := e.cfg
	fm := &report.FindMax{AllCorrect: true}
	for _, o := range cfg.Objectives {
		fm.Objectives = append(fm.Objectives, o.Text)
	}
	var results []*stepResult
	eventide := newRamp(cfg, cfg.EventRate)
	ramps := []*rampState{eventide}
	settle := func() float64 {
		waited, quiet := settleServer(ctx, func() (float64, bool) { return e.serverCPU(ctx) }, time.Now, sleepCtx)
		if !quiet && waited >= settleTimeout {
			e.progress.note("the server was still busy after %s; starting the step anyway", settleTimeout)
		}
		return waited.Seconds()
	}
	steps := []stepFunc{func(i int, rate float64) (report.FindMaxStep, error) {
		run := fmt.Sprintf("%ss%d", cfg.Run, i)
		settled := settle()
		e.progress.note("find-max step %d: %.0f events/s for %s", i+1, rate, cfg.Duration)
		res, err := e.step(ctx, rate, run)
		if err != nil {
			return report.FindMaxStep{}, err
		}
		results = append(results, res)
		probe := &report.Report{Raw: rep.Raw}
		res.fill(probe, cfg)
		st := stepSummary(run, rate, probe, probe.Objectives)
		st.Correct = probe.Correctness.Passed
		if res.harness != nil {
			st.HarnessCores = res.harness.AvgCores
		}
		st.ServerCores = res.serverCores
		st.ServerCounters = res.counters
		st.SettleSeconds = settled
		placeLoad(&st, res.loadStart, res.loadEnd)
		fm.AllCorrect = fm.AllCorrect && st.Correct
		return st, nil
	}}
	var raw *rampState
	if cfg.RawDuration > 0 {
		raw = newRamp(cfg, cfg.RawRate)
		ramps = append(ramps, raw)
		steps = append(steps, func(i int, rate float64) (report.FindMaxStep, error) {
			run := fmt.Sprintf("%sr%d", cfg.Run, i)
			settled := settle()
			e.progress.note("find-max raw JetStream step %d: %.0f messages/s for %s", i+1, rate, cfg.Duration)
			probe, serverCores, err := e.rawStep(ctx, rate, run)
			if err != nil {
				return report.FindMaxStep{}, err
			}
			st := stepSummary(run, rate, probe, rawObjectives(cfg.Objectives, probe))
			st.Correct = true
			if probe.Harness != nil {
				st.HarnessCores = probe.Harness.AvgCores
			}
			st.ServerCores = serverCores
			st.ServerCounters = probe.ServerCounters
			st.SettleSeconds = settled
			placeLoad(&st, probe.Started, probe.Finished)
			return st, nil
		})
	}
	if err := interleave(ctx, ramps, steps); err != nil {
		return nil, nil, err
	}
	fm.Steps, fm.MaxRate = eventide.steps, eventide.good
	chosen := results[len(results)-1]
	if eventide.best >= 0 {
		chosen = results[eventide.best]
	}
	if raw != nil {
		fm.Raw = &report.RawRamp{Steps: raw.steps, MaxRate: raw.good}
		if raw.good > 0 {
			fm.Ratio = fm.MaxRate / raw.good
		}
	}
	return fm, chosen, nil
}

// stepSummary is one step's line in the ramp, from its report and its
// checked objectives.
func stepSummary(run string, rate float64, r *report.Report, checked []report.ObjectiveResult) report.FindMaxStep {
	failed := report.Failed(checked)
	st := report.FindMaxStep{Run: run, TargetRate: rate, Held: len(failed) == 0, P99: map[string]float64{}}
	if r.Events != nil {
		st.AchievedRate, st.DroppedRatio = r.Events.AchievedRate, r.Events.DroppedRatio
	}
	for kind, s := range r.Latency {
		st.P99[kind] = s.Percentiles["p99"]
	}
	for _, f := range failed {
		st.Failed = append(st.Failed, f.Describe())
	}
	return st
}

// rawObjectives checks, for a raw JetStream step, the objectives that
// mean something there: those on publish and queryable (consumed)
// latency, and on the events workload's drops, errors and rate. Query
// objectives have no raw counterpart and are left out.
func rawObjectives(objs []report.Objective, r *report.Report) []report.ObjectiveResult {
	var keep []report.Objective
	for _, o := range objs {
		switch {
		case o.Arg == "publish" || o.Arg == "queryable":
		case (o.Func == "drop" || o.Func == "errors") && (o.Arg == "" || o.Arg == "events"):
		case o.Func == "rate" && o.Arg == "events":
		default:
			continue
		}
		keep = append(keep, o)
	}
	return report.CheckObjectives(keep, r)
}

// serverCoresSince reads the spawned server's CPU time now and returns a
// function that gives its CPU in cores from then to when it is called: 0
// when not spawned or unreadable. Read from /proc at both ends, it holds
// for a step shorter than the sampling interval.
func (e *env) serverCoresSince() func() float64 {
	if e.server == nil {
		return func() float64 { return 0 }
	}
	start, startErr := target.ReadProc(e.server.pid)
	return func() float64 {
		end, err := target.ReadProc(e.server.pid)
		if startErr != nil || err != nil || !end.At.After(start.At) {
			return 0
		}
		return (end.CPUSeconds - start.CPUSeconds) / end.At.Sub(start.At).Seconds()
	}
}

// placeLoad sets st's load window and, from its server cores, the
// server's CPU per event achieved.
func placeLoad(st *report.FindMaxStep, from, to time.Time) {
	st.Started, st.Seconds = from.UTC(), to.Sub(from).Seconds()
	if st.ServerCores > 0 && st.AchievedRate > 0 {
		st.ServerMicrosPerEvent = 1e6 * st.ServerCores / st.AchievedRate
	}
}
