package main

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"syscall"
	"time"
	"unsafe"
)

// threadClock tells where the wall time of one read on the reading OS
// thread went, so that a slow read can be told apart by cause: on a CPU
// (the read's own work, a GC assist, a page fault), runnable but waiting
// for a CPU (the kernel ran something else: this machine's other load, or
// another thread of this process), or neither (the goroutine parked: a
// GC stop-the-world, a lock, I/O). The reads run on one locked OS thread
// (readInterleaved), so the thread's counters are the read's.
//
// The thread's CPU time is clock_gettime(CLOCK_THREAD_CPUTIME_ID); its
// time runnable on a run queue is the second of the three numbers in
// Linux's /proc/thread-self/schedstat (ns). Where either cannot be read
// its figure is zero.
type threadClock struct {
	f   *os.File
	buf [96]byte
}

// threadSample is one reading of the calling thread's counters.
type threadSample struct {
	onCPU, waiting time.Duration
	// involuntary is the thread's involuntary context switches so far:
	// the kernel took its CPU away (getrusage RUSAGE_THREAD).
	involuntary int64
}

// openThreadClock opens the calling thread's schedstat; the caller must
// hold the thread (runtime.LockOSThread) for as long as it reads it.
func openThreadClock() *threadClock {
	f, err := os.Open("/proc/thread-self/schedstat")
	if err != nil {
		return &threadClock{}
	}
	return &threadClock{f: f}
}

func (c *threadClock) close() {
	if c.f != nil {
		c.f.Close()
	}
}

// rusageThread is Linux's RUSAGE_THREAD and clockThreadCPUTime its
// CLOCK_THREAD_CPUTIME_ID (neither is in package syscall).
const (
	rusageThread       = 1
	clockThreadCPUTime = 3
)

// sample reads the thread's counters. The run-queue wait is read
// nearest the timed read (last in a sample before it, first in one after
// it), then the CPU clock, then the context switches: a wait that falls
// between a sample and the read's own clock is counted as the read's,
// and at a load of 10 on two cores that happens. What the CPU clock
// counts of the sampling and of the process-wide counters read inside
// it, readRound measures (overhead) and takes off.
func (c *threadClock) sample(before bool) threadSample {
	var s threadSample
	if !before {
		s.waiting = c.runQueueWait()
		s.onCPU = threadCPUTime()
	}
	var ru syscall.Rusage
	if syscall.Getrusage(rusageThread, &ru) == nil {
		s.involuntary = ru.Nivcsw
	}
	if before {
		s.onCPU = threadCPUTime()
		s.waiting = c.runQueueWait()
	}
	return s
}

// overhead is the median CPU time, on the thread's clock, of 31 empty
// measurements: a sample, between, a sample; between is what a measured
// read's counters do around it.
func (c *threadClock) overhead(between func()) time.Duration {
	ds := make([]time.Duration, 31)
	for i := range ds {
		s0 := c.sample(true)
		between()
		s1 := c.sample(false)
		ds[i] = s1.onCPU - s0.onCPU
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// runQueueWait is the thread's time runnable without a CPU so far, from
// schedstat (zero where it cannot be read).
func (c *threadClock) runQueueWait() time.Duration {
	if c.f == nil {
		return 0
	}
	n, err := c.f.ReadAt(c.buf[:], 0)
	if n == 0 && err != nil {
		return 0
	}
	_, rest, ok1 := leadingNumber(c.buf[:n])
	waiting, _, ok2 := leadingNumber(rest)
	if !ok1 || !ok2 {
		return 0
	}
	return time.Duration(waiting)
}

// threadCPUTime is the calling thread's CPU time, from clock_gettime
// (zero where that fails). Not from schedstat: the kernel brings a
// running thread's CPU time up to date for this clock, while schedstat's
// first field lags by up to a scheduler tick; schedstat's run-queue wait
// is complete whenever the thread runs.
func threadCPUTime() time.Duration {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}

// leadingNumber parses the decimal number b starts with, after spaces,
// and returns it with the rest of b; it allocates nothing (it runs
// around every measured read).
func leadingNumber(b []byte) (v int64, rest []byte, ok bool) {
	i := 0
	for i < len(b) && b[i] == ' ' {
		i++
	}
	start := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		v = v*10 + int64(b[i]-'0')
		i++
	}
	return v, b[i:], i > start
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// tailBreakdown says what the reads at or above the p99 (the slowest 1%,
// the 10 slowest of 1,000) spent their time on, against every read: the
// shares of wall time on a CPU, waiting for one and parked, and how many
// of them had a GC cycle end or took page faults.
func tailBreakdown(qs []query) string {
	if len(qs) == 0 {
		return "no reads"
	}
	sorted := append([]query(nil), qs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].took < sorted[j].took })
	p99 := (len(sorted)*99+99)/100 - 1
	tail := sorted[p99:]
	shares := func(qs []query) string {
		var took, onCPU, waiting, parked, other time.Duration
		var gcs, faults int
		var involuntary int64
		for i := range qs {
			q := &qs[i]
			took += q.took
			onCPU += q.onCPU
			waiting += q.waiting
			parked += q.parked()
			other += q.otherCPU
			involuntary += q.involuntary
			if q.gcs > 0 {
				gcs++
			}
			if q.faults > 0 {
				faults++
			}
		}
		pct := func(d time.Duration) float64 { return 100 * float64(d) / float64(took) }
		return fmt.Sprintf("%d reads, mean %.1f µs: on a CPU %.0f%%, waiting for a CPU %.0f%%, parked %.0f%%; other threads' CPU %.1f µs per read; %d involuntary switches; %d with a GC cycle ending, %d with page faults",
			len(qs), micros(took)/float64(len(qs)), pct(onCPU), pct(waiting), pct(parked), micros(other)/float64(len(qs)), involuntary, gcs, faults)
	}
	return fmt.Sprintf("p99 %.1f µs; at or above it: %s; all: %s", micros(tail[0].took), shares(tail), shares(sorted))
}
