package fanout

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestThrottleBucket(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tb := newThrottle(1_000, 100, 1) // 1,000 rows/s, chunks of 100: one chunk per 100 ms; no duty cycle
	steps := []struct {
		idle bool
		ms   int
		wait time.Duration // what take returns
	}{
		{ms: 0, wait: 0},                      // starts full: one chunk at once
		{ms: 0, wait: 100 * time.Millisecond}, // then empty
		{ms: 40, wait: 60 * time.Millisecond},
		{ms: 100, wait: 0},
		{ms: 150, wait: 50 * time.Millisecond},
		{ms: 10_000, wait: 0}, // a long pause holds one chunk, not a burst
		{ms: 10_000, wait: 100 * time.Millisecond},
		{idle: true, ms: 10_001},
		{ms: 10_001, wait: 0}, // the writer was idle: full again
		{ms: 10_001, wait: 100 * time.Millisecond},
		{ms: 9_000, wait: 100 * time.Millisecond}, // a clock going back refills nothing
	}
	for i, s := range steps {
		if s.idle {
			tb.idle(at(s.ms))
			continue
		}
		if got := tb.take(at(s.ms)); got != s.wait {
			t.Fatalf("step %d (at %d ms): take waits %v, want %v", i, s.ms, got, s.wait)
		}
	}
}

func TestThrottleDutyCycle(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tb := newThrottle(1<<30, 100, 0.25) // the rate never binds; a quarter of the time
	if w := tb.take(at(0)); w != 0 {
		t.Fatalf("first chunk waits %v", w)
	}
	tb.worked(at(10), 10*time.Millisecond) // took 10 ms: 30 ms of rest
	for _, s := range []struct {
		ms   int
		wait time.Duration
	}{{10, 30 * time.Millisecond}, {25, 15 * time.Millisecond}, {40, 0}} {
		if w := tb.take(at(s.ms)); w != s.wait {
			t.Fatalf("at %d ms: take waits %v, want %v", s.ms, w, s.wait)
		}
	}
	tb.worked(at(50), 10*time.Millisecond)
	tb.idle(at(51)) // the writer's backlog is gone: no rest
	if w := tb.take(at(51)); w != 0 {
		t.Fatalf("after idle: take waits %v, want 0", w)
	}
	off := newThrottle(1<<30, 100, 1)
	off.worked(at(10), time.Second)
	if w := off.take(at(10)); w != 0 {
		t.Fatalf("share 1: take waits %v, want 0", w)
	}
}

// TestRunYieldsToBusyWriter: while WriterBusy reports a backlog and the
// budget (the rate, or the duty cycle) allows one chunk a long while, Run
// writes that one chunk and then holds the rest back (it yields, counted
// in eventide_fanout_yield_seconds_total); once the writer is idle it
// delivers the rest at full speed.
func TestRunYieldsToBusyWriter(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rate  int
		share float64
	}{
		{"rate", 1, 1},                // a chunk per 10 s: only the first starts while busy
		{"duty cycle", 1 << 30, 1e-5}, // rest 100,000 times what the first chunk took
	} {
		t.Run(tc.name, func(t *testing.T) { testRunYields(t, tc.rate, tc.share) })
	}
}

func testRunYields(t *testing.T, rate int, share float64) {
	var busy atomic.Bool
	busy.Store(true)
	o := DefaultOptions()
	o.LargeThreshold = 1 << 40
	o.ChunkSize = 10
	o.Workers = 2
	o.BusyRowsPerSecond = rate
	o.BusyShare = share
	o.WriterBusy = busy.Load
	e := newEnv(t, o)
	e.followMany("star", 50)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.f.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	e.apply(e.post("star", "p", "hello"))
	const rows = "eventide_fanout_timeline_rows_written_total"
	waitUntil(t, "Run to yield to the busy writer", func() bool { return e.counter("eventide_fanout_yield_seconds_total") >= 0.05 })
	if n := e.counter(rows); n > float64(o.ChunkSize) {
		t.Fatalf("%v timeline rows written while the writer was busy; want at most one chunk (%d)", n, o.ChunkSize)
	}
	busy.Store(false)
	waitUntil(t, "the fan-out to finish", func() bool { return e.counter(rows) == 50 })
	if got := e.timelineLabels("f000049", 10); len(got) != 1 || got[0] != "p" {
		t.Fatalf("timeline of f000049 = %v, want [p]", got)
	}
}

// waitUntil polls cond until it holds, failing the test after a minute.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
