package main

import (
	"context"
	"fmt"
	"time"

	"github.com/eventide/eventide/loadtest/internal/report"
)

// ramp runs steps at rising rates: from rate, multiplying by --ramp
// while every objective holds; after the first step that breaks one, it
// halves the gap between the highest rate that held and the lowest that
// broke until the gap is under 5% or --max-steps steps ran. If the first
// step breaks, it halves the rate instead. A step that is not correct
// ends the ramp: a pipeline that loses events has no capacity figure.
// It returns the steps, the highest rate that held (0 if none) and the
// index of its step (-1 if none).
func ramp(ctx context.Context, cfg *config, rate float64, step func(i int, rate float64) (report.FindMaxStep, error)) ([]report.FindMaxStep, float64, int, error) {
	var steps []report.FindMaxStep
	good, bad := 0.0, 0.0
	best := -1
	for i := 0; i < cfg.MaxSteps && ctx.Err() == nil; i++ {
		st, err := step(i, rate)
		if err != nil {
			return nil, 0, -1, err
		}
		steps = append(steps, st)
		if !st.Correct {
			break
		}
		if st.Held {
			good, best = rate, i
		} else {
			bad = rate
		}
		switch {
		case bad == 0:
			rate *= cfg.Ramp
		case good == 0:
			rate /= 2
		default:
			rate = (good + bad) / 2
		}
		if (good > 0 && bad > 0 && (bad-good)/good < 0.05) || rate < 1 || rate > maxRate {
			break
		}
	}
	if ctx.Err() != nil {
		return nil, 0, -1, fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	return steps, good, best, nil
}

// findMax ramps Eventide's event rate (steps of --duration, each a full
// load, drain and check with its own run id), then, unless
// --raw-duration is 0, ramps the raw JetStream pipeline under the same
// objectives. It returns the ramps and the step of Eventide's highest
// rate that held (its last step if none did).
func (e *env) findMax(ctx context.Context, rep *report.Report) (*report.FindMax, *stepResult, error) {
	cfg := e.cfg
	fm := &report.FindMax{AllCorrect: true}
	for _, o := range cfg.Objectives {
		fm.Objectives = append(fm.Objectives, o.Text)
	}
	var results []*stepResult
	steps, maxRate, best, err := ramp(ctx, cfg, cfg.EventRate, func(i int, rate float64) (report.FindMaxStep, error) {
		run := fmt.Sprintf("%ss%d", cfg.Run, i)
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
		st.ServerCores = e.serverCores(res.loadStart, res.loadEnd)
		st.ServerCounters = res.counters
		fm.AllCorrect = fm.AllCorrect && st.Correct
		return st, nil
	})
	if err != nil {
		return nil, nil, err
	}
	fm.Steps, fm.MaxRate = steps, maxRate
	chosen := results[len(results)-1]
	if best >= 0 {
		chosen = results[best]
	}
	if cfg.RawDuration > 0 {
		rawSteps, rawMax, _, err := ramp(ctx, cfg, cfg.RawRate, func(i int, rate float64) (report.FindMaxStep, error) {
			run := fmt.Sprintf("%sr%d", cfg.Run, i)
			e.progress.note("find-max raw JetStream step %d: %.0f messages/s for %s", i+1, rate, cfg.Duration)
			probe, err := e.rawStep(ctx, rate, run)
			if err != nil {
				return report.FindMaxStep{}, err
			}
			st := stepSummary(run, rate, probe, rawObjectives(cfg.Objectives, probe))
			st.Correct = true
			if probe.Harness != nil {
				st.HarnessCores = probe.Harness.AvgCores
			}
			st.ServerCores = e.serverCores(probe.Started, probe.Finished)
			return st, nil
		})
		if err != nil {
			return nil, nil, err
		}
		fm.Raw = &report.RawRamp{Steps: rawSteps, MaxRate: rawMax}
		if rawMax > 0 {
			fm.Ratio = fm.MaxRate / rawMax
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

// serverCores is the spawned server's CPU in cores over [from, to]; 0
// when not spawned.
func (e *env) serverCores(from, to time.Time) float64 {
	if e.server == nil {
		return 0
	}
	e.server.mu.Lock()
	defer e.server.mu.Unlock()
	return e.server.coresBetween(from, to)
}
