package natstest

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPublishPaced(t *testing.T) {
	t.Run("limit", func(t *testing.T) {
		var got []int
		done := PublishPaced(context.Background(), 100000, 250, func(i int) error {
			got = append(got, i)
			return nil
		})
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("a paced publisher with a limit did not stop")
		}
		if len(got) != 250 || got[0] != 0 || got[249] != 249 {
			t.Fatalf("published %d calls (first %v), want 0..249 in order", len(got), got[:min(3, len(got))])
		}
	})
	t.Run("error stops", func(t *testing.T) {
		calls := 0
		done := PublishPaced(context.Background(), 100000, 0, func(i int) error {
			calls++
			if i == 9 {
				return errors.New("closed")
			}
			return nil
		})
		<-done
		if calls != 10 {
			t.Fatalf("%d calls, want 10 (the tenth failed)", calls)
		}
	})
	t.Run("cancel stops", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := PublishPaced(ctx, 10, 0, func(int) error { return nil })
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("a cancelled paced publisher did not stop")
		}
	})
}
