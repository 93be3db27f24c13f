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

// referenceHistogramAdd is TimeHistogram.Add as it was before the absorbed
// value was remembered: insert, then merge the closest pair.
func referenceHistogramAdd(bins []histogramBin, at int64) []histogramBin {
	i := 0
	for i < len(bins) && bins[i].at < at {
		i++
	}
	if i < len(bins) && bins[i].at == at {
		bins[i].count++
		return bins
	}
	bins = append(bins, histogramBin{})
	copy(bins[i+1:], bins[i:])
	bins[i] = histogramBin{at: at, count: 1}
	if len(bins) > maxHistogramBins {
		best := 0
		for j := 1; j+1 < len(bins); j++ {
			if gap(bins[j], bins[j+1]) < gap(bins[best], bins[best+1]) {
				best = j
			}
		}
		bins[best+1].count += bins[best].count
		bins = append(bins[:best], bins[best+1:]...)
	}
	return bins
}

// TestTimeHistogramAbsorbedRuns checks that remembering a value merged
// into its neighbour as it was inserted changes no bin: streams shaped as
// a writer adds cells' expiries (runs of one second, seconds walking down
// or up, sparse late values far before them) give exactly the bins of
// inserting and merging every value.
func TestTimeHistogramAbsorbedRuns(t *testing.T) {
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 3))
	absorbedHits := 0
	for round := range 100 {
		var h TimeHistogram
		var ref []histogramBin
		at := int64(1_800_000_000)
		step := int64(1 - 2*rng.IntN(2))
		for range 2000 + rng.IntN(4000) {
			var v int64
			switch r := rng.IntN(100); {
			case r < 2:
				v = at - 60 - rng.Int64N(5400) // late
			case r < 7:
				v = at - rng.Int64N(3) // out of order
			default:
				if rng.IntN(30) == 0 {
					at += step
				}
				v = at
			}
			for _, a := range h.absorbed[:h.nAbsorbed] {
				if a.at == v {
					absorbedHits++
				}
			}
			h.Add(v)
			ref = referenceHistogramAdd(ref, v)
			if len(h.bins) != len(ref) {
				t.Fatalf("seed %d round %d: %d bins, want %d", seed, round, len(h.bins), len(ref))
			}
			for i := range ref {
				if h.bins[i] != ref[i] {
					t.Fatalf("seed %d round %d: bin %d is %+v, want %+v", seed, round, i, h.bins[i], ref[i])
				}
			}
		}
	}
	if absorbedHits == 0 {
		t.Fatalf("seed %d: no value was counted as absorbed: the streams do not reach the case", seed)
	}
}

// BenchmarkTimeHistogramAdd adds expiries shaped as the all-in-one's
// events give a writer (runs of cells whose expiry alternates between two
// neighbouring seconds, the seconds walking down as a partition's DESC
// keys do, 1% late values up to 90 minutes before), to a full histogram:
// "add" with TimeHistogram.Add, "reference" with the insert-and-merge of
// every value it replaced. One op is one value.
func BenchmarkTimeHistogramAdd(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	vals := make([]int64, 1<<16)
	at := int64(1_800_000_000)
	for i := range vals {
		if i%40 == 0 {
			at--
		}
		vals[i] = at + int64(rng.IntN(2))
		if rng.IntN(100) == 0 {
			vals[i] = at - 60 - rng.Int64N(5400)
		}
	}
	b.Run("add", func(b *testing.B) {
		var h TimeHistogram
		for i := 0; b.Loop(); i++ {
			h.Add(vals[i%len(vals)])
		}
	})
	b.Run("reference", func(b *testing.B) {
		var bins []histogramBin
		for i := 0; b.Loop(); i++ {
			bins = referenceHistogramAdd(bins, vals[i%len(vals)])
		}
	})
}
