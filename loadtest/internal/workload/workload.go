// Package workload generates the harness's operations, deterministically
// from a seed: the same seed and configuration give the same sequence of
// events and queries, so two runs differ only in what the server did.
//
// Events (EventGen): a type mix (Zipf over N types, or configured
// weights), a payload size distribution (log-normal around a median,
// clamped), late events (event time minutes in the past, often in an
// earlier hour bucket), out-of-order events (event time a little before
// the events around them), invalid events each of a known rejection
// reason (docs/events.md), and probes, events of their own type whose
// arrival in query results the harness times.
//
// Queries (QueryGen): latest-N, time windows and counts over the event
// types, and timelines of the social workload's users, in a configured
// mix.
//
// The social graph (SocialGen, social.go): users with Zipf follower
// counts, a few above the server's fan-out threshold; the follows of that
// graph for a setup phase; then posts (some of them probe posts, timed into
// their authors' followers' timelines), follows, unfollows and post
// deletes at configured rates.
//
// An operation is a spec; its body or URL is made at its intended start
// (Event.Body, Query.Path), since event times and query windows are
// relative to it.
//
// Event types are named "lt-<run>-<name>", so one run's events, counts
// and dead letters can be told from anything else on the server.
package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// newRand returns the generator's random source for seed and stream: a
// PCG, so the sequence is the same on every platform and Go release that
// keeps math/rand/v2's PCG.
func newRand(seed uint64, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, stream))
}

// Weight is one entry of a configured mix.
type Weight struct {
	Name   string
	Weight float64
}

// ParseMix parses "a=5,b=3,c" (a missing weight is 1) into weights, in
// the order given. Names must be unique; weights positive and finite.
func ParseMix(s string) ([]Weight, error) {
	var out []Weight
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, ws, hasWeight := strings.Cut(part, "=")
		name = strings.TrimSpace(name)
		w := 1.0
		if hasWeight {
			var err error
			w, err = strconv.ParseFloat(strings.TrimSpace(ws), 64)
			if err != nil || !(w > 0) || math.IsInf(w, 0) {
				return nil, fmt.Errorf("mix entry %q: weight must be a positive number", part)
			}
		}
		if name == "" {
			return nil, fmt.Errorf("mix entry %q: no name", part)
		}
		if seen[name] {
			return nil, fmt.Errorf("mix entry %q: %s given twice", part, name)
		}
		seen[name] = true
		out = append(out, Weight{name, w})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("mix %q is empty", s)
	}
	return out, nil
}

// picker draws an index with probability proportional to its weight.
type picker struct {
	cumulative []float64 // ascending, last is the total
}

func newPicker(weights []float64) picker {
	p := picker{cumulative: make([]float64, len(weights))}
	sum := 0.0
	for i, w := range weights {
		sum += w
		p.cumulative[i] = sum
	}
	return p
}

func (p picker) pick(rng *rand.Rand) int {
	x := rng.Float64() * p.cumulative[len(p.cumulative)-1]
	lo, hi := 0, len(p.cumulative)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if p.cumulative[mid] > x {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// ZipfWeights returns n weights 1/k^s (k = 1..n): the first type is the
// most frequent. s > 0; s near 1 is the classic web-traffic skew.
func ZipfWeights(n int, s float64) []float64 {
	w := make([]float64, n)
	for k := range n {
		w[k] = 1 / math.Pow(float64(k+1), s)
	}
	return w
}
