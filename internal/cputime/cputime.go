// Package cputime reads the CPU time the running process has used (user
// and system, all threads, the garbage collector's included), which the
// repository's benchmarks report per operation: on a shared machine CPU
// per operation moves much less with the neighbours' load than wall time
// does (though it still rises with contention, through cache misses and
// the collector's extra work).
//
// It is one small function, kept in one place so every benchmark measures
// the same thing the same way.
package cputime

import "time"

// Process returns the CPU time (user plus system) the process has used so
// far. On platforms without getrusage it returns an error wrapping
// ErrUnsupported.
func Process() (time.Duration, error) { return process() }

// MustProcess is Process for benchmarks: it calls fatal (b.Fatal) with
// the error if the time cannot be read.
func MustProcess(fatal func(args ...any)) time.Duration {
	d, err := Process()
	if err != nil {
		fatal(err)
	}
	return d
}
