package arrival

import (
	"sync"
	"time"
)

// FakeClock is a Clock that moves only when Advance is called. It is
// exported for the tests of the packages that drive a Scheduler.
type FakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	c  chan time.Time
}

// NewFakeClock returns a FakeClock reading start.
func NewFakeClock(start time.Time) *FakeClock { return &FakeClock{now: start} }

// Now returns the fake time.
func (f *FakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// After returns a channel receiving when the fake time reaches t.
func (f *FakeClock) After(t time.Time) (<-chan time.Time, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &fakeWaiter{at: t, c: make(chan time.Time, 1)}
	if !t.After(f.now) {
		w.c <- f.now
		return w.c, func() {}
	}
	f.waiters = append(f.waiters, w)
	return w.c, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, x := range f.waiters {
			if x == w {
				f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
				return
			}
		}
	}
}

// Advance moves the time on by d and fires the timers that are due.
func (f *FakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if !w.at.After(f.now) {
			w.c <- f.now
			continue
		}
		kept = append(kept, w)
	}
	f.waiters = kept
}

// Waiters returns how many timers are pending; tests poll it to know that
// a goroutine is blocked on the clock.
func (f *FakeClock) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}
