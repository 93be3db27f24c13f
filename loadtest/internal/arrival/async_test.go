package arrival

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// asyncRecorder keeps the operations RunAsync started, with their release
// functions, so a test ends them when it wants.
type asyncRecorder struct {
	mu       sync.Mutex
	started  []record // intended only
	releases []func()
	dropped  []record
}

func (r *asyncRecorder) startedLen() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.started)
}

func (r *asyncRecorder) droppedLen() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.dropped)
}

func (r *asyncRecorder) release(i int) {
	r.mu.Lock()
	f := r.releases[i]
	r.mu.Unlock()
	f()
}

func (r *asyncRecorder) config(clock *FakeClock, rate float64, d time.Duration, inFlight int, late time.Duration) AsyncConfig[int64] {
	return AsyncConfig[int64]{
		Rate: rate, Duration: d, InFlight: inFlight, MaxLateness: late, Clock: clock,
		Next: func(seq int64) int64 { return seq },
		Start: func(_ context.Context, seq int64, intended time.Time, release func()) {
			r.mu.Lock()
			r.started = append(r.started, record{seq: seq, intended: intended.Sub(t0)})
			r.releases = append(r.releases, release)
			r.mu.Unlock()
		},
		Dropped: func(seq int64, intended time.Time) {
			r.mu.Lock()
			r.dropped = append(r.dropped, record{seq: seq, intended: intended.Sub(t0)})
			r.mu.Unlock()
		},
	}
}

// Operations start at their intended times without waiting for earlier
// ones to end; when every permit is held past MaxLateness the operation
// is dropped, and a released permit starts the next one; RunAsync returns
// only once every started operation is released.
func TestAsyncInFlightBoundAndDrops(t *testing.T) {
	clock := NewFakeClock(t0)
	var r asyncRecorder
	cfg := r.config(clock, 10, 500*time.Millisecond, 2, 150*time.Millisecond)
	type result struct {
		s   Stats
		err error
	}
	res := make(chan result, 1)
	go func() {
		s, err := RunAsync(context.Background(), cfg)
		res <- result{s, err}
	}()
	ms := time.Millisecond
	waitFor(t, "op 0 started", func() bool { return r.startedLen() == 1 })
	waitFor(t, "wait for op 1's start", func() bool { return clock.Waiters() == 1 })
	clock.Advance(100 * ms) // t=100: op 1 starts while op 0 is in flight
	waitFor(t, "op 1 started", func() bool { return r.startedLen() == 2 })
	waitFor(t, "wait for op 2's start", func() bool { return clock.Waiters() == 1 })
	clock.Advance(100 * ms) // t=200: both permits held; op 2 waits until 350
	waitFor(t, "op 2 to wait for a permit", func() bool { return clock.Waiters() == 1 })
	clock.Advance(150 * ms) // t=350: op 2 dropped; op 3 (due 300) waits until 450
	waitFor(t, "op 2 dropped", func() bool { return r.droppedLen() == 1 })
	waitFor(t, "op 3 to wait for a permit", func() bool { return clock.Waiters() == 1 })
	r.release(0) // op 3 starts at 350
	waitFor(t, "op 3 started", func() bool { return r.startedLen() == 3 })
	waitFor(t, "wait for op 4's start", func() bool { return clock.Waiters() == 1 })
	clock.Advance(50 * ms) // t=400: op 4 finds both permits held, waits until 550
	waitFor(t, "op 4 to wait for a permit", func() bool { return clock.Waiters() == 1 })
	r.release(1) // op 4 starts
	waitFor(t, "op 4 started", func() bool { return r.startedLen() == 4 })
	select {
	case out := <-res:
		t.Fatalf("RunAsync returned %+v with operations in flight", out)
	case <-time.After(20 * time.Millisecond):
	}
	r.release(2)
	r.release(3)
	out := <-res
	if out.err != nil {
		t.Fatal(out.err)
	}
	want := Stats{Scheduled: 5, Started: 4, Dropped: 1, Start: t0}
	if out.s != want {
		t.Fatalf("stats = %+v, want %+v", out.s, want)
	}
	wantStarted := []record{{seq: 0}, {seq: 1, intended: 100 * ms}, {seq: 3, intended: 300 * ms}, {seq: 4, intended: 400 * ms}}
	for i, w := range wantStarted {
		if r.started[i] != w {
			t.Errorf("started[%d] = %+v, want %+v", i, r.started[i], w)
		}
	}
	if r.dropped[0] != (record{seq: 2, intended: 200 * ms}) {
		t.Errorf("dropped = %+v, want op 2 intended at 200ms", r.dropped)
	}
}

// An operation released inside Start (a request that failed at once)
// frees its permit for the next one.
func TestAsyncReleaseInsideStart(t *testing.T) {
	clock := NewFakeClock(t0)
	var n int
	cfg := AsyncConfig[int64]{
		Rate: 10, Duration: 300 * time.Millisecond, InFlight: 1, MaxLateness: 0, Clock: clock,
		Next:  func(seq int64) int64 { return seq },
		Start: func(_ context.Context, _ int64, _ time.Time, release func()) { n++; release() },
	}
	res := make(chan Stats, 1)
	go func() {
		s, _ := RunAsync(context.Background(), cfg)
		res <- s
	}()
	for range 2 {
		waitFor(t, "scheduler to wait", func() bool { return clock.Waiters() == 1 })
		clock.Advance(100 * time.Millisecond)
	}
	s := <-res
	if s.Started != 3 || s.Dropped != 0 || n != 3 {
		t.Fatalf("stats = %+v, %d started, want 3 started and none dropped", s, n)
	}
}

func TestAsyncInvalidConfig(t *testing.T) {
	_, err := RunAsync(context.Background(), AsyncConfig[int]{Rate: 1, Duration: time.Second, InFlight: 0, Next: func(int64) int { return 0 }})
	if err == nil || !strings.Contains(err.Error(), "workers 0") || !strings.Contains(err.Error(), "Start must be set") {
		t.Fatalf("err = %v, want the in-flight bound and the missing Start named", err)
	}
}
