package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/eventide/eventide/loadtest/internal/hist"
	"github.com/eventide/eventide/loadtest/internal/report"
	"github.com/eventide/eventide/loadtest/internal/target"
)

// progress draws one live line on a terminal, and nothing when the output
// is not one (CI logs stay clean).
type progress struct {
	w  io.Writer
	on bool
	mu sync.Mutex
}

func newProgress(mode string, w io.Writer) *progress {
	on := mode == "on"
	if mode == "auto" {
		if f, ok := w.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				on = true
			}
		}
	}
	return &progress{w: w, on: on}
}

func (p *progress) line(elapsed time.Duration, rate float64, events *eventLoad, queries *queryLoad, probes *probeTracker, lat *hist.Set, social *socialLoad, fan *fanoutTracker) {
	if !p.on {
		return
	}
	s := fmt.Sprintf("[%5.0fs] %.0f/s", elapsed.Seconds(), rate)
	if events != nil {
		s += fmt.Sprintf(" events acked %d failed %d", events.acked.Load(), events.failed.Load())
		if q, ok := lat.Quantile("publish", 99); ok {
			s += " p99 " + report.FormatSeconds(q)
		}
		pending, _ := probes.outstanding()
		s += fmt.Sprintf(" | probes waiting %d", pending)
	}
	if queries != nil {
		s += fmt.Sprintf(" | queries ok %d failed %d", queries.ok.Load(), queries.failed.Load())
	}
	if social != nil {
		pending, _ := fan.outstanding()
		s += fmt.Sprintf(" | social acked %d failed %d, probe posts waiting %d", social.acked.Load(), social.failed.Load(), pending)
	}
	p.mu.Lock()
	fmt.Fprintf(p.w, "\r\033[K%s", s)
	p.mu.Unlock()
}

// note prints a line of what the run is doing (always: it goes to stderr).
func (p *progress) note(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.on {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, "loadtest: "+format+"\n", args...)
}

func (p *progress) clear() {
	if p.on {
		p.mu.Lock()
		fmt.Fprint(p.w, "\r\033[K")
		p.mu.Unlock()
	}
}

// serverSampler records the spawned server's RSS and CPU over time: the
// sampler goroutine appends, the steps read (under mu).
type serverSampler struct {
	pid   int
	start time.Time
	// counters reads the server's /metrics counters with each sample; nil
	// until connected.
	counters func(context.Context) (map[string]float64, error)

	mu      sync.Mutex
	samples []target.ProcSample
	// storage holds, per sample, the running totals of sampledCounters
	// (the last known when /metrics could not be read).
	storage [][len(sampledCounters)]float64
	errs    int
}

// sampledCounters are the server's counters kept with every sample, so
// that a latency spike can be set against the flushes, compactions and
// stalls around it (the report's server.counters).
var sampledCounters = [...]string{
	"eventide_storage_flushes_total",
	"eventide_storage_compactions_total",
	"eventide_storage_compaction_written_bytes_total",
	"eventide_storage_write_stalls_total",
	"eventide_storage_wal_syncs_total",
	"eventide_storage_wal_sync_seconds_total",
}

// maxServerSamples bounds the samples kept; beyond it every other one is
// dropped, as the latency series does.
const maxServerSamples = 2048

func (s *serverSampler) sample() {
	ps, err := target.ReadProc(s.pid)
	var counters map[string]float64
	var counterErr error
	if s.counters != nil && err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		counters, counterErr = s.counters(ctx)
		cancel()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.errs++
		return
	}
	var totals [len(sampledCounters)]float64
	if n := len(s.storage); n > 0 {
		totals = s.storage[n-1]
	}
	if counters != nil && counterErr == nil {
		for i, name := range sampledCounters {
			totals[i] = counters[name]
		}
	}
	s.samples = append(s.samples, ps)
	s.storage = append(s.storage, totals)
	if len(s.samples) >= maxServerSamples {
		kept, keptStorage := s.samples[:0], s.storage[:0]
		for i := 0; i < len(s.samples); i += 2 {
			kept, keptStorage = append(kept, s.samples[i]), append(keptStorage, s.storage[i])
		}
		s.samples, s.storage = kept, keptStorage
	}
}

// cpuNow reads the server's CPU seconds so far from /proc.
func (s *serverSampler) cpuNow() (float64, bool) {
	ps, err := target.ReadProc(s.pid)
	return ps.CPUSeconds, err == nil
}

func (s *serverSampler) stats(loadEnd time.Time) *report.ServerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &report.ServerStats{PID: s.pid}
	var atEnd *target.ProcSample
	if s.counters != nil {
		st.Counters = map[string][]float64{}
		for i, name := range sampledCounters {
			values := make([]float64, len(s.storage))
			for j, totals := range s.storage {
				values[j] = totals[i]
			}
			st.Counters[name] = values
		}
	}
	for i, ps := range s.samples {
		st.Times = append(st.Times, ps.At.Sub(s.start).Seconds())
		st.RSSBytes = append(st.RSSBytes, ps.RSSBytes)
		st.CPUSeconds = append(st.CPUSeconds, ps.CPUSeconds)
		st.PeakRSSBytes = max(st.PeakRSSBytes, ps.RSSBytes)
		if !ps.At.After(loadEnd) {
			atEnd = &s.samples[i]
		}
	}
	if len(s.samples) > 0 {
		st.CPUSecondsAll = s.samples[len(s.samples)-1].CPUSeconds
		first := s.samples[0]
		if atEnd != nil && atEnd.At.After(first.At) {
			st.AvgCores = (atEnd.CPUSeconds - first.CPUSeconds) / atEnd.At.Sub(first.At).Seconds()
		}
	}
	return st
}
