package storage

import "runtime"

// runAtCompactionPriority runs fn, the CPU-heavy part of a background
// compaction (merging the inputs and writing the outputs), on an OS thread
// of its own whose scheduling priority is lowered by
// Options.CompactionNice, and returns fn's error. With CompactionNice 0,
// or where threads have no priority of their own, fn runs on the calling
// goroutine.
//
// Why: a compaction is CPU-bound for its whole length (a 26 MB one takes
// about half a second of one core). On a small host it takes that CPU from
// the foreground work sharing the process, the embedded NATS server's
// acknowledgements and the HTTP queries, whose tails then wait for a core
// (BENCHMARKS.md, "what the all-in-one's latency tails ... are made of").
// At a lower priority the kernel gives the compaction what the foreground
// leaves, as RocksDB's low-priority thread pool does; it still gets every
// idle cycle, so it keeps up unless the host is saturated, and then the
// write stall is the back-pressure, as without it.
//
// Invariants: fn takes db.mu only for short sections (a file number), never
// across I/O, so a preempted low-priority thread cannot hold up readers
// for long; the manifest edit that installs the outputs runs after fn, on
// the caller's normal-priority goroutine. The thread is never unlocked:
// when its goroutine returns it exits (or, if it is the process's main
// thread, the runtime parks it for good), so no other goroutine ever runs
// at the lowered priority (an unprivileged process cannot raise it back).
func (db *DB) runAtCompactionPriority(fn func() error) error {
	nice := db.opts.CompactionNice
	if nice <= 0 || !threadNiceSupported {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Not unlocked: the thread exits with this goroutine.
		if err := lowerThreadPriority(nice); err != nil {
			db.opts.Logger.Warn("compaction thread priority not lowered", "nice", nice, "err", err)
		}
		if db.compactionThreadHook != nil {
			db.compactionThreadHook()
		}
		done <- fn()
	}()
	return <-done
}
