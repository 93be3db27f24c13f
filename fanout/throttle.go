package fanout

import "time"

// throttle is the token bucket that makes chunk workers yield to the
// writer. While Options.WriterBusy reports a backlog, a chunk may start
// only when the bucket holds a chunk's worth of rows; the bucket refills
// at Options.BusyRowsPerSecond and holds at most one chunk, so the
// fan-out's writes while the writer is busy average at most that rate
// (plus one chunk), whatever the follower count. While the writer is idle
// the bucket is full and the fan-out runs at full speed.
//
// A fixed rate is a larger share of a machine that gives the process
// less CPU, so the bucket also keeps a duty cycle: after a chunk that
// took d, the next one starts no sooner than d*(1/share-1) later
// (Options.BusyShare), so while the writer is busy the chunks take at
// most that share of the time, however slow the machine is.
//
// Times are passed in so the bucket is tested without a clock; Run passes
// time.Now (the rate is about real time, not the injected Options.Now,
// which tests freeze).
type throttle struct {
	ratePerSec float64
	capacity   float64 // one chunk
	tokens     float64
	last       time.Time
	share      float64
	notBefore  time.Time // duty cycle: no chunk starts before
}

func newThrottle(rowsPerSecond, chunkSize int, share float64) *throttle {
	return &throttle{ratePerSec: float64(rowsPerSecond), capacity: float64(chunkSize), tokens: float64(chunkSize), share: share}
}

// idle notes that the writer has no backlog: the bucket is full and the
// duty cycle starts over.
func (t *throttle) idle(now time.Time) {
	t.tokens, t.last, t.notBefore = t.capacity, now, time.Time{}
}

// worked notes that a chunk ending at now took d.
func (t *throttle) worked(now time.Time, d time.Duration) {
	if t.share >= 1 || d <= 0 {
		return
	}
	rest := time.Duration(float64(d) * (1/t.share - 1))
	if until := now.Add(rest); until.After(t.notBefore) {
		t.notBefore = until
	}
}

// take asks for one chunk while the writer is busy. It returns 0 and
// takes the chunk's rows when the bucket holds them; otherwise it takes
// nothing and returns how long until it will.
func (t *throttle) take(now time.Time) time.Duration {
	if now.Before(t.notBefore) {
		return t.notBefore.Sub(now)
	}
	if !t.last.IsZero() && now.After(t.last) {
		t.tokens = min(t.capacity, t.tokens+now.Sub(t.last).Seconds()*t.ratePerSec)
	}
	t.last = now
	if t.tokens >= t.capacity {
		t.tokens -= t.capacity
		return 0
	}
	wait := time.Duration((t.capacity - t.tokens) / t.ratePerSec * float64(time.Second))
	return max(wait, time.Millisecond)
}
