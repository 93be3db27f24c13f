package natstest

import (
	"context"
	"time"
)

// PublishPaced calls publish(i) for i = 0, 1, 2, ... at rate calls a
// second, spread over each millisecond (a benchmark's open-loop
// publisher), until ctx is done, publish returns an error, or limit calls
// were made (limit <= 0: no limit). The returned channel is closed when
// it has stopped.
func PublishPaced(ctx context.Context, rate float64, limit int, publish func(i int) error) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		start := time.Now()
		sent := 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			due := int(time.Since(start).Seconds() * rate)
			if limit > 0 {
				due = min(due, limit)
			}
			for ; sent < due; sent++ {
				if err := publish(sent); err != nil {
					return
				}
			}
			if limit > 0 && sent >= limit {
				return
			}
		}
	}()
	return done
}
