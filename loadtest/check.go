package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/eventide/eventide/loadtest/internal/report"
	"github.com/eventide/eventide/loadtest/internal/workload"
	"github.com/nats-io/nats.go/jetstream"
)

// countsReady reports whether every type's count over HTTP has reached the
// events acknowledged for it, and the counts read.
func countsReady(ctx context.Context, api *apiClient, types []string, acked map[string]int64, from, to time.Time) (bool, map[string]int64, error) {
	got := map[string]int64{}
	ready := true
	for _, t := range types {
		n, err := api.count(ctx, t, from, to)
		if err != nil {
			return false, nil, err
		}
		got[t] = n
		if n < acked[t] {
			ready = false
		}
	}
	return ready, got, nil
}

// checkCounts compares counts with what was accepted: at least every
// acked event, at most those plus the ones whose publish failed (the
// stream may have stored them before the ack was lost).
func checkCounts(types []string, counts, acked, failed map[string]int64) report.Check {
	var bad []string
	var total, totalAcked int64
	for _, t := range types {
		total += counts[t]
		totalAcked += acked[t]
		if counts[t] < acked[t] || counts[t] > acked[t]+failed[t] {
			bad = append(bad, fmt.Sprintf("%s counted %d, acked %d (+%d failed publishes)", t, counts[t], acked[t], failed[t]))
		}
	}
	c := report.Check{Name: "counts match accepted", Passed: len(bad) == 0}
	if c.Passed {
		c.Detail = fmt.Sprintf("%d events counted over %d types, %d acked", total, len(types), totalAcked)
	} else {
		c.Detail = strings.Join(bad, "; ")
	}
	return c
}

// checkProbes reads every probe event of the run back and checks that
// each acknowledged probe is there exactly once.
func checkProbes(ctx context.Context, api *apiClient, probeType string, probes *probeTracker, total int64, from, to time.Time) report.Check {
	c := report.Check{Name: "probes readable once"}
	seen := make([]int32, total)
	var unknown int64
	err := api.events(ctx, probeType, from, to, func(ev apiEvent, _ time.Time) {
		var d struct {
			Probe *int64 `json:"probe"`
		}
		if json.Unmarshal(ev.Data, &d) != nil || d.Probe == nil || *d.Probe < 0 || *d.Probe >= total {
			unknown++
			return
		}
		seen[*d.Probe]++
	})
	if err != nil {
		c.Detail = "cannot read the probes: " + err.Error()
		return c
	}
	var acked, missing, dup, extra int64
	for n := range total {
		switch {
		case probes.isAcked(n) && seen[n] == 0:
			missing++
		case seen[n] > 1:
			dup++
		case !probes.isAcked(n) && seen[n] == 1:
			extra++ // stored though its publish failed or was dropped: allowed
		}
		if probes.isAcked(n) {
			acked++
		}
	}
	c.Passed = missing == 0 && dup == 0 && unknown == 0
	c.Detail = fmt.Sprintf("%d acked probes: %d missing, %d more than once, %d unreadable; %d stored without an ack", acked, missing, dup, unknown, extra)
	return c
}

// dlqLetters reads the run's dead letters (subjects dlq.events.<type> for
// the run's types) until there are want of them or timeout passes, and
// returns how many there are and how many carry another reason than the
// one their event was made for.
func dlqLetters(ctx context.Context, js jetstream.JetStream, stream string, types []string, want int64, timeout time.Duration) (n, mismatched int64, err error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, 0, fmt.Errorf("cannot open dead-letter stream %s: %w", stream, err)
	}
	var subjects []string
	for _, t := range types {
		subjects = append(subjects, "dlq.events."+t)
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: subjects})
	if err != nil {
		return 0, 0, fmt.Errorf("cannot read dead-letter stream %s: %w", stream, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		batch, err := cons.FetchNoWait(1000)
		if err != nil {
			return n, mismatched, fmt.Errorf("cannot fetch dead letters: %w", err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			n++
			expected := m.Headers().Get(HeaderExpectedReason)
			reason, _, _ := strings.Cut(m.Headers().Get("Eventide-Error"), ":")
			if expected == "" || reason != expected {
				mismatched++
			}
		}
		if batch.Error() != nil && !errors.Is(batch.Error(), jetstream.ErrNoMessages) {
			return n, mismatched, fmt.Errorf("cannot fetch dead letters: %w", batch.Error())
		}
		if got > 0 {
			continue
		}
		if n >= want || time.Now().After(deadline) {
			return n, mismatched, nil
		}
		select {
		case <-ctx.Done():
			return n, mismatched, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func checkDLQ(d *report.DLQResult, failedInvalid int64, readErr error) report.Check {
	c := report.Check{Name: "invalid events in the DLQ"}
	if readErr != nil {
		c.Detail = readErr.Error()
		return c
	}
	c.Passed = d.InDLQ >= d.InvalidAcked && d.InDLQ <= d.InvalidAcked+failedInvalid && d.ReasonMismatches == 0
	c.Detail = fmt.Sprintf("%d dead letters for %d invalid events acked (+%d failed publishes), %d with another reason than intended",
		d.InDLQ, d.InvalidAcked, failedInvalid, d.ReasonMismatches)
	return c
}

// sortedTypes returns the event types of a generator plus none of the
// probes'.
func sortedTypes(gen *workload.EventGen) []string { return slices.Sorted(slices.Values(gen.Types())) }
