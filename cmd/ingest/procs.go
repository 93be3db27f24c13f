package main

import (
	"runtime"
	"strings"
)

// compactionProcs gives the process one Go P more than the runtime's
// default when background compactions run at a lowered priority
// (--compaction-nice above 0) and GOMAXPROCS is not set, and returns the
// resulting GOMAXPROCS and whether it changed it.
//
// Why: a compaction's merge holds a P while it runs. At a lowered priority
// the kernel sets its thread aside whenever the foreground wants the CPUs,
// and Go cannot hand that P to another goroutine meanwhile; without a
// spare P the rest of the process would then run on one P fewer than it
// has CPUs. With the spare, the foreground keeps as many Ps as CPUs.
func compactionProcs(nice int, lookupEnv func(string) (string, bool)) (int, bool) {
	if nice <= 0 {
		return runtime.GOMAXPROCS(0), false
	}
	if v, ok := lookupEnv("GOMAXPROCS"); ok && strings.TrimSpace(v) != "" {
		return runtime.GOMAXPROCS(0), false
	}
	n := runtime.GOMAXPROCS(0) + 1
	runtime.GOMAXPROCS(n)
	return n, true
}
