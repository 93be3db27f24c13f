package arrival

import "time"

// Clock is the time source of a Scheduler. The real one is SystemClock;
// tests pass a FakeClock so that intended times, lateness and drops are
// exact and no test sleeps.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once the clock reaches t (at
	// once if it already has), and a function that releases the timer.
	After(t time.Time) (<-chan time.Time, func())
}

// SystemClock is the wall clock (with Go's monotonic reading).
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// After returns a timer firing at t.
func (SystemClock) After(t time.Time) (<-chan time.Time, func()) {
	d := time.Until(t)
	if d <= 0 {
		c := make(chan time.Time, 1)
		c <- time.Now()
		return c, func() {}
	}
	tm := time.NewTimer(d)
	return tm.C, func() { tm.Stop() }
}
