// Package hist records latencies in HDR histograms, one per worker and
// kind of operation, and merges them into a summary and a time series.
//
// It uses github.com/HdrHistogram/hdrhistogram-go, the Go port of Gil
// Tene's HdrHistogram: a histogram's memory is fixed by its range and
// precision (3 significant digits from 1 µs to 1 h: about 190 KB), not by
// the number of values recorded, so a run of a week takes the memory of a
// run of a minute, and histograms recorded apart merge exactly. That is
// the property the harness needs, and it is why this dependency earns its
// place; a reservoir or a sorted sample would lose the tail or grow.
//
// Workers record without contention: each worker has its own interval
// histograms behind its own mutex, which only Tick also takes. Tick, once
// per interval, moves every worker's interval histograms into the set's
// totals and appends one point per kind to a series; the series holds at
// most MaxPoints points, halving its resolution when full, so it too is
// bounded however long the run.
package hist

import (
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Range and precision of every histogram, in microseconds.
const (
	lowestMicros  = 1
	highestMicros = int64(time.Hour / time.Microsecond)
	sigFigs       = 3
)

// MaxPoints bounds each kind's time series.
const MaxPoints = 1024

// Percentiles reported for every kind.
var Percentiles = []float64{50, 90, 99, 99.9, 99.99, 100}

func newHistogram() *hdr.Histogram { return hdr.New(lowestMicros, highestMicros, sigFigs) }

// Set is the histograms of one workload: per worker and kind while
// recording, merged per kind by Tick.
type Set struct {
	workers []*worker

	mu     sync.Mutex
	total  map[string]*hdr.Histogram
	series map[string]*Series
	start  time.Time // the series' zero
}

type worker struct {
	mu    sync.Mutex
	kinds map[string]*hdr.Histogram
	// saturated counts values above the histogram's range, recorded as
	// its highest value.
	saturated map[string]int64
}

// NewSet returns a Set for workers workers, whose series counts time from
// start; each Tick adds a point.
func NewSet(workers int, start time.Time) *Set {
	s := &Set{
		total:  map[string]*hdr.Histogram{},
		series: map[string]*Series{},
		start:  start,
	}
	for range workers {
		s.workers = append(s.workers, &worker{kinds: map[string]*hdr.Histogram{}, saturated: map[string]int64{}})
	}
	return s
}

// Record adds one latency of kind, measured by worker w.
func (s *Set) Record(w int, kind string, d time.Duration) {
	wk := s.workers[w]
	v := max(d.Microseconds(), lowestMicros)
	wk.mu.Lock()
	h := wk.kinds[kind]
	if h == nil {
		h = newHistogram()
		wk.kinds[kind] = h
	}
	if v > highestMicros {
		v = highestMicros
		wk.saturated[kind]++
	}
	_ = h.RecordValue(v) // v is in range: RecordValue cannot fail
	wk.mu.Unlock()
}

// Series is one kind's latency over time.
type Series struct {
	// Times are the ends of the intervals, seconds since the set's start.
	Times []float64 `json:"t"`
	// Counts are the operations finished in each interval.
	Counts []int64 `json:"count"`
	// P50, P99 and Max are each interval's latencies in seconds. After
	// the series has been halved, a point is the larger of the two it
	// replaced (an upper bound).
	P50 []float64 `json:"p50"`
	P99 []float64 `json:"p99"`
	Max []float64 `json:"max"`
}

func (sr *Series) append(t float64, h *hdr.Histogram) {
	sr.Times = append(sr.Times, t)
	sr.Counts = append(sr.Counts, h.TotalCount())
	if h.TotalCount() == 0 {
		sr.P50 = append(sr.P50, 0)
		sr.P99 = append(sr.P99, 0)
		sr.Max = append(sr.Max, 0)
		return
	}
	sr.P50 = append(sr.P50, seconds(h.ValueAtQuantile(50)))
	sr.P99 = append(sr.P99, seconds(h.ValueAtQuantile(99)))
	sr.Max = append(sr.Max, seconds(h.Max()))
}

// halve merges neighbouring points pairwise.
func (sr *Series) halve() {
	n := len(sr.Times) / 2
	for i := range n {
		a, b := 2*i, 2*i+1
		sr.Times[i] = sr.Times[b]
		sr.Counts[i] = sr.Counts[a] + sr.Counts[b]
		sr.P50[i] = max(sr.P50[a], sr.P50[b])
		sr.P99[i] = max(sr.P99[a], sr.P99[b])
		sr.Max[i] = max(sr.Max[a], sr.Max[b])
	}
	odd := len(sr.Times)%2 == 1
	last := len(sr.Times) - 1
	keep := n
	if odd {
		sr.Times[n], sr.Counts[n], sr.P50[n], sr.P99[n], sr.Max[n] = sr.Times[last], sr.Counts[last], sr.P50[last], sr.P99[last], sr.Max[last]
		keep++
	}
	sr.Times, sr.Counts, sr.P50, sr.P99, sr.Max = sr.Times[:keep], sr.Counts[:keep], sr.P50[:keep], sr.P99[:keep], sr.Max[:keep]
}

func seconds(micros int64) float64 { return float64(micros) / 1e6 }

// Tick merges every worker's interval histograms into the totals and
// appends one point per kind (for kinds seen so far) to the series. Call
// it every interval and once at the end; it is cheap when nothing
// changed.
func (s *Set) Tick(now time.Time) {
	interval := map[string]*hdr.Histogram{}
	for _, wk := range s.workers {
		wk.mu.Lock()
		for kind, h := range wk.kinds {
			if h.TotalCount() == 0 {
				continue
			}
			m := interval[kind]
			if m == nil {
				m = newHistogram()
				interval[kind] = m
			}
			m.Merge(h)
			h.Reset()
		}
		wk.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for kind, h := range interval {
		t := s.total[kind]
		if t == nil {
			t = newHistogram()
			s.total[kind] = t
			s.series[kind] = &Series{}
		}
		t.Merge(h)
	}
	empty := newHistogram()
	for kind, sr := range s.series {
		h := interval[kind]
		if h == nil {
			h = empty
		}
		sr.append(now.Sub(s.start).Seconds(), h)
		if len(sr.Times) >= MaxPoints {
			sr.halve()
		}
	}
}

// Summary is one kind's latencies over the whole run, in seconds.
type Summary struct {
	Count int64   `json:"count"`
	Min   float64 `json:"min"`
	Mean  float64 `json:"mean"`
	Max   float64 `json:"max"`
	// Percentiles maps "p50", "p90", "p99", "p99.9", "p99.99", "p100" to
	// seconds.
	Percentiles map[string]float64 `json:"percentiles"`
	// Saturated counts latencies above the histograms' range (1 h),
	// recorded as 1 h.
	Saturated int64 `json:"saturated,omitempty"`
}

// PercentileName is the key of p in Summary.Percentiles: "p99.9".
func PercentileName(p float64) string { return "p" + formatFloat(p) }

// Kinds returns the kinds recorded so far, sorted.
func (s *Set) Kinds() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.total))
}

