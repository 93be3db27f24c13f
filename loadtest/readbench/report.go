package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Targets of issue 3.
const (
	targetLatestP99      = time.Millisecond
	targetScanRowsPerSec = 1_000_000
)

// memory is the process's memory after the query phase.
type memory struct {
	peakRSSKiB, rssKiB               int64 // VmHWM and VmRSS; -1 if unknown
	heapAlloc, heapInuse, goSysBytes uint64
	// liveHeapBefore is the Go heap right after the GC that precedes the
	// queries: what the store keeps live.
	liveHeapBefore uint64
}

func readMemory() memory {
	m := memory{peakRSSKiB: -1, rssKiB: -1}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.heapAlloc, m.heapInuse, m.goSysBytes = ms.HeapAlloc, ms.HeapInuse, ms.Sys
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return m
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch name {
		case "VmHWM":
			m.peakRSSKiB = parseKiB(value)
		case "VmRSS":
			m.rssKiB = parseKiB(value)
		}
	}
	return m
}

// parseKiB parses a /proc "   1234 kB" value.
func parseKiB(s string) int64 {
	n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(s), " kB"), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// machine describes the host: CPUs, model, memory.
func machine() string {
	model, memTotal := "unknown CPU", ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if name, value, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "model name" {
				model = strings.TrimSpace(value)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if name, value, ok := strings.Cut(line, ":"); ok && name == "MemTotal" {
				memTotal = fmt.Sprintf(", %.1f GiB RAM", float64(parseKiB(value))/(1<<20))
				break
			}
		}
	}
	return fmt.Sprintf("%d CPUs (GOMAXPROCS %d), %s%s; %s %s/%s",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), model, memTotal, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// percentile is the nearest-rank percentile p (0..100) of d.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

func printReport(w io.Writer, cfg config, command string, res *results) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("\n## readbench %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	p("Command: `%s`\n\n", command)
	p("Machine: %s\n\n", machine())
	p("Store: %s events, %d types x %d hours before %s (%d partitions), batches of %d, 7-day TTL, seed %d; %.1f bytes/event on disk after flush + full compaction.\n\n",
		commas(int64(cfg.events)), cfg.types, cfg.hours, benchNow.Format(time.RFC3339), cfg.types*cfg.hours, cfg.batch, cfg.seed, float64(res.diskBytes)/float64(cfg.events))

	latestP99 := percentile(res.latest, 99)
	rowsPerSec := float64(res.scanRows) / res.scanTime.Seconds()
	p("| metric | value | target | verdict |\n|---|---|---|---|\n")
	p("| latest-100 (last 24 h, desc), %d queries: p50 | %s | | |\n", len(res.latest), micros(percentile(res.latest, 50)))
	p("| latest-100 p90 | %s | | |\n", micros(percentile(res.latest, 90)))
	p("| latest-100 p99 | %s | <= %s | %s |\n", micros(latestP99), micros(targetLatestP99), verdict(latestP99 <= targetLatestP99))
	p("| latest-100 max | %s | | |\n", micros(percentile(res.latest, 100)))
	p("| hour scan (all events of one type in one hour, %s, pages of %d), %d scans: rows/s | %s | >= %s | %s |\n",
		cfg.scanOrder, cfg.pageLimit, len(res.scans), commas(int64(rowsPerSec)), commas(targetScanRowsPerSec), verdict(rowsPerSec >= targetScanRowsPerSec))
	p("| hour scan rows (total / mean / max per hour), pages | %s / %s / %s, %d pages | | |\n",
		commas(res.scanRows), commas(res.scanRows/int64(len(res.scans))), commas(int64(res.scanMaxRow)), res.scanPages)
	p("| hour scan latency per hour: p50 / p99 / max | %s / %s / %s | | |\n",
		micros(percentile(res.scans, 50)), micros(percentile(res.scans, 99)), micros(percentile(res.scans, 100)))
	p("| query phase: wall time, GCs, GC pause total | %s, %d, %s | | |\n",
		res.queryPhase.Round(time.Millisecond), res.gcCount, res.gcPause.Round(time.Microsecond))
	if res.load.reused {
		p("| load | store reused from an earlier run (-dir) | | |\n")
	} else {
		p("| load, %s: events/s | %s (%s) | | |\n", res.load.walMode, commas(int64(res.load.eventsPerSec)), res.load.loadTime.Round(time.Millisecond))
		p("| flush, then full compaction | %s, %s | | |\n", res.load.flushTime.Round(time.Millisecond), res.load.compactTime.Round(time.Millisecond))
	}
	peakWhat := "load included"
	if res.load.reused {
		peakWhat = "no load: store reused"
	}
	p("| peak RSS of the process (VmHWM, %s) | %s | | |\n", peakWhat, mib(res.mem.peakRSSKiB*1024))
	p("| RSS after the queries (VmRSS) | %s | | |\n", mib(res.mem.rssKiB*1024))
	p("| Go heap live before the queries (after runtime.GC) | %s | | |\n", mib(int64(res.mem.liveHeapBefore)))
	p("| Go heap after the queries: alloc / in use / runtime total | %s / %s / %s | | |\n",
		mib(int64(res.mem.heapAlloc)), mib(int64(res.mem.heapInuse)), mib(int64(res.mem.goSysBytes)))
	p("\nChecks: reader.Counts over the whole span = %s events; every latest-100 returned 100 events of its type, newest first, inside the window, with a next page; every hour scan's rows matched reader.Counts for its hour.\n\n",
		commas(res.storeEventsCounted))
	p("Traces:\n\n- %s\n- %s\n- %s\n", res.latestTrace, res.scanTrace, res.countsTrace)
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "**missed**"
}

func micros(d time.Duration) string {
	us := float64(d) / float64(time.Microsecond)
	if us < 100 {
		return fmt.Sprintf("%.1f µs", us)
	}
	return commas(int64(us+0.5)) + " µs"
}

func mib(bytes int64) string {
	if bytes < 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.1f MiB", float64(bytes)/(1<<20))
}

// commas formats n with thousands separators.
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
