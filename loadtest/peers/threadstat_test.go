package main

import (
	"runtime"
	"testing"
	"time"
)

// TestThreadClockSplitsAReadsTime: a read that spins on the CPU shows as
// time on a CPU, one that sleeps as parked, and neither waits for a CPU
// on an idle thread beyond the sleep itself; the shares add up to the
// read's wall time within the sampling's own cost.
func TestThreadClockSplitsAReadsTime(t *testing.T) {
	// The caller holds its thread, as readInterleaved does.
	measure := func(t *testing.T, read func()) query {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		clk := openThreadClock()
		defer clk.close()
		if clk.f == nil {
			t.Skip("no /proc/thread-self/schedstat")
		}
		th0 := clk.sample(true)
		t0 := time.Now()
		read()
		took := time.Since(t0)
		th1 := clk.sample(false)
		return query{took: took, onCPU: th1.onCPU - th0.onCPU, waiting: th1.waiting - th0.waiting}
	}
	const d = 20 * time.Millisecond
	for _, tc := range []struct {
		name      string
		read      func()
		wantOnCPU bool
	}{
		{"spin", func() {
			for t0 := time.Now(); time.Since(t0) < d; {
			}
		}, true},
		{"sleep", func() { time.Sleep(d) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := measure(t, tc.read)
			t.Logf("took %v: on a CPU %v, waiting %v, parked %v", q.took, q.onCPU, q.waiting, q.parked())
			busy := q.onCPU + q.waiting
			if tc.wantOnCPU && busy < q.took*9/10 {
				t.Errorf("a spinning read of %v: on a CPU %v, waiting %v, parked %v; want on a CPU or waiting for one nearly all of it", q.took, q.onCPU, q.waiting, q.parked())
			}
			if !tc.wantOnCPU && q.onCPU > q.took/10 {
				t.Errorf("a sleeping read of %v: on a CPU %v, want nearly none", q.took, q.onCPU)
			}
			if !tc.wantOnCPU && q.parked() < q.took/2 {
				t.Errorf("a sleeping read of %v: parked %v, want most of it", q.took, q.parked())
			}
		})
	}
}

// TestTailBreakdown: the reads at or above the p99 of 200 reads (the
// third slowest, as percentile counts) are the three slowest, and their
// shares are their own.
func TestTailBreakdown(t *testing.T) {
	qs := make([]query, 200)
	for i := range qs {
		qs[i] = query{took: 10 * time.Microsecond, onCPU: 10 * time.Microsecond}
	}
	qs[7] = query{took: 100 * time.Microsecond, onCPU: 10 * time.Microsecond, waiting: 90 * time.Microsecond, gcs: 1}
	qs[90] = query{took: 200 * time.Microsecond, onCPU: 20 * time.Microsecond, waiting: 180 * time.Microsecond}
	qs[150] = query{took: 300 * time.Microsecond, onCPU: 30 * time.Microsecond, otherCPU: 30 * time.Microsecond, faults: 2, involuntary: 3}
	got := tailBreakdown(qs)
	want := "p99 100.0 µs; at or above it: 3 reads, mean 200.0 µs: on a CPU 10%, waiting for a CPU 45%, parked 45%; other threads' CPU 10.0 µs per read; 3 involuntary switches; 1 with a GC cycle ending, 1 with page faults; all: "
	if len(got) < len(want) || got[:len(want)] != want {
		t.Errorf("tailBreakdown =\n%s\nwant it to start with\n%s", got, want)
	}
	// Without their waits for a CPU, the two slow reads that waited are
	// as fast as the rest: the p99 of the reads' own time is 10 µs.
	var unwaited []time.Duration
	for i := range qs {
		unwaited = append(unwaited, qs[i].unwaited())
	}
	if p := percentile(unwaited, 99); p != 10*time.Microsecond {
		t.Errorf("p99 of the reads' own time = %v, want 10µs", p)
	}
}
