package main

import (
	"strconv"
	"strings"
)

// SmallHostCPUs is the most CPUs (Go's GOMAXPROCS default: the host's,
// or its CPU limit) at which cmd/query runs on one P unless GOMAXPROCS is
// set.
//
// Such a host runs cmd/query beside the NATS server and the storage nodes
// (the split deployment on a small machine). There a request's work is a
// chain of short steps in several goroutines (the HTTP read, the NATS
// request, the flusher's write, the reply's read, the HTTP write), and
// with a second P each hand-off woke another thread, which spun looking
// for work and went back to sleep: CPU the other processes needed. On one
// P cmd/query spent 15-16% less CPU per latest-50 request (two runs of
// base and one-P deployments side by side, 2 CPUs shared with NATS, two
// storage nodes and the harness: BENCHMARKS.md, "Issue 12 ... session
// s9-query"); at the 130-160 µs each took, one CPU covers about 6,000 such
// requests a second (derived from that, not a measured ceiling).
// On larger hosts the runtime's default stands. GOMAXPROCS, when set,
// wins (GOMAXPROCS=2 gives a small host's cmd/query both CPUs).
const SmallHostCPUs = 2

// applyMaxProcs sets one P on a small host unless GOMAXPROCS is set, and
// says which setting applies, for the start-up log. procs is
// runtime.GOMAXPROCS.
func applyMaxProcs(lookupEnv func(string) (string, bool), procs func(int) int) string {
	if v, ok := lookupEnv("GOMAXPROCS"); ok && strings.TrimSpace(v) != "" {
		return "GOMAXPROCS=" + v
	}
	n := procs(0)
	if n > SmallHostCPUs || n <= 1 {
		return strconv.Itoa(n)
	}
	procs(1)
	return "1 (" + strconv.Itoa(n) + " CPUs: a small host)"
}
