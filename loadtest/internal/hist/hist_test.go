package hist

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

// Values recorded by four workers and merged give the same summary as
// one histogram holding them all.
func TestMergedEqualsSingle(t *testing.T) {
	s := NewSet(4, t0)
	single := newHistogram()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 100000 {
		d := time.Duration(rng.ExpFloat64() * float64(5*time.Millisecond))
		s.Record(i%4, "publish", d)
		_ = single.RecordValue(max(d.Microseconds(), 1))
		if i%25000 == 24999 {
			s.Tick(t0.Add(time.Duration(i/25000+1) * time.Second))
		}
	}
	sum := s.Summary("publish")
	if sum.Count != 100000 {
		t.Fatalf("count = %d, want 100000", sum.Count)
	}
	for _, p := range Percentiles {
		got := sum.Percentiles[PercentileName(p)]
		want := seconds(single.ValueAtQuantile(p))
		if got != want {
			t.Errorf("%s = %v, want %v", PercentileName(p), got, want)
		}
	}
	if sum.Max != seconds(single.Max()) || sum.Min != seconds(single.Min()) {
		t.Errorf("min/max = %v/%v, want %v/%v", sum.Min, sum.Max, seconds(single.Min()), seconds(single.Max()))
	}
	// The exponential's median is ln 2 * 5ms; HDR keeps 3 digits.
	if p50 := sum.Percentiles["p50"]; math.Abs(p50-math.Ln2*0.005) > 0.0002 {
		t.Errorf("p50 = %v, want about %v", p50, math.Ln2*0.005)
	}
	sr := s.Series("publish")
	if len(sr.Times) != 4 {
		t.Fatalf("series has %d points, want 4", len(sr.Times))
	}
	var n int64
	for _, c := range sr.Counts {
		n += c
	}
	if n != 100000 {
		t.Errorf("series counts add up to %d, want 100000", n)
	}
}

// Kinds are kept apart, and a kind with nothing in an interval gets a
// zero point.
func TestKindsAndEmptyIntervals(t *testing.T) {
	s := NewSet(2, t0)
	s.Record(0, "query.latest", 2*time.Millisecond)
	s.Record(1, "query.counts", 40*time.Millisecond)
	s.Tick(t0.Add(time.Second))
	s.Record(1, "query.counts", 40*time.Millisecond)
	s.Tick(t0.Add(2 * time.Second))
	if got := s.Kinds(); len(got) != 2 || got[0] != "query.counts" || got[1] != "query.latest" {
		t.Fatalf("kinds = %v", got)
	}
	latest := s.Series("query.latest")
	if len(latest.Counts) != 2 || latest.Counts[0] != 1 || latest.Counts[1] != 0 || latest.P99[1] != 0 {
		t.Fatalf("query.latest series = %+v, want a point of 1 then an empty one", latest)
	}
	if c := s.Summary("query.counts"); c.Count != 2 || math.Abs(c.Percentiles["p99"]-0.04) > 0.0001 {
		t.Fatalf("query.counts = %+v", c)
	}
	if q, ok := s.Quantile("query.none", 99); ok || q != 0 {
		t.Fatalf("unknown kind has a quantile %v", q)
	}
}

// Memory does not grow with the values recorded or the ticks.
func TestFixedMemory(t *testing.T) {
	s := NewSet(1, t0)
	s.Record(0, "k", time.Millisecond)
	s.Tick(t0.Add(time.Second))
	size := s.total["k"].ByteSize() + s.workers[0].kinds["k"].ByteSize()
	for i := range 3000 {
		for j := range 100 {
			s.Record(0, "k", time.Duration(j+i)*time.Microsecond)
		}
		s.Tick(t0.Add(time.Duration(i+2) * time.Second))
	}
	if got := s.total["k"].ByteSize() + s.workers[0].kinds["k"].ByteSize(); got != size {
		t.Errorf("histograms grew from %d to %d bytes", size, got)
	}
	sr := s.Series("k")
	if len(sr.Times) >= MaxPoints || len(sr.Times) < MaxPoints/2 {
		t.Errorf("series has %d points after 3001 ticks, want between %d and %d", len(sr.Times), MaxPoints/2, MaxPoints)
	}
	var n int64
	for _, c := range sr.Counts {
		n += c
	}
	if n != 300001 {
		t.Errorf("halved series counts add up to %d, want 300001", n)
	}
	if sr.Times[len(sr.Times)-1] != 3001 {
		t.Errorf("last point at %v s, want 3001", sr.Times[len(sr.Times)-1])
	}
}

// A latency beyond the range is kept as the range's top and counted.
func TestSaturation(t *testing.T) {
	s := NewSet(1, t0)
	s.Record(0, "k", 2*time.Hour)
	s.Tick(t0.Add(time.Second))
	sum := s.Summary("k")
	if sum.Saturated != 1 || sum.Max < 3599 {
		t.Fatalf("summary = %+v, want 1 saturated at about 1 h", sum)
	}
}