// Summary returns kind's summary as of the last Tick.
func (s *Set) Summary(kind string) Summary {
	s.mu.Lock()
	defer s.mu.Unlock()
	var saturated int64
	for _, wk := range s.workers {
		wk.mu.Lock()
		saturated += wk.saturated[kind]
		wk.mu.Unlock()
	}
	h := s.total[kind]
	if h == nil || h.TotalCount() == 0 {
		return Summary{Percentiles: map[string]float64{}}
	}
	sum := Summary{
		Count:       h.TotalCount(),
		Min:         seconds(h.Min()),
		Mean:        h.Mean() / 1e6,
		Max:         seconds(h.Max()),
		Percentiles: map[string]float64{},
		Saturated:   saturated,
	}
	for _, p := range Percentiles {
		sum.Percentiles[PercentileName(p)] = seconds(h.ValueAtQuantile(p))
	}
	return sum
}

// Quantile returns kind's latency at percentile p (0 < p <= 100) in
// seconds, as of the last Tick, and whether kind has any value.
func (s *Set) Quantile(kind string, p float64) (float64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.total[kind]
	if h == nil || h.TotalCount() == 0 {
		return 0, false
	}
	return seconds(h.ValueAtQuantile(p)), true
}

// Series returns a copy of kind's time series.
func (s *Set) Series(kind string) Series {
	s.mu.Lock()
	defer s.mu.Unlock()
	sr := s.series[kind]
	if sr == nil {
		return Series{}
	}
	return Series{
		Times: slices.Clone(sr.Times), Counts: slices.Clone(sr.Counts),
		P50: slices.Clone(sr.P50), P99: slices.Clone(sr.P99), Max: slices.Clone(sr.Max),
	}
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
