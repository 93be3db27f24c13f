package main

import (
	"context"
	"io"
	"maps"
	"testing"
	"time"

	"github.com/eventide/eventide/internal/natstest"
	"github.com/eventide/eventide/loadtest/internal/arrival"
	"github.com/eventide/eventide/loadtest/internal/hist"
	"github.com/eventide/eventide/loadtest/internal/workload"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The event workload's counts are exact for each outcome a publish can
// have against a real nats-server: acked by a stream, no stream (503 no
// responders), no ack within --publish-timeout, and dropped because
// --workers publishes were already in flight.
func TestEventLoadCountsOutcomes(t *testing.T) {
	s := natstest.StartServer(t)
	nc, js := natstest.Connect(t, s.ClientURL())
	ctx := context.Background()
	tests := []struct {
		name        string
		setup       func(t *testing.T)
		rate        float64
		duration    time.Duration
		workers     int
		lateness    time.Duration
		timeout     time.Duration
		wantErrors  map[string]int64 // by cause; the failed publishes
		wantDropped int64
	}{
		{name: "no stream", rate: 2000, duration: 250 * time.Millisecond, workers: 64, lateness: time.Second, timeout: 10 * time.Second,
			setup: func(*testing.T) {}, wantErrors: map[string]int64{"publish.no_stream": 500}},
		{name: "no ack, then full", rate: 100, duration: 100 * time.Millisecond, workers: 1, lateness: 0, timeout: 300 * time.Millisecond,
			setup: func(t *testing.T) {
				// A responder that never answers: publishes wait for their
				// timeout, holding the one permit.
				sub, err := nc.Subscribe("events.>", func(*nats.Msg) {})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = sub.Unsubscribe() })
				if err := nc.Flush(); err != nil {
					t.Fatal(err)
				}
			},
			wantErrors: map[string]int64{"publish.timeout": 1}, wantDropped: 9},
		{name: "acked", rate: 2000, duration: 250 * time.Millisecond, workers: 64, lateness: time.Second, timeout: 10 * time.Second,
			setup: func(t *testing.T) {
				if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"events.>"}, Storage: jetstream.MemoryStorage}); err != nil {
					t.Fatal(err)
				}
			},
			wantErrors: map[string]int64{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.setup(t)
			cfg, err := parseConfig([]string{"--invalid", "0.05", "--late", "0.05"}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			cfg.EventRate, cfg.Duration, cfg.Workers, cfg.MaxLateness, cfg.PublishLimit = tc.rate, tc.duration, tc.workers, tc.lateness, tc.timeout
			cfg.Events.Run = "evtest"
			cfg.Events.ProbeEvery = 10
			lat := hist.NewSet(eventLatSlots, time.Now())
			probes := newProbeTracker(nil, workload.ProbeType("evtest"), hist.NewSet(1, time.Now()))
			l, err := newEventLoad(cfg, nc, lat, probes)
			if err != nil {
				t.Fatal(err)
			}
			stats, err := l.run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			lat.Tick(time.Now())
			want := arrival.Stats{Scheduled: int64(tc.rate * tc.duration.Seconds()), Dropped: tc.wantDropped, Start: stats.Start}
			want.Started = want.Scheduled - want.Dropped
			if stats != want {
				t.Fatalf("stats = %+v, want %+v", stats, want)
			}
			tot := l.totals()
			if !maps.Equal(tot.errors, tc.wantErrors) {
				t.Errorf("errors = %v, want %v", tot.errors, tc.wantErrors)
			}
			var failed, droppedByKind int64
			for _, n := range tc.wantErrors {
				failed += n
			}
			for _, n := range l.dropped {
				droppedByKind += n
			}
			acked := sum(tot.ackedValid) + sum(tot.ackedInvalid) + tot.ackedProbes
			if acked+failed != stats.Started || l.acked.Load() != acked || l.failed.Load() != failed {
				t.Errorf("acked %d (progress %d) + failed %d (progress %d), want %d started", acked, l.acked.Load(), failed, l.failed.Load(), stats.Started)
			}
			if gotFailed := sum(tot.failedValid) + tot.failedInvalid; gotFailed > failed {
				t.Errorf("failed valid+invalid = %d, more than the %d failed publishes", gotFailed, failed)
			}
			if droppedByKind != stats.Dropped {
				t.Errorf("dropped by kind = %v, want %d in all", l.dropped, stats.Dropped)
			}
			if n := lat.Summary("publish").Count; n != acked {
				t.Errorf("publish latencies recorded = %d, want one per ack (%d)", n, acked)
			}
			if pending, inFlight := probes.outstanding(); inFlight != 0 || pending != int(tot.ackedProbes) {
				t.Errorf("probes in flight %d, pending %d; want 0 in flight and the %d acked pending", inFlight, pending, tot.ackedProbes)
			}
			if tc.name == "acked" && (len(tot.ackedInvalid) == 0 || tot.late == 0 || tot.ackedProbes == 0) {
				t.Errorf("acked invalid %v, late %d, probes %d: the run should have had each", tot.ackedInvalid, tot.late, tot.ackedProbes)
			}
		})
	}
}
