package main

import (
	"context"
	"time"
)

// Before each --find-max step the harness waits for the server to go
// quiet: a step must not pay for the flushes and compactions that
// Eventide's step before it left running (a raw step follows every
// Eventide step, and a compaction of 100 MB was seen to run into one).
const (
	settleCores   = 0.1                    // quiet: the server's CPU below this many cores
	settleWindow  = 500 * time.Millisecond // over a window this long
	settleTimeout = 30 * time.Second       // then the step starts anyway
)

// settleServer waits until the server's CPU over one window is below
// settleCores, at most settleTimeout; cpu reads the server's CPU seconds
// so far (false when it cannot). It returns how long it waited, and
// whether the server was quiet then. Without a CPU reading it does not
// wait.
func settleServer(ctx context.Context, cpu func() (float64, bool), now func() time.Time, sleep func(context.Context, time.Duration) bool) (time.Duration, bool) {
	start := now()
	prev, ok := cpu()
	if !ok {
		return 0, false
	}
	prevAt := start
	for {
		if !sleep(ctx, settleWindow) {
			return now().Sub(start), false
		}
		cur, ok := cpu()
		at := now()
		if !ok {
			return at.Sub(start), false
		}
		if s := at.Sub(prevAt).Seconds(); s > 0 && (cur-prev)/s < settleCores {
			return at.Sub(start), true
		}
		if at.Sub(start) >= settleTimeout {
			return at.Sub(start), false
		}
		prev, prevAt = cur, at
	}
}

// serverCPU reads the server's CPU seconds so far: from /proc when
// spawned, else from its /metrics (process_cpu_seconds_total).
func (e *env) serverCPU(ctx context.Context) (float64, bool) {
	if e.server != nil {
		return e.server.cpuNow()
	}
	c, err := e.api.serverCounters(ctx)
	if err != nil {
		return 0, false
	}
	v, ok := c["process_cpu_seconds_total"]
	return v, ok
}

// sleepCtx sleeps d unless ctx is done first; false if it was.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// every calls tick with the time, every d, on a goroutine of its own until
// ctx is done or the returned stop is called. stop waits for a tick under
// way to end, so nothing ticks after it returns; it may be called more
// than once.
func every(ctx context.Context, d time.Duration, tick func(now time.Time)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				tick(now)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
