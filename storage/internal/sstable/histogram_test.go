package sstable

import (
	"math/rand/v2"
	"testing"
)

// TestTimeHistogramConservative checks that a histogram never counts a
// value before a time it is not before, keeps every count, stays within
// its bins, and is exact for values of one step.
func TestTimeHistogramConservative(t *testing.T) {
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 2))
	for round := 0; round < 200; round++ {
		var h TimeHistogram
		var vals []int64
		base := int64(1_700_000_000) - rng.Int64N(1e9)
		spread := []int64{30, 3600, 86400 * 30, 1e9}[rng.IntN(4)]
		for i := rng.IntN(5000); i > 0; i-- {
			v := base + rng.Int64N(spread)
			if rng.IntN(10) == 0 {
				v = -v
			}
			vals = append(vals, v)
			h.Add(v)
		}
		if len(h.bins) > maxHistogramBins || h.Total() != int64(len(vals)) {
			t.Fatalf("seed %d: %d bins, total %d of %d values", seed, len(h.bins), h.Total(), len(vals))
		}
		for probe := 0; probe < 50; probe++ {
			at := base + rng.Int64N(spread) - spread/10
			if rng.IntN(10) == 0 {
				at = -at
			}
			var truth int64
			for _, v := range vals {
				if v < at {
					truth++
				}
			}
			if got := h.CountBefore(at); got > truth {
				t.Fatalf("seed %d: CountBefore(%d) = %d, but only %d values are before it", seed, at, got, truth)
			}
		}
	}
	var h TimeHistogram
	for i := 0; i < 100; i++ {
		h.Add(120)
	}
	if h.CountBefore(120) != 0 || h.CountBefore(121) != 100 {
		t.Fatalf("one step: CountBefore(120) = %d, CountBefore(121) = %d", h.CountBefore(120), h.CountBefore(121))
	}
}
