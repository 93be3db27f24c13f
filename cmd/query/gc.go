package main

import (
	"runtime/debug"
	"strconv"
	"strings"
)

// DefaultGCPercent is cmd/query's garbage collection target when the
// GOGC environment variable is not set: the heap may grow to five times
// what is live before a collection, against Go's default of twice.
//
// cmd/query is stateless: its live heap is a few MiB (the live tail's
// replay buffer, at most 32 MiB, is the most of it) while every request
// allocates tens of KiB (the reply NATS copies in, the decoded rows, the
// page). At 100 a collection ran every few hundred requests; 400 spends
// about a sixth less CPU per latest-50 request (BENCHMARKS.md, "Issue 12:
// latest-50 through cmd/query at 2,000 requests/s, session s8-query")
// for a peak heap about five times the live one. GOGC, when set, wins
// (GOGC=100 restores Go's default, GOGC=off disables collection), as
// does GOMEMLIMIT for a memory bound.
const DefaultGCPercent = 400

// applyGCPercent sets DefaultGCPercent unless GOGC is set, and says which
// setting applies, for the start-up log: "400" or "GOGC=<value>".
func applyGCPercent(lookupEnv func(string) (string, bool)) string {
	if v, ok := lookupEnv("GOGC"); ok && strings.TrimSpace(v) != "" {
		return "GOGC=" + v
	}
	debug.SetGCPercent(DefaultGCPercent)
	return strconv.Itoa(DefaultGCPercent)
}
