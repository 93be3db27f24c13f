package main

import (
	"context"
	"fmt"

	"github.com/eventide/eventide/loadtest/internal/report"
)

// findMax ramps the event rate: steps of --duration, each multiplying the
// rate by --ramp while every objective holds; after the first step that
// breaks one, it halves the gap between the highest rate that held and
// the lowest that broke until the gap is under 5% or --max-steps steps
// ran. If the first step breaks, it halves the rate instead. A step that
// fails the correctness check ends the ramp: a server that loses events
// has no capacity figure. It returns the ramp and the highest step that
// held (the last step if none did).
func (e *env) findMax(ctx context.Context, rep *report.Report) (*report.FindMax, *stepResult, error) {
	cfg := e.cfg
	fm := &report.FindMax{AllCorrect: true}
	for _, o := range cfg.Objectives {
		fm.Objectives = append(fm.Objectives, o.Text)
	}
	var best, last *stepResult
	good, bad := 0.0, 0.0
	rate := cfg.EventRate
	for i := 0; i < cfg.MaxSteps && ctx.Err() == nil; i++ {
		run := fmt.Sprintf("%ss%d", cfg.Run, i)
		e.progress.note("find-max step %d: %.0f events/s for %s", i+1, rate, cfg.Duration)
		res, err := e.step(ctx, rate, run)
		if err != nil {
			return nil, nil, err
		}
		last = res
		probe := &report.Report{Raw: rep.Raw}
		res.fill(probe, cfg)
		failed := report.Failed(probe.Objectives)
		st := report.FindMaxStep{
			Run: run, TargetRate: rate, Held: len(failed) == 0, Correct: probe.Correctness.Passed,
			P99: map[string]float64{},
		}
		if res.events != nil {
			st.AchievedRate, st.DroppedRatio = res.events.AchievedRate, res.events.DroppedRatio
		}
		for kind, s := range probe.Latency {
			st.P99[kind] = s.Percentiles["p99"]
		}
		for _, f := range failed {
			st.Failed = append(st.Failed, f.Describe())
		}
		fm.Steps = append(fm.Steps, st)
		fm.AllCorrect = fm.AllCorrect && st.Correct
		if !st.Correct {
			break
		}
		if st.Held {
			good, best = rate, res
		} else {
			bad = rate
		}
		switch {
		case bad == 0:
			rate *= cfg.Ramp
		case good == 0:
			rate /= 2
		default:
			if (bad-good)/good < 0.05 {
				i = cfg.MaxSteps // done
				continue
			}
			rate = (good + bad) / 2
		}
		if rate < 1 || rate > maxRate {
			break
		}
	}
	if ctx.Err() != nil {
		return nil, nil, fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	fm.MaxRate = good
	if best == nil {
		best = last
	}
	return fm, best, nil
}
