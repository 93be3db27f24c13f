// Package arrival runs operations open-loop at a constant arrival rate, the
// way wrk2 does: operation i has the intended start time start + i/rate,
// whatever happened to the operations before it, and its latency is
// measured from that intended start, not from when a worker got to it. A
// server that stalls therefore shows its stall in every operation that
// queued behind it (no coordinated omission).
//
// Operations are handed to a fixed pool of workers. When every worker is
// still busy MaxLateness after an operation's intended start, the
// operation is dropped: it is not run, and it is reported through
// Config.Dropped and counted in Stats, never skipped silently. The pool
// bounds the harness's own concurrency (and memory) however slow the
// server gets.
//
// RunAsync is the same schedule for operations that end asynchronously
// (a request whose reply a handler receives): the scheduling goroutine
// starts each operation itself and it holds one of AsyncConfig.InFlight
// permits, instead of a worker goroutine, until it is released; an
// operation that finds no permit within MaxLateness is dropped as above.
//
// The clock is passed in (Config.Clock): tests drive a FakeClock and see
// exact intended times, latencies and drops without sleeping.
package arrival

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Config is one open-loop run.
type Config[T any] struct {
	// Rate is the intended operations per second; > 0.
	Rate float64
	// Duration is how long operations are started for: operation i is
	// started only if its intended time is before Start + Duration.
	Duration time.Duration
	// Workers is the number of operations that may run at once; >= 1.
	Workers int
	// MaxLateness is how long after its intended start an operation may
	// wait for a free worker before it is dropped; >= 0.
	MaxLateness time.Duration
	// Clock is the time source; nil means SystemClock.
	Clock Clock
	// Next makes operation seq (0, 1, 2, ...). It is called in order on
	// one goroutine, for dropped operations too, so a seeded generator
	// gives the same sequence of operations whatever was dropped.
	Next func(seq int64) T
	// Do runs one operation on worker w (0 <= w < Workers), given its
	// intended start. Calls on the same w never overlap, so per-worker
	// state needs no lock.
	Do func(ctx context.Context, w int, op T, intended time.Time)
	// Done, if set, is called on worker w after Do with the operation's
	// latency from its intended start.
	Done func(w int, op T, intended time.Time, latency time.Duration)
	// Dropped, if set, is called for each dropped operation, on the
	// scheduling goroutine.
	Dropped func(op T, intended time.Time)
}

// Stats says what a run did.
type Stats struct {
	Scheduled int64 // operations whose intended start fell in the run
	Started   int64 // handed to a worker
	Dropped   int64 // not started: no worker was free within MaxLateness
	// Start is the intended start of operation 0.
	Start time.Time
}

// Interval returns the time between intended starts at rate per second.
func Interval(rate float64) time.Duration {
	return time.Duration(math.Round(float64(time.Second) / rate))
}

// validate says what is wrong with cfg, naming the field.
func (cfg *Config[T]) validate() error {
	var errs []error
	if !(cfg.Rate > 0) || math.IsInf(cfg.Rate, 0) {
		errs = append(errs, fmt.Errorf("rate %v: must be a positive number of operations per second", cfg.Rate))
	} else if Interval(cfg.Rate) <= 0 {
		errs = append(errs, fmt.Errorf("rate %v: more than one operation per nanosecond", cfg.Rate))
	}
	if cfg.Duration <= 0 {
		errs = append(errs, fmt.Errorf("duration %s: must be positive", cfg.Duration))
	}
	if cfg.Workers < 1 {
		errs = append(errs, fmt.Errorf("workers %d: must be at least 1", cfg.Workers))
	}
	if cfg.MaxLateness < 0 {
		errs = append(errs, fmt.Errorf("max lateness %s: must not be negative", cfg.MaxLateness))
	}
	if cfg.Next == nil || cfg.Do == nil {
		errs = append(errs, errors.New("BUG: Next and Do must be set"))
	}
	return errors.Join(errs...)
}

type slot[T any] struct {
	op       T
	intended time.Time
}

