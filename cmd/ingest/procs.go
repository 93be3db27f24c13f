package main

import (
	"runtime"
	"strings"
)

// DefaultExtraProcs is --extra-procs' default: one Go P more than the
// runtime's default.
//
// Why: with as many Ps as CPUs, a goroutine made runnable while every P
// is busy (the embedded NATS server's read of a publish, an HTTP query)
// waits in a run queue until a P is free, up to Go's 10 ms preemption
// behind a long-running one (a compaction's merge, a large apply). With a
// spare P it runs at once, and the kernel shares the CPUs among the
// threads in finer slices. Measured on the 2-CPU machine (BENCHMARKS.md,
// "Session 17: a spare P"): issue 12's latest-50 p99 at 38,000 events/s
// 3.3-5.4 ms in twelve runs with the spare P against 4.1-6.7 in nine
// without, and the find-max ramp held 92,812-97,031 events/s in four runs
// against 73,828-88,594 in three, at 5-10% more process CPU (the idle P's
// thread spins looking for work).
const DefaultExtraProcs = 1

// applyExtraProcs sets GOMAXPROCS to the runtime's default plus extra
// unless the GOMAXPROCS environment variable is set, and returns the
// resulting GOMAXPROCS and whether it set it. It starts from the default
// each time, so calling it again (tests run the command in one process)
// does not add up.
func applyExtraProcs(extra int, lookupEnv func(string) (string, bool)) (int, bool) {
	if v, ok := lookupEnv("GOMAXPROCS"); ok && strings.TrimSpace(v) != "" {
		return runtime.GOMAXPROCS(0), false
	}
	runtime.SetDefaultGOMAXPROCS()
	if extra <= 0 {
		return runtime.GOMAXPROCS(0), false
	}
	n := runtime.GOMAXPROCS(0) + extra
	runtime.GOMAXPROCS(n)
	return n, true
}
