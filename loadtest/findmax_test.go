package main

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/eventide/eventide/loadtest/internal/report"
)

// TestInterleavedRamps runs two ramps against fake capacities: the steps
// must alternate between them while both run, each ramp must follow its
// own rates (x1.5 until a break, then bisect to 5%), and each must find
// the highest rate under its capacity.
func TestInterleavedRamps(t *testing.T) {
	cfg := &config{Ramp: 1.5, MaxSteps: 10}
	capacity := []float64{1000, 3000}
	ramps := []*rampState{newRamp(cfg, 400), newRamp(cfg, 400)}
	var order []string
	steps := make([]stepFunc, len(ramps))
	for k := range ramps {
		steps[k] = func(i int, rate float64) (report.FindMaxStep, error) {
			order = append(order, fmt.Sprintf("%d:%d@%.0f", k, i, rate))
			return report.FindMaxStep{TargetRate: rate, Held: rate <= capacity[k], Correct: true}, nil
		}
	}
	if err := interleave(context.Background(), ramps, steps); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"0:0@400", "1:0@400", "0:1@600", "1:1@600", "0:2@900", "1:2@900", "0:3@1350", "1:3@1350",
		"0:4@1125", "1:4@2025", "0:5@1012", "1:5@3038", "0:6@956", "1:6@2531", "0:7@984", "1:7@2784",
		"1:8@2911",
	}
	if !reflect.DeepEqual(order, want) {
		t.Errorf("steps ran in the order\n%v\nwant\n%v", order, want)
	}
	if ramps[0].good != 984.375 || ramps[0].best != 7 {
		t.Errorf("first ramp: highest rate held %v at step %d, want 984.375 at step 7", ramps[0].good, ramps[0].best)
	}
	if g := ramps[1].good; g > capacity[1] || g < 0.95*capacity[1] || len(ramps[1].steps) != 9 {
		t.Errorf("second ramp: highest rate held %v in %d steps, want within 5%% under %v in 9", g, len(ramps[1].steps), capacity[1])
	}
}

// TestRampStopsAtIncorrectStep: a step that fails the correctness check
// ends its ramp at once, while the other goes on.
func TestRampStopsAtIncorrectStep(t *testing.T) {
	cfg := &config{Ramp: 2, MaxSteps: 4}
	ramps := []*rampState{newRamp(cfg, 100), newRamp(cfg, 100)}
	n := []int{0, 0}
	steps := []stepFunc{
		func(i int, rate float64) (report.FindMaxStep, error) {
			n[0]++
			return report.FindMaxStep{Held: true, Correct: i < 1}, nil
		},
		func(i int, rate float64) (report.FindMaxStep, error) {
			n[1]++
			return report.FindMaxStep{Held: true, Correct: true}, nil
		},
	}
	if err := interleave(context.Background(), ramps, steps); err != nil {
		t.Fatal(err)
	}
	if n[0] != 2 || n[1] != 4 || ramps[0].good != 100 || ramps[1].good != 800 {
		t.Errorf("ran %v steps, highest rates held %v and %v; want [2 4], 100 and 800", n, ramps[0].good, ramps[1].good)
	}
}

// TestRampRetriesBrokenStep: with --retry-broken 1 a step that breaks is
// run once more at its rate. A hiccup at the first rate (broken once, held
// on the retry) no longer sets the ceiling: the ramp goes on above it. A
// rate that breaks twice counts as broken. Retries are marked in the
// report and not counted in --max-steps.
func TestRampRetriesBrokenStep(t *testing.T) {
	cfg := &config{Ramp: 2, MaxSteps: 4, RetryBroken: 1}
	r := newRamp(cfg, 100)
	var ran []string
	hiccup := true
	step := func(i int, rate float64) (report.FindMaxStep, error) {
		held := rate <= 500
		if rate == 100 && hiccup {
			held, hiccup = false, false
		}
		ran = append(ran, fmt.Sprintf("%.0f:%v", rate, held))
		return report.FindMaxStep{TargetRate: rate, Held: held, Correct: true}, nil
	}
	if err := interleave(context.Background(), []*rampState{r}, []stepFunc{step}); err != nil {
		t.Fatal(err)
	}
	want := []string{"100:false", "100:true", "200:true", "400:true", "800:false", "800:false"}
	if !reflect.DeepEqual(ran, want) {
		t.Errorf("steps ran %v, want %v", ran, want)
	}
	if r.good != 400 || r.best != 3 {
		t.Errorf("highest rate held %v at step %d, want 400 at step 3", r.good, r.best)
	}
	var retries []bool
	for _, st := range r.steps {
		retries = append(retries, st.Retry)
	}
	if want := []bool{false, true, false, false, false, true}; !reflect.DeepEqual(retries, want) {
		t.Errorf("steps marked as retries %v, want %v", retries, want)
	}

	// Without retries the first step's hiccup halves the rate and the
	// ramp never looks above the first rate again.
	cfg.RetryBroken = 0
	r, hiccup, ran = newRamp(cfg, 100), true, nil
	if err := interleave(context.Background(), []*rampState{r}, []stepFunc{step}); err != nil {
		t.Fatal(err)
	}
	if r.good >= 100 {
		t.Errorf("without retries: highest rate held %v (steps %v), want under 100", r.good, ran)
	}
}