// Run starts operations at the configured rate from now until the
// duration has passed or ctx is done, waits for the started ones to
// finish, and returns the counts. Cancelling ctx stops scheduling; it is
// passed to Do so operations in flight can give up.
func Run[T any](ctx context.Context, cfg Config[T]) (Stats, error) {
	if err := cfg.validate(); err != nil {
		return Stats{}, fmt.Errorf("invalid arrival schedule: %w", err)
	}
	clock := cfg.Clock
	if clock == nil {
		clock = SystemClock{}
	}

	// A worker is free while its id is in idle: every worker starts there
	// (before its goroutine has run, so the first operations are not
	// dropped for a goroutine not yet scheduled) and puts its id back
	// after each operation. An operation is handed only to a free worker,
	// through the worker's own one-slot channel, so it never waits in a
	// queue where its lateness would be hidden.
	idle := make(chan int, cfg.Workers)
	jobs := make([]chan slot[T], cfg.Workers)
	var wg sync.WaitGroup
	for w := range cfg.Workers {
		jobs[w] = make(chan slot[T], 1)
		idle <- w
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range jobs[w] {
				cfg.Do(ctx, w, s.op, s.intended)
				if cfg.Done != nil {
					cfg.Done(w, s.op, s.intended, clock.Now().Sub(s.intended))
				}
				idle <- w // never blocks: idle has room for every worker
			}
		}()
	}
	defer func() {
		for _, j := range jobs {
			close(j)
		}
		wg.Wait()
	}()
	sch := schedule[T, int]{
		rate: cfg.Rate, duration: cfg.Duration, maxLateness: cfg.MaxLateness, clock: clock,
		next: cfg.Next, dropped: cfg.Dropped, free: idle,
		start: func(w int, s slot[T]) { jobs[w] <- s },
	}
	return sch.run(ctx), nil
}

// schedule is the loop Run and RunAsync share: it makes each operation
// at its intended time and starts it as soon as a free slot (a worker's
// id, or an in-flight permit) can be taken from free, or drops it when
// none can be taken within maxLateness.
type schedule[T, S any] struct {
	rate        float64
	duration    time.Duration
	maxLateness time.Duration
	clock       Clock
	next        func(seq int64) T
	dropped     func(op T, intended time.Time)
	free        chan S
	start       func(s S, op slot[T])
}

func (sch *schedule[T, S]) run(ctx context.Context) Stats {
	clock := sch.clock
	nanosPerOp := float64(time.Second) / sch.rate
	stats := Stats{Start: clock.Now()}
	end := stats.Start.Add(sch.duration)
	drop := func(s slot[T]) {
		stats.Dropped++
		if sch.dropped != nil {
			sch.dropped(s.op, s.intended)
		}
	}
	for seq := int64(0); ; seq++ {
		// From seq/rate, not seq whole-nanosecond intervals: a rounded
		// interval (1/300 s) would drift and start extra operations.
		intended := stats.Start.Add(time.Duration(math.Round(float64(seq) * nanosPerOp)))
		if !intended.Before(end) {
			break
		}
		if intended.After(clock.Now()) {
			c, stop := clock.After(intended)
			select {
			case <-c:
			case <-ctx.Done():
				stop()
				return stats
			}
		}
		if ctx.Err() != nil {
			return stats
		}
		s := slot[T]{op: sch.next(seq), intended: intended}
		stats.Scheduled++
		select {
		case f := <-sch.free:
			sch.start(f, s)
			stats.Started++
			continue
		default:
		}
		deadline := intended.Add(sch.maxLateness)
		if !deadline.After(clock.Now()) {
			drop(s)
			continue
		}
		c, stop := clock.After(deadline)
		select {
		case f := <-sch.free:
			sch.start(f, s)
			stats.Started++
		case <-c:
			// A slot may have become free at the deadline itself; the
			// operation is late beyond the bound either way.
			drop(s)
		case <-ctx.Done():
			stats.Scheduled--
		}
		stop()
		if ctx.Err() != nil {
			return stats
		}
	}
	return stats
}
