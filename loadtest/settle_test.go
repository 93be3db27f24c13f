package main

import (
	"context"
	"testing"
	"time"
)

// fakeServer is a server whose CPU use is busy cores until busyUntil,
// then idle cores, on a fake clock that sleep advances.
type fakeServer struct {
	t0, now    time.Time
	busyUntil  time.Duration
	busy, idle float64
}

func (f *fakeServer) cpu() (float64, bool) {
	el := f.now.Sub(f.t0)
	busy := min(el, f.busyUntil)
	return f.busy*busy.Seconds() + f.idle*(el-busy).Seconds(), true
}

func (f *fakeServer) sleep(ctx context.Context, d time.Duration) bool {
	f.now = f.now.Add(d)
	return ctx.Err() == nil
}

// TestSettleServer: the wait before a find-max step ends with the first
// quiet window after the server's busy spell, gives up after
// settleTimeout, and does not wait without a CPU reading.
func TestSettleServer(t *testing.T) {
	ctx := context.Background()
	t0 := time.Unix(1795000000, 0)
	for _, tc := range []struct {
		name      string
		busyUntil time.Duration
		want      time.Duration
		quiet     bool
	}{
		{"idle", 0, settleWindow, true},
		{"busy 2s", 2 * time.Second, 2*time.Second + settleWindow, true},
		{"busy 1.2s", 1200 * time.Millisecond, 2 * time.Second, true}, // the window 1.0-1.5 s is busy for 0.2 s: 0.4 cores
		{"busy for ever", time.Hour, settleTimeout, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeServer{t0: t0, now: t0, busyUntil: tc.busyUntil, busy: 1, idle: 0.02}
			waited, quiet := settleServer(ctx, f.cpu, func() time.Time { return f.now }, f.sleep)
			if waited != tc.want || quiet != tc.quiet {
				t.Errorf("waited %v, quiet %v; want %v, %v", waited, quiet, tc.want, tc.quiet)
			}
		})
	}
	if waited, quiet := settleServer(ctx, func() (float64, bool) { return 0, false }, time.Now, sleepCtx); waited != 0 || quiet {
		t.Errorf("without a CPU reading: waited %v, quiet %v; want 0, false", waited, quiet)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	f := &fakeServer{t0: t0, now: t0, busyUntil: time.Hour, busy: 1}
	if waited, quiet := settleServer(cancelled, f.cpu, func() time.Time { return f.now }, f.sleep); waited != settleWindow || quiet {
		t.Errorf("cancelled: waited %v, quiet %v; want one window, false", waited, quiet)
	}
}
