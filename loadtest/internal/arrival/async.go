package arrival

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// AsyncConfig is one open-loop run whose operations do not hold a
// goroutine while they are in flight: the scheduling goroutine itself
// starts each operation (Start must return promptly, e.g. after writing a
// request), and whoever sees the operation end (a reply handler, a
// timeout sweeper) calls the release function Start was given. At most
// InFlight operations are started and not yet released; an operation
// that finds no permit free within MaxLateness of its intended start is
// dropped exactly as in Run.
//
// Latency is not measured here, as arrival cannot see an asynchronous
// end: the code that calls release measures it from the intended start
// Start was given.
type AsyncConfig[T any] struct {
	// Rate, Duration, MaxLateness, Clock, Next and Dropped are as in
	// Config.
	Rate        float64
	Duration    time.Duration
	MaxLateness time.Duration
	Clock       Clock
	Next        func(seq int64) T
	Dropped     func(op T, intended time.Time)
	// InFlight is the most operations started and not yet released; >= 1.
	InFlight int
	// Start begins op on the scheduling goroutine. The operation holds one
	// permit until release is called: exactly once per started operation,
	// from any goroutine, possibly before Start returns. RunAsync does not
	// return before every started operation has been released. release
	// is the same function for every operation.
	Start func(ctx context.Context, op T, intended time.Time, release func())
}

// RunAsync is Run for operations that end asynchronously (AsyncConfig):
// the same schedule, intended times, drops and Stats, with InFlight
// permits instead of a pool of worker goroutines.
func RunAsync[T any](ctx context.Context, cfg AsyncConfig[T]) (Stats, error) {
	shape := Config[T]{
		Rate: cfg.Rate, Duration: cfg.Duration, Workers: cfg.InFlight, MaxLateness: cfg.MaxLateness,
		Next: cfg.Next, Do: func(context.Context, int, T, time.Time) {},
	}
	err := shape.validate()
	if cfg.Start == nil {
		err = errors.Join(err, errors.New("BUG: Start must be set"))
	}
	if err != nil {
		return Stats{}, fmt.Errorf("invalid arrival schedule (workers = in flight): %w", err)
	}
	clock := cfg.Clock
	if clock == nil {
		clock = SystemClock{}
	}
	// A permit is free while it is in free; every one starts there.
	free := make(chan struct{}, cfg.InFlight)
	for range cfg.InFlight {
		free <- struct{}{}
	}
	release := func() {
		select {
		case free <- struct{}{}:
		default:
			panic("BUG: arrival: an operation was released twice")
		}
	}
	sch := schedule[T, struct{}]{
		rate: cfg.Rate, duration: cfg.Duration, maxLateness: cfg.MaxLateness, clock: clock,
		next: cfg.Next, dropped: cfg.Dropped, free: free,
		start: func(_ struct{}, s slot[T]) { cfg.Start(ctx, s.op, s.intended, release) },
	}
	stats := sch.run(ctx)
	for range cfg.InFlight {
		<-free // every started operation has been released
	}
	return stats, nil
}
