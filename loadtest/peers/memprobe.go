package main

import (
	"fmt"
	"io"
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// memProbe samples the process's resident set every few milliseconds and
// keeps the runtime's memory classes (and what extra reports, e.g. the
// storage engine's memtable and cache bytes) as they were at the sample
// with the highest RSS: a breakdown of the peak, for -membreakdown.
type memProbe struct {
	extra func() string

	mu      sync.Mutex
	peakRSS int64
	report  string
	cpu0    float64
	gcN0    uint64
	gcCPU0  float64
	cpuFile *os.File
	// extraEnd is what the engine reports at the end of the ingest.
	extraEnd func() string
	stop     chan struct{}
	done     chan struct{}
}

var memProbeMetrics = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/stacks:bytes",
	"/memory/classes/os-stacks:bytes",
	"/memory/classes/metadata/other:bytes",
	"/memory/classes/metadata/mspan/inuse:bytes",
	"/memory/classes/other:bytes",
	"/memory/classes/profiling/buckets:bytes",
	"/memory/classes/total:bytes",
	"/gc/heap/live:bytes",
	"/gc/heap/goal:bytes",
}

// gcCost reads the GC's cycles and CPU seconds (all of its classes:
// background marking, assists, pauses) so far.
func gcCost() (cycles uint64, cpuSeconds float64) {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Float64()
}

func startMemProbe(e engine) *memProbe {
	extra := engineMemory(e)
	p := &memProbe{extra: extra, stop: make(chan struct{}), done: make(chan struct{}), cpu0: cpuSeconds()}
	p.gcN0, p.gcCPU0 = gcCost()
	if path := os.Getenv("MEMPROBE_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			pprof.StartCPUProfile(f)
			p.cpuFile = f
		}
	}
	if ev, ok := e.(*eventideEngine); ok {
		p.extraEnd = func() string {
			m := ev.db.Metrics()
			return fmt.Sprintf("; eventide: %d stalls (%s), %d flushes, %d compactions, %d wal syncs", m.WriteStalls, m.WriteStallTime, m.Flushes, m.Compactions, m.WALSyncs)
		}
	}
	go p.run()
	return p
}

func (p *memProbe) run() {
	defer close(p.done)
	samples := make([]metrics.Sample, len(memProbeMetrics))
	for i, n := range memProbeMetrics {
		samples[i].Name = n
	}
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		// A new peak is recorded when it passes the last by 1 MiB, so
		// that the engine's metrics are read a few hundred times, not
		// every sample (DB.Metrics takes the engine's lock).
		rss := rssBytes()
		if rss < p.peakRSS+1<<20 {
			continue
		}
		metrics.Read(samples)
		var b strings.Builder
		fmt.Fprintf(&b, "  rss %.1f MiB\n", mib(rss))
		var goMapped, released int64
		for _, s := range samples {
			v := int64(s.Value.Uint64())
			fmt.Fprintf(&b, "  %-45s %8.1f\n", s.Name, mib(v))
			switch s.Name {
			case "/memory/classes/total:bytes":
				goMapped = v
			case "/memory/classes/heap/released:bytes":
				released = v
			}
		}
		fmt.Fprintf(&b, "  %-45s %8.1f\n", "rss - (go total - released)", mib(rss-(goMapped-released)))
		if p.extra != nil {
			b.WriteString(p.extra())
		}
		p.mu.Lock()
		p.peakRSS, p.report = rss, b.String()
		p.mu.Unlock()
	}
}

func (p *memProbe) finish(w io.Writer, label string) {
	close(p.stop)
	<-p.done
	if p.cpuFile != nil {
		pprof.StopCPUProfile()
		p.cpuFile.Close()
	}
	if path := os.Getenv("MEMPROBE_HEAPPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	gcN, gcCPU := gcCost()
	fmt.Fprintf(w, "%s: cpu %.2f s (user+system, all goroutines), GC %d cycles, %.2f s (runtime estimate)%s\n", label, cpuSeconds()-p.cpu0, gcN-p.gcN0, gcCPU-p.gcCPU0, p.summary())
	fmt.Fprintf(w, "memory at peak RSS (%s), MiB:\n%s", label, p.report)
}

// summary is what the engine reports at the end, if it reports anything.
func (p *memProbe) summary() string {
	if p.extraEnd == nil {
		return ""
	}
	return p.extraEnd()
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func mib(v int64) float64 { return float64(v) / (1 << 20) }

// rssBytes reads the resident set from /proc/self/statm.
func rssBytes() int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.ParseInt(f[1], 10, 64)
	return n * int64(os.Getpagesize())
}

// engineMemory returns what the engine reports of its own memory, for
// the probe (Eventide only).
func engineMemory(e engine) func() string {
	ev, ok := e.(*eventideEngine)
	if !ok {
		return nil
	}
	return func() string {
		m := ev.db.Metrics()
		return fmt.Sprintf("  %-45s %8.1f\n  %-45s %8.1f\n  %-45s %8d\n  %-45s %8.1f\n  %-45s %8.2f\n",
			"eventide memtable bytes (all)", mib(m.MemtableBytes),
			"eventide memtable mapped bytes", mib(m.MemtableMappedBytes),
			"eventide frozen memtables", m.FrozenMemtables,
			"eventide block cache bytes", mib(m.BlockCacheBytes),
			"eventide pinned index page bytes", mib(m.BlockCachePinnedIndexBytes))
	}
}
