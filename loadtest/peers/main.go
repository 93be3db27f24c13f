// Command peers measures Eventide's storage engine against Pebble,
// goleveldb and Badger on the same time-series workload, in one run, so the figures
// can be quoted as ratios. It lives in its own module so the main module
// never depends on its peers.
//
// Workload (issue 2): N events over 48 hourly buckets x 20 event types
// (960 partitions), TimeUUID clustering in roughly time order, ~200-byte
// JSON values, batches of 1,000 with one sync per batch. Phases (-phases):
//
//  1. latest: ingest (events/s, peak RSS of the engine's own process),
//     flush + full compaction (on-disk bytes per event), then "latest 50" of a
//     random partition: p50/p99 latency; then a 10% window slice: the
//     events of 6 minutes of a random partition's hour, at a random
//     offset, read forward (p50/p99, rows/s over the summed query time).
//  2. expiry: a second store where the oldest 90% of every partition has
//     expired by TTL (the peers: the same keys removed by point deletes),
//     read every live cell of a random partition before any compaction
//     (goleveldb cannot turn its compactions off). -expiry-rounds rounds
//     of -queries queries (10 x 1,000 by default), every engine's store
//     closed and reopened (compactions still off) between two rounds, so
//     that each round starts with an empty block cache as the first
//     does: the p99 is the 100th slowest of 10,000 reads; the first
//     round's p50 and p99 alone (the phase's measure before session 17)
//     are reported beside it. Eventide's and Pebble's table files are the
//     same after the rounds as before (reported); goleveldb and Badger
//     write their memtables to a table when they reopen, so their later
//     rounds read that table instead of the memtable.
//  3. delete (issue 15): a store per delete kind where, after ingest, the
//     oldest 90% of every partition is deleted (Eventide: cell deletes in
//     one store, row deletes in another; the peers: point deletes, one
//     store serving both comparisons), the clock passes gc_grace so
//     purging is allowed, memtables are flushed, and writes stop. Every
//     live cell of random partitions is read after background compaction
//     alone had -delete-settle (60 s), then after a manual compaction;
//     on-disk bytes both times. -delete-strategy picks Eventide's
//     compaction strategy for these stores. Eventide's two stores are
//     built side by side (each batch ingested, then deleted, in both), so
//     they settle over the same 60 s, and read side by side: each query
//     reads its partition from the cell-deleted store and then the
//     row-deleted one, or the other way round (alternating), so both
//     meet the same load from the rest of the machine. Each of their
//     read passes is -delete-rounds rounds of -queries queries (10 x
//     1,000 by default), both stores closed and reopened between two
//     rounds, so that each round starts with empty block caches, as a
//     single round did: the p99 is then the 100th slowest of 10,000
//     reads, not the 10th of 1,000, which a few preemptions of this
//     process decided. The process collects its garbage after each
//     reopening (a closed Eventide store's block cache is unmapped once
//     a collection finds it unreachable); Eventide's two stores are open
//     at once, so its peak RSS over all phases includes both when this
//     phase runs. On-disk bytes are measured after a pass's first round
//     (each reopening adds an empty WAL segment, 4 KiB on disk, until
//     the next flush: 2.2 MiB after the manual compaction where one
//     round measured 2.1). A peer's one store is read in one round of
//     -queries: reopening Pebble changes what it holds.
//
// Memory: each engine's defaults, or -equal-memory (64 MiB memtable and
// 256 MiB block cache for every engine), or -memtable / -*-cache. Besides
// the peak RSS after ingest, the report gives each engine's process peak
// RSS over every phase it ran (the read phases' caches included:
// Eventide's block cache is faulted in whole at its first block, see
// storage.Options.LazyBlockCacheMemory).
//
// Each engine runs in a process of its own (process.go): in one process
// the engines would share one Go heap, and whatever an engine run earlier
// leaves live slows the later ones' garbage collection (measured: a 1.6x
// swing of Pebble's ingest rate). -same-process runs them all in this one.
//
// Run from this directory: go run . -events 2000000
//
// To study the read phases: -dir D -reuse keeps the stores of an earlier
// run with the same workload flags and reruns only the reads;
// -readprofile P writes a CPU profile of each read phase alone
// (P-<engine>-<phase>.pprof; one profile for the delete phase's stores
// read side by side, P-<engine>-<phase>+<phase>.pprof); -slowest N prints
// the N slowest queries of each read phase with the engine's trace of
// each, and Eventide's SSTables by window before the delete phase's
// background-only reads, and with -thread-split each read's time by where
// it went (below).
// With -thread-split (off by default: it locks the reading goroutine to
// one OS thread, which an application's reads are not) a run prints
// (stderr) what the reads at or above each read phase's p99 spent their
// time on, against all its reads (threadstat.go):
// on a CPU, runnable but waiting for one (the machine's other load), or
// parked (a GC stop-the-world, a lock, I/O), with the CPU the process's
// other threads used meanwhile. Every run splits each read phase's latencies
// into cold queries (the first of a partition in that phase, or in the
// delete phase's round, which find none of its blocks cached) and warm
// ones, and
// counts the minor page faults per query: memory touched for the first
// time (a filling block cache's buffers), which a cold read pays for.
//
// To study the ingest: -ingestprofile P writes CPU, mutex and block
// profiles of the latest phase's ingest loop alone (P-<engine>-ingest-
// {cpu,mutex,block}.pprof) and prints Eventide's metrics after it;
// -ingesttrace P writes a Go execution trace of it (P-<engine>-
// ingest.trace: where the loop's goroutine waits, and for what);
// -eventide-log prints each of Eventide's flushes and compactions.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/eventide/eventide/storage"
)

type config struct {
	events, types, hours, batch, queries int
	dir                                  string
	seed                                 uint64
	reuse                                bool
	// sameProcess: every engine runs in this process (-same-process, or
	// a single engine); otherwise each in a child process of its own.
	sameProcess  bool
	memBreakdown bool
	readProfile  string
	// ingestProfile is -ingestprofile's prefix: CPU, mutex and block
	// profiles of the latest phase's ingest loop alone.
	ingestProfile string
	// ingestTrace is -ingesttrace's prefix: a Go execution trace of the
	// latest phase's ingest loop alone.
	ingestTrace string
	slowest     int
	// threadSplit runs the reads on one locked OS thread and splits each
	// read's time by the thread's counters (threadstat.go).
	threadSplit bool
	mem         memoryConfig
	phases      map[string]bool
	// deleteSettle is how long the delete phase leaves background
	// compaction to work after the deletes before it reads.
	deleteSettle time.Duration
	// expiryRounds is how many rounds of cfg.queries queries the expiry
	// phase runs, its store closed and reopened between two.
	expiryRounds int
	// deleteRounds is how many rounds of cfg.queries queries each delete
	// read pass runs, the stores closed and reopened between two rounds
	// (so every round starts with empty block caches, as the first does).
	deleteRounds int
	// deleteStrategy is Eventide's compaction strategy in the delete
	// phase (time_window, as the other phases, or size_tiered).
	deleteStrategy string
	// deleteTombstoneIntervalSeconds is the delete phase's Eventide
	// TombstoneCompactionIntervalSeconds.
	deleteTombstoneIntervalSeconds int64
}

// memoryConfig is the memory each engine may use; zero means the
// engine's default.
type memoryConfig struct {
	memtableBytes                                             int64
	eventideCacheBytes, pebbleCacheBytes, goleveldbCacheBytes int64
	badgerCacheBytes                                          int64
	// eventideBlockSize is Eventide's BlockSize (0: its default).
	eventideBlockSize int
	// eventideDictionary is Eventide's SSTableDictionary.
	eventideDictionary bool
	// eventideLog sends Eventide's log (flushes, compactions, stalls;
	// debug level) to stderr.
	eventideLog bool
}

// Equal-memory mode (-equal-memory): every engine gets this memtable and
// this block cache.
const (
	equalMemtableBytes = 64 << 20
	equalCacheBytes    = 256 << 20
)

// engine is what each store under test implements.
type engine interface {
	name() string
	// ingest writes batch b of events (ttlFor gives each event's TTL in
	// seconds relative to its time, 0 = none; deletes name events to
	// remove instead, for the expiry phase).
	ingest(events []event, ttls []int32) error
	// expire makes the expiry phase's doomed events disappear the
	// engine's way: Eventide's TTLs already did, the peers delete them.
	expire(events []event) error
	// deleteEvents deletes each event's data cell; deleteRows deletes each
	// event's row (the same for the key-value peers: an event is a key).
	deleteEvents(events []event) error
	deleteRows(events []event) error
	// compactedBytes is a counter that moves while compactions run.
	compactedBytes() (int64, error)
	flush() error
	flushAndCompact() error
	latest(partition string, n int) (int, error)
	all(partition string) (int, error)
	// window reads the partition's events whose encoded TimeUUID lies in
	// [lo, hi) (16-byte encodings), in the engine's storage order.
	window(partition string, lo, hi []byte) (int, error)
	diskBytes() (int64, error)
	close() error
}

// tracer is implemented by engines that can say what their last read
// touched (blocks, cache hits, SSTables), for the -slowest report.
type tracer interface {
	lastTrace() string
}

func main() {
	var cfg config
	flag.IntVar(&cfg.events, "events", 2_000_000, "events to ingest")
	flag.IntVar(&cfg.types, "types", 20, "event types")
	flag.IntVar(&cfg.hours, "hours", 48, "hourly buckets")
	flag.IntVar(&cfg.batch, "batch", 1000, "events per batch (one sync each)")
	flag.IntVar(&cfg.queries, "queries", 2000, "queries per read phase")
	flag.StringVar(&cfg.dir, "dir", "", "work directory (default: a new temporary directory, removed after)")
	flag.Uint64Var(&cfg.seed, "seed", 1, "workload seed")
	only := flag.String("engines", "eventide,pebble,goleveldb,badger", "engines to run, comma-separated")
	phases := flag.String("phases", "latest,expiry,delete", "phases to run, comma-separated (latest includes ingest and its peak RSS)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.BoolVar(&cfg.reuse, "reuse", false, "with -dir: reuse the stores an earlier run with the same workload flags left there, and run only the read phases")
	flag.StringVar(&cfg.readProfile, "readprofile", "", "write a CPU profile of each read phase alone to PREFIX-<engine>-<phase>.pprof, and allocation profiles before and after it to PREFIX-<engine>-<phase>-allocs-{before,after}.pprof")
	flag.BoolVar(&cfg.memBreakdown, "membreakdown", false, "print the runtime's memory classes (and Eventide's memtable and cache bytes) at the peak RSS of each ingest")
	flag.StringVar(&cfg.ingestProfile, "ingestprofile", "", "write CPU, mutex and block profiles of the latest phase's ingest loop alone (not its flush and compaction) to PREFIX-<engine>-ingest-{cpu,mutex,block}.pprof")
	flag.StringVar(&cfg.ingestTrace, "ingesttrace", "", "write a Go execution trace (runtime/trace) of the latest phase's ingest loop alone to PREFIX-<engine>-ingest.trace; read where the loop waits with go tool trace -pprof=sync|syscall|sched")
	flag.BoolVar(&cfg.threadSplit, "thread-split", false, "run each read phase on one locked OS thread and split every read's time into on a CPU, waiting for a CPU and parked (printed for the reads at or above each phase's p99, with -slowest per read, and as the 'time minus its wait for a CPU' rows); off by default, so that the engines' reads run as an application's would")
	flag.IntVar(&cfg.slowest, "slowest", 0, "print the N slowest queries of each read phase, with the engine's trace (and, before the delete phase's background-only reads, Eventide's SSTables by time window)")
	eventideBlockKiB := flag.Int("eventide-block-size", 0, "Eventide's SSTable block size in KiB (0: storage.DefaultOptions)")
	eventideDictionary := flag.Bool("eventide-dictionary", false, "Eventide's SSTables compressed against a per-file zstd dictionary in 16 KiB blocks (storage.Options.SSTableDictionary)")
	eventideLog := flag.Bool("eventide-log", false, "print Eventide's log (each flush, compaction and stall) to stderr")
	eventideCacheMiB := flag.Int64("eventide-cache", 0, "Eventide's block cache in MiB (0: storage.DefaultOptions)")
	pebbleCacheMiB := flag.Int64("pebble-cache", 0, "Pebble's block cache in MiB (0: Pebble's default, 8 MiB)")
	goleveldbCacheMiB := flag.Int64("goleveldb-cache", 0, "goleveldb's block cache in MiB (0: goleveldb's default, 8 MiB)")
	badgerCacheMiB := flag.Int64("badger-cache", 0, "Badger's block cache in MiB (0: Badger's default, 256 MiB)")
	memtableMiB := flag.Int64("memtable", 0, "every engine's memtable in MiB (0: each engine's default)")
	equalMemory := flag.Bool("equal-memory", false, "give every engine a 64 MiB memtable and a 256 MiB block cache (overrides -memtable and the -*-cache flags)")
	flag.DurationVar(&cfg.deleteSettle, "delete-settle", 60*time.Second, "delete phase: how long background compaction works after the deletes before the reads")
	flag.IntVar(&cfg.expiryRounds, "expiry-rounds", defaultExpiryRounds, "expiry phase: rounds of -queries queries, the store (every engine's) closed and reopened between two rounds, so that each starts with an empty block cache as the first does; the p99 is over every round's reads, and the first round's alone is reported too")
	flag.IntVar(&cfg.deleteRounds, "delete-rounds", defaultDeleteRounds, "delete phase: rounds of -queries queries in each read pass of Eventide's stores, both closed and reopened between two rounds (empty block caches, as in the first); each query reads its partition from the cell- and the row-deleted store, in turn. A peer's store is read in one round")
	flag.Int64Var(&cfg.deleteTombstoneIntervalSeconds, "delete-tombstone-interval", 0, "delete phase: Eventide's TombstoneCompactionIntervalSeconds (storage's default is 86400; the phase's last flush is new by the engine clock)")
	flag.StringVar(&cfg.deleteStrategy, "delete-strategy", "time_window", "delete phase: Eventide's compaction strategy (time_window or size_tiered)")
	flag.BoolVar(&cfg.sameProcess, "same-process", false, "run every engine in this process, one after another, instead of each in its own (they then share one Go heap, and peak RSS is process-wide)")
	resultFile := flag.String("result-file", "", "internal: run the one engine of -engines and write its result to this file as JSON (how each engine runs in its own process)")
	flag.Parse()
	cfg.mem = memoryConfig{memtableBytes: *memtableMiB << 20, eventideCacheBytes: *eventideCacheMiB << 20,
		pebbleCacheBytes: *pebbleCacheMiB << 20, goleveldbCacheBytes: *goleveldbCacheMiB << 20, badgerCacheBytes: *badgerCacheMiB << 20}
	if *equalMemory {
		cfg.mem = memoryConfig{memtableBytes: equalMemtableBytes, eventideCacheBytes: equalCacheBytes,
			pebbleCacheBytes: equalCacheBytes, goleveldbCacheBytes: equalCacheBytes, badgerCacheBytes: equalCacheBytes}
	}
	if cfg.expiryRounds < 1 {
		fatal(fmt.Errorf("-expiry-rounds must be at least 1, not %d", cfg.expiryRounds))
	}
	if cfg.deleteRounds < 1 {
		fatal(fmt.Errorf("-delete-rounds must be at least 1, not %d", cfg.deleteRounds))
	}
	cfg.mem.eventideBlockSize = *eventideBlockKiB << 10
	cfg.mem.eventideDictionary = *eventideDictionary
	cfg.mem.eventideLog = *eventideLog
	cfg.phases = map[string]bool{}
	for _, p := range splitComma(*phases) {
		if p != "latest" && p != "expiry" && p != "delete" {
			fatal(fmt.Errorf("unknown phase %q (use latest, expiry, delete)", p))
		}
		cfg.phases[p] = true
	}
	if cfg.reuse && cfg.dir == "" {
		fatal(fmt.Errorf("-reuse needs -dir"))
	}
	names := splitComma(*only)
	// With several engines and no -same-process, this process only
	// starts one child per engine (process.go) and profiles nothing itself.
	inChildren := len(names) > 1 && !cfg.sameProcess && *resultFile == ""
	if *cpuProfile != "" && !inChildren {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	if cfg.dir == "" {
		d, err := os.MkdirTemp("", "eventide-peers-")
		if err != nil {
			fatal(err)
		}
		defer os.RemoveAll(d)
		cfg.dir = d
	}
	if *resultFile != "" {
		if len(names) != 1 {
			fatal(fmt.Errorf("-result-file needs exactly one engine in -engines, not %q", *only))
		}
		r, err := runEngine(names[0], cfg)
		if err != nil {
			fatal(fmt.Errorf("%s: %w", names[0], err))
		}
		if err := writeResult(*resultFile, r); err != nil {
			fatal(fmt.Errorf("%s: cannot write its result: %w", names[0], err))
		}
		return
	}
	results := map[string]*result{}
	for _, name := range names {
		var r *result
		var err error
		if inChildren {
			r, err = runInChild(name, cfg, *cpuProfile)
		} else {
			r, err = runEngine(name, cfg)
		}
		if err != nil {
			fatal(fmt.Errorf("%s: %w", name, err))
		}
		results[name] = r
	}
	cfg.sameProcess = !inChildren
	printResults(cfg, names, results)
	if err := compareRows(results); err != nil {
		fatal(err)
	}
}

// compareRows checks that every engine returned the same rows: all read
// the same partitions in the same order, so a different count means one
// engine returned wrong data and its latencies mean nothing.
func compareRows(rs map[string]*result) error {
	e := rs["eventide"]
	if e == nil {
		return nil
	}
	// Eventide's two delete stores hold the same live cells, and are
	// read on the same partitions.
	if c, r := e.deleted["cell"], e.deleted["row"]; c != nil && r != nil && (c.bgCells != r.bgCells || c.manualCells != r.manualCells) {
		return fmt.Errorf("eventide's delete stores disagree: reads returned %d/%d live cells from the cell-deleted store and %d/%d from the row-deleted one", c.bgCells, c.manualCells, r.bgCells, r.manualCells)
	}
	for name, p := range rs {
		if e.latestRows != p.latestRows {
			return fmt.Errorf("engines disagree: latest-50 queries returned %d rows from eventide and %d from %s", e.latestRows, p.latestRows, name)
		}
		if e.windowRows != p.windowRows {
			return fmt.Errorf("engines disagree: window queries returned %d rows from eventide and %d from %s", e.windowRows, p.windowRows, name)
		}
		if e.expiredCells != p.expiredCells {
			return fmt.Errorf("engines disagree: expiry queries returned %d live cells from eventide and %d from %s", e.expiredCells, p.expiredCells, name)
		}
		for mode, d := range e.deleted {
			pd := p.deleted[mode]
			if pd == nil {
				continue
			}
			if d.bgCells != pd.bgCells || d.manualCells != pd.manualCells {
				return fmt.Errorf("engines disagree: %s-deleted reads returned %d/%d live cells from eventide and %d/%d from %s", mode, d.bgCells, d.manualCells, pd.bgCells, pd.manualCells, name)
			}
		}
	}
	return nil
}

type result struct {
	built           bool // false when -reuse found the stores ready
	ingestSeconds   float64
	eventsPerSecond float64
	peakRSSBytes    int64
	// finalPeakRSSBytes is the process's peak RSS when all its phases
	// have run: the read phases' memory too (a cache filled by the
	// reads, or Eventide's prefaulted block cache).
	finalPeakRSSBytes        int64
	bytesPerEvent            float64
	latest, expired          phaseResult
	latestRows, expiredCells int
	// expiredTablesKept says the expiry store's table files (names and
	// sizes) were the same after its last read round as before its first:
	// the reopenings between rounds changed nothing the reads see.
	expiredTablesKept bool
	window            phaseResult
	windowRows        int
	// deleted holds the delete phase by mode, "cell" and "row" (the
	// key-value peers run one store of point deletes, filed under both).
	deleted map[string]*deleteResult
}

// deleteResult is one store of the delete phase.
type deleteResult struct {
	deletesPerSecond float64
	// bg: read after background compaction alone had deleteSettle;
	// manual: after a manual full compaction.
	bg, manual           phaseResult
	bgBytes, manualBytes int64
	bgCells, manualCells int
	bgCompactedBytes     int64
	// bgReadCompactedBytes is what compactions wrote while the
	// background-only reads ran (0 when background compaction had
	// finished within deleteSettle).
	bgReadCompactedBytes int64
}

// phaseResult is one read phase's latencies, overall and split by whether
// the query was the first of its partition in the phase.
type phaseResult struct {
	p50, p99         time.Duration
	coldP50, coldP99 time.Duration
	warmP50, warmP99 time.Duration
	cold, warm       int
	// firstRoundP50 and firstRoundP99 are the first round's alone: the
	// phase's figures when it was one round of -queries.
	firstRoundP50, firstRoundP99 time.Duration
	// unwaitedP99 is the p99 of each read's wall time minus its run-queue
	// wait (threadClock): the read's own time, which the machine's other
	// load moves far less than its latency. A diagnostic, not a target.
	unwaitedP99 time.Duration
	sum         time.Duration // of every query's time
	// allocBytes and gcCycles are the Go heap bytes allocated and the GC
	// cycles started during the phase's reads (process-wide counters,
	// read around each read).
	allocBytes, gcCycles uint64
	// minorFaults are the page faults without I/O the process took during
	// the phase's reads: memory it touched for the first time (a filling block
	// cache's buffers, a growing heap), which on the 2-core VM cost 1-4 µs
	// a page (BENCHMARKS.md, s11-read).
	minorFaults uint64
	// cpu is the process's CPU time (user+system, every thread: the
	// engine's background work and the Go runtime's included) while the
	// phase's reads ran, summed over the reads: with each engine in its
	// own process and nothing else running in it, the engine's CPU per
	// query, which the machine's other load moves less than latency.
	cpu time.Duration
}

// processUsage is the process's minor page faults and CPU time
// (user+system) so far (zero where getrusage fails).
func processUsage() (minorFaults uint64, cpu time.Duration) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, 0
	}
	return uint64(ru.Minflt), time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// gcCounters reads the heap bytes allocated and GC cycles so far.
func gcCounters() (allocBytes, cycles uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// query is one measured read.
type query struct {
	index  int    // position in the phase
	gcs    uint32 // GC cycles completed while it ran
	faults uint64 // the process's minor page faults while it ran
	took   time.Duration
	// onCPU and waiting are the reading thread's time on a CPU and
	// runnable without one (threadClock; waiting at most took - onCPU,
	// see readRound); took minus both is the time it was parked. otherCPU is the CPU time the process's other
	// threads (GC workers, the engine's background work) used meanwhile.
	onCPU, waiting, otherCPU time.Duration
	// involuntary is how often the kernel took the thread's CPU away.
	involuntary int64
	partition   string
	cold        bool
	trace       string
}

// unwaited is the read's wall time less its wait for a CPU: what it
// took on its own (on a CPU, or parked).
func (q *query) unwaited() time.Duration { return q.took - q.waiting }

// parked is the part of the read's wall time its thread was neither on a
// CPU nor waiting for one.
func (q *query) parked() time.Duration { return max(0, q.took-q.onCPU-q.waiting) }

// readyMarker is created in a store's directory once it is fully built,
// so -reuse never reads a half-built store.
const readyMarker = "peers-ready"

func storeReady(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, readyMarker))
	return err == nil
}

func markReady(dir string) error {
	return os.WriteFile(filepath.Join(dir, readyMarker), nil, 0o644)
}

// readPhase runs cfg.queries reads of random partitions through read and
// measures each, with the CPU profile -readprofile asks for.
func readPhase(cfg config, e engine, gen *generator, phase string, read func(partition string) (int, error)) (phaseResult, int, error) {
	targets := []readTarget{{e: e, phase: phase, read: read}}
	rs, ns, err := readInterleaved(cfg, 1, gen, func(int) ([]readTarget, error) { return targets, nil })
	if err != nil {
		return phaseResult{}, 0, err
	}
	return rs[0], ns[0], nil
}

// readTarget is one store a read phase measures: its engine, the phase's
// name for it (in the -slowest report) and the read it times.
type readTarget struct {
	e     engine
	phase string
	read  func(partition string) (int, error)
}

// readInterleaved runs rounds of cfg.queries reads of random partitions,
// each query reading the same partition from every target in turn, and
// measures each read on its own: the targets are read in the same
// seconds, so a burst of load from elsewhere on the machine lands on all
// of them alike, not on whichever store happened to be read at that time.
// Query q starts at target q mod len(targets), so no target always goes
// first (the first read of a pair may find the CPU's caches colder, or a
// GC cycle just started). startRound gives each round's targets, the
// same stores in the same order every round (reopened, for the delete
// phase); a query is cold when it is the first of its partition in its
// round. It returns each target's latencies over every round and the
// cells or rows its first round returned (the queries a one-round phase
// makes, so that engines read in different numbers of rounds can be
// compared: every round reads the same data). The Go heap bytes, GC cycles and page faults
// of a target are counted around its own reads. With -readprofile, one
// CPU profile covers every target's reads (PREFIX-<engine>-<phase>
// [+<phase>...].pprof; the reopening between rounds too).
func readInterleaved(cfg config, rounds int, gen *generator, startRound func(round int) ([]readTarget, error)) ([]phaseResult, []int, error) {
	clk := &threadClock{off: true}
	if cfg.threadSplit {
		// Every read runs on this one OS thread, so that its counters
		// (threadClock) are the reads'.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		clk = openThreadClock()
		defer clk.close()
	}
	targets, err := startRound(0)
	if err != nil {
		return nil, nil, err
	}
	if cfg.readProfile != "" {
		phases := make([]string, len(targets))
		for i, t := range targets {
			phases[i] = t.phase
		}
		name := fmt.Sprintf("%s-%s-%s", cfg.readProfile, targets[0].e.name(), strings.Join(phases, "+"))
		f, err := os.Create(name + ".pprof")
		if err != nil {
			return nil, nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, nil, fmt.Errorf("cannot profile %s (is -cpuprofile also set?): %w", name, err)
		}
		defer pprof.StopCPUProfile()
		// Allocations of the phase alone: go tool pprof -sample_index
		// alloc_space -base PREFIX-...-allocs-before.pprof ...-after.pprof
		writeAllocs := func(when string) {
			if f, err := os.Create(fmt.Sprintf("%s-allocs-%s.pprof", name, when)); err == nil {
				pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		}
		writeAllocs("before")
		defer writeAllocs("after")
	}
	states := make([]readState, len(targets))
	for i := range states {
		states[i].qs = make([]query, 0, rounds*cfg.queries)
	}
	for round := range rounds {
		if round > 0 {
			// The last round's stores may be closed and dropped now: hold
			// nothing of them, so that a collection can free them.
			targets = nil
			for i := range states {
				states[i].tr = nil
			}
			if targets, err = startRound(round); err != nil {
				return nil, nil, err
			}
		}
		if len(targets) != len(states) {
			return nil, nil, fmt.Errorf("BUG: round %d has %d read targets, the first had %d", round, len(targets), len(states))
		}
		for i, t := range targets {
			states[i].tr, _ = t.e.(tracer)
		}
		if err := readRound(cfg, round, gen, targets, states, clk); err != nil {
			return nil, nil, err
		}
		if round == 0 {
			for i := range states {
				states[i].firstRoundTotal = states[i].total
			}
		}
	}
	results := make([]phaseResult, len(targets))
	totals := make([]int, len(targets))
	for i, t := range targets {
		st := &states[i]
		var all, cold, warm, first, unwaited []time.Duration
		var sum time.Duration
		for _, q := range st.qs {
			sum += q.took
			all = append(all, q.took)
			unwaited = append(unwaited, q.unwaited())
			if q.index < cfg.queries {
				first = append(first, q.took)
			}
			if q.cold {
				cold = append(cold, q.took)
			} else {
				warm = append(warm, q.took)
			}
		}
		results[i] = phaseResult{
			p50: percentile(all, 50), p99: percentile(all, 99),
			coldP50: percentile(cold, 50), coldP99: percentile(cold, 99),
			warmP50: percentile(warm, 50), warmP99: percentile(warm, 99),
			firstRoundP50: percentile(first, 50), firstRoundP99: percentile(first, 99), unwaitedP99: percentile(unwaited, 99),
			cold: len(cold), warm: len(warm), sum: sum,
			allocBytes: st.allocBytes, gcCycles: st.gcCycles, minorFaults: st.faults, cpu: st.cpu,
		}
		totals[i] = st.firstRoundTotal
		if cfg.slowest > 0 {
			qs := st.qs
			sort.Slice(qs, func(i, j int) bool { return qs[i].took > qs[j].took })
			fmt.Fprintf(os.Stderr, "%s %s: %d slowest of %d queries (%d cold)\n", t.e.name(), t.phase, min(cfg.slowest, len(qs)), len(qs), len(cold))
			for _, q := range qs[:min(cfg.slowest, len(qs))] {
				kind := "warm"
				if q.cold {
					kind = "cold"
				}
				if !cfg.threadSplit {
					// No thread counters: the process's CPU during the read
					// is all there is (otherCPU, with onCPU zero).
					fmt.Fprintf(os.Stderr, "  %8.1f µs %s #%d (process CPU %.1f µs; %d GCs ended during it, %d page faults) %s %s\n",
						micros(q.took), kind, q.index, micros(q.otherCPU), q.gcs, q.faults, q.partition, q.trace)
					continue
				}
				fmt.Fprintf(os.Stderr, "  %8.1f µs %s #%d (on CPU %.1f, waiting for a CPU %.1f, parked %.1f µs, %d involuntary switches; other threads' CPU %.1f µs; %d GCs ended during it, %d page faults) %s %s\n",
					micros(q.took), kind, q.index, micros(q.onCPU), micros(q.waiting), micros(q.parked()), q.involuntary, micros(q.otherCPU), q.gcs, q.faults, q.partition, q.trace)
			}
		}
		if cfg.threadSplit {
			fmt.Fprintf(os.Stderr, "%s %s: %s\n", t.e.name(), t.phase, tailBreakdown(st.qs))
		}
	}
	return results, totals, nil
}

// readState is what readInterleaved gathers for one target over its
// rounds.
type readState struct {
	qs                           []query
	total, firstRoundTotal       int
	allocBytes, gcCycles, faults uint64
	cpu                          time.Duration
	tr                           tracer
}

// readRound is one round of readInterleaved: cfg.queries queries, each
// reading its partition from every target, into states (by target).
func readRound(cfg config, round int, gen *generator, targets []readTarget, states []readState, clk *threadClock) error {
	seen := map[string]bool{}
	// The thread's counters are read outside the process-wide ones, so
	// that the process CPU per query measures what it did before the
	// per-read split (session 17); what the counters themselves cost on
	// the thread's CPU clock is measured here and taken off each read's.
	overhead := clk.overhead(func() {
		gcCounters()
		processUsage()
		time.Since(time.Now())
		processUsage()
		gcCounters()
	})
	for q := round * cfg.queries; q < (round+1)*cfg.queries; q++ {
		p := gen.randomPartition()
		cold := !seen[p]
		seen[p] = true
		for k := range targets {
			i := (q + k) % len(targets)
			st := &states[i]
			th0 := clk.sample(true)
			alloc0, gcBefore := gcCounters()
			faultsBefore, cpuBefore := processUsage()
			t0 := time.Now()
			n, err := targets[i].read(p)
			if err != nil {
				return fmt.Errorf("%s %s: %w", targets[i].e.name(), targets[i].phase, err)
			}
			took := time.Since(t0)
			faultsAfter, cpuAfter := processUsage()
			alloc1, gcAfter := gcCounters()
			th1 := clk.sample(false)
			faults := faultsAfter - faultsBefore
			st.cpu += cpuAfter - cpuBefore
			st.total += n
			st.allocBytes += alloc1 - alloc0
			st.gcCycles += gcAfter - gcBefore
			st.faults += faults
			qq := query{index: q, gcs: uint32(gcAfter - gcBefore), faults: faults, took: took, partition: p, cold: cold,
				onCPU: max(0, th1.onCPU-th0.onCPU-overhead), involuntary: th1.involuntary - th0.involuntary}
			// The kernel preempts a thread mostly on the way out of a
			// system call, so a wait often falls on the counters' own
			// calls around the read rather than in it; a read is given
			// at most its own time off a CPU as its wait.
			qq.waiting = min(th1.waiting-th0.waiting, max(0, took-qq.onCPU))
			qq.otherCPU = max(0, cpuAfter-cpuBefore-qq.onCPU)
			if cfg.slowest > 0 && st.tr != nil {
				qq.trace = st.tr.lastTrace()
			}
			st.qs = append(st.qs, qq)
		}
	}
	return nil
}

func open(name, dir string, cfg config, clock *benchClock, autoCompact bool) (engine, error) {
	return openWith(name, dir, cfg, clock, autoCompact, storage.TimeWindow, nil)
}

func openWith(name, dir string, cfg config, clock *benchClock, autoCompact bool, strategy storage.CompactionStrategy, eventideTombstoneIntervalSeconds *int64) (engine, error) {
	switch name {
	case "eventide":
		return openEventide(dir, clock, autoCompact, cfg.mem, strategy, eventideTombstoneIntervalSeconds)
	case "pebble":
		return openPebble(dir, autoCompact, cfg.mem)
	case "goleveldb":
		return openGoleveldb(dir, cfg.mem)
	case "badger":
		return openBadger(dir, autoCompact, cfg.mem)
	}
	return nil, fmt.Errorf("unknown engine %q (use eventide, pebble, goleveldb or badger)", name)
}

func runEngine(name string, cfg config) (*result, error) {
	r := &result{built: true}
	clock := &benchClock{}
	if cfg.phases["latest"] {
		if err := runLatest(name, cfg, clock, r); err != nil {
			return nil, err
		}
	}
	if cfg.phases["expiry"] {
		if err := runExpiry(name, cfg, clock, r); err != nil {
			return nil, err
		}
	}
	if cfg.phases["delete"] {
		ds, err := runDelete(name, cfg, clock)
		if err != nil {
			return nil, err
		}
		r.deleted = ds
		if d := ds["point"]; d != nil {
			r.deleted = map[string]*deleteResult{"cell": d, "row": d}
		}
	}
	r.finalPeakRSSBytes = peakRSS()
	return r, nil
}

func runLatest(name string, cfg config, clock *benchClock, r *result) error {
	r.built = false
	gen := newGenerator(cfg)

	// Phase 1 and 2: ingest, flush, full compaction, size, latest-50.
	dir := filepath.Join(cfg.dir, name)
	var e engine
	var err error
	if cfg.reuse && storeReady(dir) {
		fmt.Fprintf(os.Stderr, "%s: reusing %s\n", name, dir)
		// Where ingest left the clock: the last batch's first event.
		clock.set(gen.batch((cfg.events - 1) / cfg.batch)[0].time)
		if e, err = open(name, dir, cfg, clock, true); err != nil {
			return err
		}
	} else {
		if e, err = buildLatest(name, dir, cfg, gen, clock, r); err != nil {
			return err
		}
	}
	if r.latest, r.latestRows, err = readPhase(cfg, e, gen, "latest", func(p string) (int, error) { return e.latest(p, 50) }); err != nil {
		return err
	}
	if r.window, r.windowRows, err = readPhase(cfg, e, newGenerator(cfg), "window", windowReader(cfg, e)); err != nil {
		return err
	}
	return e.close()
}

// windowReader returns the window phase's read: a 6-minute window (10% of
// the partition's hour) at a random offset within the partition's hour,
// the same sequence for every engine.
func windowReader(cfg config, e engine) func(partition string) (int, error) {
	gen := newGenerator(cfg)
	hourOf := map[string]time.Time{}
	for h := 0; h < cfg.hours; h++ {
		for typ := 0; typ < cfg.types; typ++ {
			hourOf[gen.partitionName(h, typ)] = gen.start.Add(time.Duration(h) * time.Hour)
		}
	}
	rng := rand.New(rand.NewPCG(cfg.seed, 7))
	const window = 6 * time.Minute
	return func(p string) (int, error) {
		from := hourOf[p].Add(time.Duration(rng.Int64N(int64(time.Hour - window))))
		return e.window(p, timeBound(from), timeBound(from.Add(window)))
	}
}

// timeBound is the 16-byte encoded TimeUUID that sorts before every
// version 1 TimeUUID of time t or later and after every earlier one: the
// encoding's first 8 bytes (version and timestamp) and zeros.
func timeBound(t time.Time) []byte {
	enc := encodeTimeUUID(newTimeUUID(t, [8]byte{}))
	clear(enc[8:])
	return enc
}

// tableFiles lists the table files under dir (Eventide's, Pebble's and
// Badger's .sst, goleveldb's .ldb), one "name size" a line, sorted.
func tableFiles(dir string) (string, error) {
	var lines []string
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if ext := filepath.Ext(path); !info.IsDir() && (ext == ".sst" || ext == ".ldb") {
			rel, _ := filepath.Rel(dir, path)
			lines = append(lines, fmt.Sprintf("%s %d\n", rel, info.Size()))
		}
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, ""), err
}

func runExpiry(name string, cfg config, clock *benchClock, r *result) error {
	var e engine
	var err error
	defer func() {
		if e != nil {
			e.close()
		}
	}()

	// Phase 4: the oldest 90% of each partition expires. Both engines
	// ingest normally (compacting as they like); then the store is
	// reopened with compactions off, time passes the TTLs (Pebble: the
	// same cells are point-deleted), memtables are flushed, and reads run
	// before any compaction could clean up.
	dir := filepath.Join(cfg.dir, name+"-expiry")
	gen := newGenerator(cfg)
	checkAt := gen.end().Add(time.Hour)
	if cfg.reuse && storeReady(dir) {
		fmt.Fprintf(os.Stderr, "%s: reusing %s\n", name, dir)
		if e, err = open(name, dir, cfg, clock, false); err != nil {
			return err
		}
	} else if e, err = buildExpiry(name, dir, cfg, gen, clock, checkAt); err != nil {
		return err
	}
	clock.set(checkAt)
	tablesBefore, err := tableFiles(dir)
	if err != nil {
		return err
	}
	// expiryRounds rounds of cfg.queries reads, the store closed and
	// reopened (compactions still off) between two, so that every round
	// starts with an empty block cache as the first does; every engine
	// alike.
	rs, cells, err := readInterleaved(cfg, cfg.expiryRounds, gen, func(round int) ([]readTarget, error) {
		if round > 0 {
			if err := e.close(); err != nil {
				return nil, fmt.Errorf("cannot close the expiry store to reopen it: %w", err)
			}
			e = nil
			// Collect before the opening: the closed store goes (an
			// Eventide store's block cache is unmapped when a collection
			// finds it unreachable), and the opening's garbage is left
			// to the collector as the first round's was (its store was
			// opened just before it), rather than collected before the
			// reads as deleteStores does, which would spare later rounds
			// collections the first one may meet. Measured either way:
			// 0-1 collections in 10 rounds' reads (BENCHMARKS.md,
			// session s17-tails).
			runtime.GC()
			if e, err = open(name, dir, cfg, clock, false); err != nil {
				return nil, fmt.Errorf("cannot reopen the expiry store: %w", err)
			}
		}
		return []readTarget{{e: e, phase: "expired", read: e.all}}, nil
	})
	if err != nil {
		return err
	}
	r.expired, r.expiredCells = rs[0], cells[0]
	// The store is read-only and compacts nothing: a reopening must not
	// change its tables, or the rounds would not read the same store.
	tablesAfter, err := tableFiles(dir)
	if err != nil {
		return err
	}
	r.expiredTablesKept = tablesBefore == tablesAfter
	if !r.expiredTablesKept {
		fmt.Fprintf(os.Stderr, "%s expiry store: the reopenings between rounds changed its tables:\nbefore:\n%safter:\n%s", name, tablesBefore, tablesAfter)
	}
	err = e.close()
	e = nil
	return err
}

// runDelete is the delete phase of one engine: Eventide builds a store of
// cell deletes and one of row deletes, a key-value peer one store of point
// deletes ("point"). It returns each store's result by mode.
func runDelete(name string, cfg config, clock *benchClock) (map[string]*deleteResult, error) {
	modes := []string{"point"}
	if name == "eventide" {
		modes = []string{"cell", "row"}
	}
	var stores []deleteStore
	defer func() {
		for _, s := range stores {
			if s.e != nil {
				s.e.close()
			}
		}
	}()
	for _, mode := range modes {
		dir := filepath.Join(cfg.dir, name+"-delete-"+mode)
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		open := func() (engine, error) {
			return openWith(name, dir, cfg, clock, true, storage.CompactionStrategy(cfg.deleteStrategy), &cfg.deleteTombstoneIntervalSeconds)
		}
		e, err := open()
		if err != nil {
			return nil, err
		}
		stores = append(stores, deleteStore{mode: mode, e: e, open: open})
	}
	// Only Eventide's stores are read in rounds: reopening a Pebble store
	// changes what it holds (its on-disk bytes after the manual
	// compaction fell from 15.4 to 3.0 MiB, its p50 from 46-71 to 24-34 µs:
	// BENCHMARKS.md, session s15-delete), so a peer's one store is read
	// in one round of -queries, as before.
	rounds := 1
	if name == "eventide" {
		rounds = cfg.deleteRounds
	}
	ds, err := deleteStores(cfg, clock, stores, rounds)
	if err != nil {
		return nil, err
	}
	out := map[string]*deleteResult{}
	for i, s := range stores {
		out[s.mode] = ds[i]
	}
	var closeErr error
	for _, s := range stores {
		if err := s.e.close(); err != nil && closeErr == nil {
			closeErr = err
		}
	}
	stores = nil
	return out, closeErr
}

// deleteStore is one store of the delete phase: its delete mode ("cell",
// "row", or the peers' "point"), its engine, and how to open it again
// (the read passes reopen it between rounds).
type deleteStore struct {
	mode string
	e    engine
	open func() (engine, error)
}

// reopenDeleteStore closes s's engine and opens it again, adding what its
// compactions wrote since the counter read compactedAt to *compacted (the
// counter starts again at the reopening).
func reopenDeleteStore(s *deleteStore, compacted *int64, compactedAt int64) error {
	now, err := s.e.compactedBytes()
	if err != nil {
		return err
	}
	*compacted += now - compactedAt
	if err := s.e.close(); err != nil {
		return fmt.Errorf("cannot close the %s-deleted store to reopen it: %w", s.mode, err)
	}
	s.e = nil
	if s.e, err = s.open(); err != nil {
		return fmt.Errorf("cannot reopen the %s-deleted store: %w", s.mode, err)
	}
	return nil
}

// defaultExpiryRounds is -expiry-rounds' default: 10,000 reads of each
// engine's store with -queries 1000, whose p99 is the 100th slowest
// (BENCHMARKS.md, session s17-tails: the 10th slowest of 1,000 was a
// read that waited for a CPU most of its time).
const defaultExpiryRounds = 10

// defaultDeleteRounds is -delete-rounds' default: with -queries 1000,
// 10,000 reads of each store in each pass, whose p99 is the 100th slowest
// (BENCHMARKS.md, session s15-delete: the p99 of one round of 1,000 is its
// 10th slowest read, and a few preemptions of the process decide it).
const defaultDeleteRounds = 10

// deleteStores runs the delete phase on stores, all built and read side
// by side: ingest without TTLs (with background compaction), batch by
// batch into every store; then delete the oldest 90% of every partition
// (cell deletes, row deletes or point deletes by mode), batch by batch in
// every store, the store that goes first alternating; move the clock past
// gc_grace so purging is allowed, flush, give background compaction
// cfg.deleteSettle from the end of the deletes (the same instant for
// every store), and read every live cell of random partitions, each
// query's partition from every store in turn (readInterleaved), in rounds
// rounds of cfg.queries, every store reopened between two; then compact
// each store manually and read again the same way. Writes are frozen
// during the reads.
//
// Built and read one after the other, Eventide's cell- and row-deleted
// stores each met the machine's load in their own minutes, and the p99 of
// one mode against the other compared two time slots, not two stores
// (BENCHMARKS.md, session s15-delete). A store's deletes/s counts the
// time its own deletes took plus the time making the deleted events
// took, which every store pays once, as it did when each was built alone.
func deleteStores(cfg config, clock *benchClock, stores []deleteStore, rounds int) ([]*deleteResult, error) {
	ds := make([]*deleteResult, len(stores))
	for i := range ds {
		ds[i] = &deleteResult{}
	}
	gen := newGenerator(cfg)
	what := stores[0].e.name() + " delete-" + stores[0].mode
	for _, s := range stores[1:] {
		what += "," + s.mode
	}
	progress := newProgress(what+" ingest", cfg.events)
	for b := 0; b*cfg.batch < cfg.events; b++ {
		evs := gen.batch(b)
		clock.set(evs[0].time)
		for _, s := range stores {
			if err := s.e.ingest(evs, nil); err != nil {
				return nil, err
			}
		}
		progress.add(len(evs))
	}
	progress.done()
	deleteAt := gen.end().Add(time.Hour)
	clock.set(deleteAt)
	deleted := 0
	var making time.Duration
	deleting := make([]time.Duration, len(stores))
	for b := 0; b*cfg.batch < cfg.events; b++ {
		t0 := time.Now()
		var doomed []event
		for _, ev := range gen.batch(b) {
			if ev.fractionOfHour < 0.9 {
				doomed = append(doomed, ev)
			}
		}
		making += time.Since(t0)
		for k := range stores {
			i := (b + k) % len(stores)
			del := stores[i].e.deleteEvents
			if stores[i].mode == "row" {
				del = stores[i].e.deleteRows
			}
			t0 := time.Now()
			if err := del(doomed); err != nil {
				return nil, err
			}
			deleting[i] += time.Since(t0)
		}
		deleted += len(doomed)
	}
	deletedAt := time.Now()
	for i := range stores {
		ds[i].deletesPerSecond = float64(deleted) / (making + deleting[i]).Seconds()
	}
	// Purging allowed: gc_grace (Eventide's default, 10 days) has passed.
	clock.set(deleteAt.Add(storage.DefaultGCGraceSeconds*time.Second + time.Hour))
	compacted := make([]int64, len(stores))
	for i, s := range stores {
		if err := s.e.flush(); err != nil {
			return nil, err
		}
		var err error
		if compacted[i], err = s.e.compactedBytes(); err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "%s delete-%s: %d deletes at %.0f/s\n", s.e.name(), s.mode, deleted, ds[i].deletesPerSecond)
	}
	fmt.Fprintf(os.Stderr, "%s: background compaction has %s\n", what, cfg.deleteSettle)
	for time.Since(deletedAt) < cfg.deleteSettle {
		time.Sleep(min(250*time.Millisecond, cfg.deleteSettle-time.Since(deletedAt)))
	}
	for i, s := range stores {
		after, err := s.e.compactedBytes()
		if err != nil {
			return nil, err
		}
		ds[i].bgCompactedBytes = after - compacted[i]
		compacted[i] = after
		if lsm, ok := s.e.(interface{ lsmState() string }); ok && cfg.slowest > 0 {
			fmt.Fprintf(os.Stderr, "%s delete-%s before the background-only reads:\n%s", s.e.name(), s.mode, lsm.lsmState())
		}
	}
	// read runs one read pass: rounds rounds, every store
	// reopened before each round but the first. It returns each store's
	// latencies and cells, its on-disk bytes after the first round (as
	// when a pass was one round: a reopening can remove files, such as
	// Pebble's WAL), and what its compactions wrote while the pass ran
	// (a store may also compact on reopening).
	read := func(when string) (rs []phaseResult, cells []int, bytes, compactedDuring []int64, err error) {
		bytes = make([]int64, len(stores))
		compactedDuring = make([]int64, len(stores))
		measureBytes := func() error {
			for i, s := range stores {
				if bytes[i], err = s.e.diskBytes(); err != nil {
					return err
				}
			}
			return nil
		}
		rs, cells, err = readInterleaved(cfg, rounds, newGenerator(cfg), func(round int) ([]readTarget, error) {
			if round == 1 {
				if err := measureBytes(); err != nil {
					return nil, err
				}
			}
			for i := range stores {
				s := &stores[i]
				if round > 0 {
					if err := reopenDeleteStore(s, &compactedDuring[i], compacted[i]); err != nil {
						return nil, err
					}
					// A closed Eventide store's block cache and
					// memtables are unmapped when a collection finds
					// them unreachable: collect now, or each round's
					// stay resident until the heap grows.
					runtime.GC()
				}
				var err error
				if compacted[i], err = s.e.compactedBytes(); err != nil {
					return nil, err
				}
			}
			targets := make([]readTarget, len(stores))
			for i, s := range stores {
				targets[i] = readTarget{e: s.e, phase: "deleted-" + s.mode + "-" + when, read: s.e.all}
			}
			return targets, nil
		})
		if err != nil {
			return nil, nil, nil, nil, err
		}
		if rounds == 1 {
			if err := measureBytes(); err != nil {
				return nil, nil, nil, nil, err
			}
		}
		for i, s := range stores {
			after, err := s.e.compactedBytes()
			if err != nil {
				return nil, nil, nil, nil, err
			}
			compactedDuring[i] += after - compacted[i]
		}
		return rs, cells, bytes, compactedDuring, nil
	}
	bg, bgCells, bgBytes, bgCompacted, err := read("bg")
	if err != nil {
		return nil, err
	}
	for i := range stores {
		ds[i].bg, ds[i].bgCells, ds[i].bgBytes, ds[i].bgReadCompactedBytes = bg[i], bgCells[i], bgBytes[i], bgCompacted[i]
	}
	for _, s := range stores {
		fmt.Fprintf(os.Stderr, "%s delete-%s: manual compaction\n", s.e.name(), s.mode)
		if err := s.e.flushAndCompact(); err != nil {
			return nil, err
		}
	}
	manual, manualCells, manualBytes, _, err := read("manual")
	if err != nil {
		return nil, err
	}
	for i := range stores {
		ds[i].manual, ds[i].manualCells, ds[i].manualBytes = manual[i], manualCells[i], manualBytes[i]
	}
	return ds, nil
}

// buildLatest ingests the workload into a new store, flushes and fully
// compacts it, and returns it open.
func buildLatest(name, dir string, cfg config, gen *generator, clock *benchClock, r *result) (engine, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	e, err := open(name, dir, cfg, clock, true)
	if err != nil {
		return nil, err
	}
	r.built = true
	progress := newProgress(name+" ingest", cfg.events)
	var probe *memProbe
	if cfg.memBreakdown {
		probe = startMemProbe(e)
	}
	stopProfiles, err := startIngestProfiles(cfg.ingestProfile, name)
	if err != nil {
		return nil, err
	}
	stopTrace, err := startIngestTrace(cfg.ingestTrace, name)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	for b := 0; b*cfg.batch < cfg.events; b++ {
		evs := gen.batch(b)
		clock.set(evs[0].time)
		if err := e.ingest(evs, nil); err != nil {
			return nil, err
		}
		progress.add(len(evs))
	}
	r.ingestSeconds = time.Since(start).Seconds()
	if err := stopTrace(); err != nil {
		return nil, err
	}
	if err := stopProfiles(); err != nil {
		return nil, err
	}
	if m, ok := e.(interface{ metricsString() string }); ok && cfg.ingestProfile != "" {
		fmt.Fprintf(os.Stderr, "%s after ingest:\n%s", name, m.metricsString())
	}
	r.eventsPerSecond = float64(cfg.events) / r.ingestSeconds
	r.peakRSSBytes = peakRSS()
	progress.done()
	if probe != nil {
		probe.finish(os.Stderr, name+" ingest")
	}
	fmt.Fprintf(os.Stderr, "%s: flush + full compaction\n", name)
	if err := e.flushAndCompact(); err != nil {
		return nil, err
	}
	size, err := e.diskBytes()
	if err != nil {
		return nil, err
	}
	r.bytesPerEvent = float64(size) / float64(cfg.events)
	return e, markReady(dir)
}

// buildExpiry builds the expiry phase's store and returns it reopened
// with compactions off, its doomed cells expired or deleted as of checkAt
// and its memtables flushed.
func buildExpiry(name, dir string, cfg config, gen *generator, clock *benchClock, checkAt time.Time) (engine, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	e, err := open(name, dir, cfg, clock, true)
	if err != nil {
		return nil, err
	}
	ttlsFor := func(evs []event) (ttls []int32, doomed []event) {
		ttls = make([]int32, len(evs))
		for i, ev := range evs {
			// TTL relative to the write (the clock is at the batch's
			// first event): expire before checkAt for the oldest 90% of
			// every hour, a day after it for the rest.
			ttl := int32(checkAt.Sub(evs[0].time).Seconds())
			if ev.fractionOfHour < 0.9 {
				ttls[i] = ttl - 60
				doomed = append(doomed, ev)
			} else {
				ttls[i] = ttl + 86400
			}
		}
		return ttls, doomed
	}
	progress := newProgress(name+" expiry ingest", cfg.events)
	for b := 0; b*cfg.batch < cfg.events; b++ {
		evs := gen.batch(b)
		clock.set(evs[0].time)
		ttls, _ := ttlsFor(evs)
		if err := e.ingest(evs, ttls); err != nil {
			return nil, err
		}
		progress.add(len(evs))
	}
	progress.done()
	if err := e.close(); err != nil {
		return nil, err
	}
	if e, err = open(name, dir, cfg, clock, false); err != nil {
		return nil, err
	}
	for b := 0; b*cfg.batch < cfg.events; b++ {
		_, doomed := ttlsFor(gen.batch(b))
		if err := e.expire(doomed); err != nil {
			return nil, err
		}
	}
	if err := e.flush(); err != nil {
		return nil, err
	}
	return e, markReady(dir)
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	if i > 0 {
		i--
	}
	return s[min(i, len(s)-1)]
}

func peakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return ru.Maxrss * 1024 // Linux reports KiB
}

// rssLabel names the peak RSS row: each engine's own when each ran in its
// own process.
func rssLabel(cfg config) string {
	if cfg.sameProcess {
		return "peak RSS after ingest (MiB; process-wide, so only the first engine's is its own)"
	}
	return "peak RSS after ingest (MiB; each engine in its own process)"
}

func printResults(cfg config, names []string, rs map[string]*result) {
	mem := "defaults"
	if cfg.mem != (memoryConfig{}) {
		mem = fmt.Sprintf("memtable %d MiB, caches eventide %d / pebble %d / goleveldb %d / badger %d MiB (0: default)",
			cfg.mem.memtableBytes>>20, cfg.mem.eventideCacheBytes>>20, cfg.mem.pebbleCacheBytes>>20, cfg.mem.goleveldbCacheBytes>>20, cfg.mem.badgerCacheBytes>>20)
	}
	fmt.Printf("workload: %d events, %d types x %d hours = %d partitions, batch %d, %d queries/phase, memory: %s, GOMAXPROCS %d, %s\n\n",
		cfg.events, cfg.types, cfg.hours, cfg.types*cfg.hours, cfg.batch, cfg.queries, mem, runtime.GOMAXPROCS(0), time.Now().UTC().Format(time.RFC3339))
	var peers []string
	for _, n := range names {
		if n != "eventide" {
			peers = append(peers, n)
		}
	}
	fmt.Printf("| metric |")
	for _, n := range names {
		fmt.Printf(" %s |", n)
	}
	for _, p := range peers {
		fmt.Printf(" eventide/%s |", p)
	}
	fmt.Printf("\n|---|")
	for range len(names) + len(peers) {
		fmt.Printf("---|")
	}
	fmt.Println()
	e := rs["eventide"]
	row := func(name string, f func(*result) (float64, bool), format string) {
		fmt.Printf("| %s |", name)
		for _, n := range names {
			if v, ok := f(rs[n]); ok {
				fmt.Printf(" "+format+" |", v)
			} else {
				fmt.Printf(" - |")
			}
		}
		for _, p := range peers {
			ev, ok1 := f(e)
			pv, ok2 := f(rs[p])
			if e != nil && ok1 && ok2 && pv != 0 {
				fmt.Printf(" %.2fx |", ev/pv)
			} else {
				fmt.Printf(" - |")
			}
		}
		fmt.Println()
	}
	val := func(f func(*result) float64) func(*result) (float64, bool) {
		return func(r *result) (float64, bool) {
			if r == nil {
				return 0, false
			}
			return f(r), true
		}
	}
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) }
	if cfg.phases["latest"] {
		built := true
		for _, r := range rs {
			built = built && r.built
		}
		if built {
			row("ingest events/s", val(func(r *result) float64 { return r.eventsPerSecond }), "%.0f")
			// Peak RSS is per process and only grows: it is the engine's own only
			// for the engine that runs first (run -engines X alone to measure X).
			row(rssLabel(cfg), val(func(r *result) float64 { return float64(r.peakRSSBytes) / (1 << 20) }), "%.1f")
			row("on-disk bytes/event after flush+compaction", val(func(r *result) float64 { return r.bytesPerEvent }), "%.1f")
		}
		row("latest-50 p50 (µs)", val(func(r *result) float64 { return us(r.latest.p50) }), "%.0f")
		row("latest-50 p99 (µs)", val(func(r *result) float64 { return us(r.latest.p99) }), "%.0f")
		if cfg.threadSplit {
			row("latest-50 p99 of each read's time minus its wait for a CPU (µs; diagnostic)", val(func(r *result) float64 { return us(r.latest.unwaitedP99) }), "%.0f")
		}
		row("latest-50 cold (first query of a partition) p50 (µs)", val(func(r *result) float64 { return us(r.latest.coldP50) }), "%.0f")
		row("latest-50 cold p99 (µs)", val(func(r *result) float64 { return us(r.latest.coldP99) }), "%.0f")
		row("latest-50 warm (partition queried before) p50 (µs)", val(func(r *result) float64 { return us(r.latest.warmP50) }), "%.0f")
		row("latest-50 warm p99 (µs)", val(func(r *result) float64 { return us(r.latest.warmP99) }), "%.0f")
		row("cold queries per read phase", val(func(r *result) float64 { return float64(r.latest.cold) }), "%.0f")
		row("latest-50: Go heap bytes allocated per query", val(func(r *result) float64 { return float64(r.latest.allocBytes) / float64(cfg.queries) }), "%.0f")
		row("latest-50: GC cycles during the phase", val(func(r *result) float64 { return float64(r.latest.gcCycles) }), "%.0f")
		row("latest-50: minor page faults per query (memory touched for the first time)", val(func(r *result) float64 { return float64(r.latest.minorFaults) / float64(cfg.queries) }), "%.1f")
		row("latest-50: process CPU per query (µs, user+system, all threads)", val(func(r *result) float64 { return us(r.latest.cpu) / float64(cfg.queries) }), "%.1f")
		row("rows returned by latest-50 queries", val(func(r *result) float64 { return float64(r.latestRows) }), "%.0f")
		row("10% window slice p50 (µs)", val(func(r *result) float64 { return us(r.window.p50) }), "%.0f")
		row("10% window slice p99 (µs)", val(func(r *result) float64 { return us(r.window.p99) }), "%.0f")
		if cfg.threadSplit {
			row("10% window slice p99 of each read's time minus its wait for a CPU (µs; diagnostic)", val(func(r *result) float64 { return us(r.window.unwaitedP99) }), "%.0f")
		}
		row("10% window slice rows/s (rows / summed query time)", val(func(r *result) float64 { return float64(r.windowRows) / r.window.sum.Seconds() }), "%.0f")
		row("10% window slice: minor page faults per query (memory touched for the first time)", val(func(r *result) float64 { return float64(r.window.minorFaults) / float64(cfg.queries) }), "%.1f")
		row("10% window slice: process CPU per query (µs, user+system, all threads)", val(func(r *result) float64 { return us(r.window.cpu) / float64(cfg.queries) }), "%.1f")
		row("rows returned by window queries", val(func(r *result) float64 { return float64(r.windowRows) }), "%.0f")
	}
	if cfg.phases["expiry"] {
		row(fmt.Sprintf("90%%-expired: reads (%d rounds of %d, the store reopened between two)", cfg.expiryRounds, cfg.queries), val(func(r *result) float64 { return float64(r.expired.cold + r.expired.warm) }), "%.0f")
		row("90%-expired: table files the same after the last round as before the first (1 yes, 0 no)", val(func(r *result) float64 {
			if r.expiredTablesKept {
				return 1
			}
			return 0
		}), "%.0f")
		row("90%-expired partition, read all live: p50 (µs)", val(func(r *result) float64 { return us(r.expired.p50) }), "%.0f")
		row("90%-expired partition, read all live: p99 (µs)", val(func(r *result) float64 { return us(r.expired.p99) }), "%.0f")
		if cfg.threadSplit {
			row("90%-expired: p99 of each read's time minus its wait for a CPU (µs; diagnostic)", val(func(r *result) float64 { return us(r.expired.unwaitedP99) }), "%.0f")
		}
		row(fmt.Sprintf("90%%-expired: p99 of the first round alone (µs; %d reads, the phase's p99 until s17)", cfg.queries), val(func(r *result) float64 { return us(r.expired.firstRoundP99) }), "%.0f")
		row("90%-expired: p50 of the first round alone (µs)", val(func(r *result) float64 { return us(r.expired.firstRoundP50) }), "%.0f")
		row("90%-expired cold p50 (µs)", val(func(r *result) float64 { return us(r.expired.coldP50) }), "%.0f")
		row("90%-expired cold p99 (µs)", val(func(r *result) float64 { return us(r.expired.coldP99) }), "%.0f")
		row("90%-expired warm p50 (µs)", val(func(r *result) float64 { return us(r.expired.warmP50) }), "%.0f")
		row("90%-expired warm p99 (µs)", val(func(r *result) float64 { return us(r.expired.warmP99) }), "%.0f")
		row("90%-expired: Go heap bytes allocated per query", val(func(r *result) float64 { return float64(r.expired.allocBytes) / float64(r.expired.cold+r.expired.warm) }), "%.0f")
		row("90%-expired: GC cycles during the phase (every round)", val(func(r *result) float64 { return float64(r.expired.gcCycles) }), "%.0f")
		row("90%-expired: minor page faults per query (memory touched for the first time)", val(func(r *result) float64 {
			return float64(r.expired.minorFaults) / float64(r.expired.cold+r.expired.warm)
		}), "%.1f")
		row("90%-expired: process CPU per query (µs, user+system, all threads)", val(func(r *result) float64 { return us(r.expired.cpu) / float64(r.expired.cold+r.expired.warm) }), "%.1f")
		row("live cells returned by expiry queries", val(func(r *result) float64 { return float64(r.expiredCells) }), "%.0f")
	}
	if cfg.phases["delete"] {
		for _, mode := range []string{"cell", "row"} {
			del := func(f func(*deleteResult) float64) func(*result) (float64, bool) {
				return func(r *result) (float64, bool) {
					if r == nil || r.deleted[mode] == nil {
						return 0, false
					}
					return f(r.deleted[mode]), true
				}
			}
			what := "90% " + mode + "-deleted (peers: point deletes)"
			row(what+": deletes/s", del(func(d *deleteResult) float64 { return d.deletesPerSecond }), "%.0f")
			row(fmt.Sprintf("%s, background compaction only (%s): read all live p50 (µs)", what, cfg.deleteSettle), del(func(d *deleteResult) float64 { return us(d.bg.p50) }), "%.0f")
			row(what+", background only: p99 (µs)", del(func(d *deleteResult) float64 { return us(d.bg.p99) }), "%.0f")
			row(what+", background only: on-disk MiB", del(func(d *deleteResult) float64 { return float64(d.bgBytes) / (1 << 20) }), "%.1f")
			row(what+", background only: MiB compactions wrote after the deletes", del(func(d *deleteResult) float64 { return float64(d.bgCompactedBytes) / (1 << 20) }), "%.1f")
			row(what+", background only: MiB compactions wrote during the reads", del(func(d *deleteResult) float64 { return float64(d.bgReadCompactedBytes) / (1 << 20) }), "%.1f")
			if cfg.threadSplit {
				row(what+", background only: p99 of each read's time minus its wait for a CPU (µs; diagnostic)", del(func(d *deleteResult) float64 { return us(d.bg.unwaitedP99) }), "%.0f")
			}
			row(what+", after manual compaction: p50 (µs)", del(func(d *deleteResult) float64 { return us(d.manual.p50) }), "%.0f")
			row(what+", after manual compaction: p99 (µs)", del(func(d *deleteResult) float64 { return us(d.manual.p99) }), "%.0f")
			row(what+", after manual compaction: on-disk MiB", del(func(d *deleteResult) float64 { return float64(d.manualBytes) / (1 << 20) }), "%.1f")
			row(what+": live cells returned (background, manual; Eventide's first round)", del(func(d *deleteResult) float64 { return float64(d.bgCells + d.manualCells) }), "%.0f")
		}
	}
	finalRSS := "peak RSS over all phases run (MiB; each engine in its own process)"
	if cfg.sameProcess {
		finalRSS = "peak RSS over all phases run (MiB; process-wide, so only the first engine's is its own)"
	}
	row(finalRSS, val(func(r *result) float64 { return float64(r.finalPeakRSSBytes) / (1 << 20) }), "%.1f")
}

func splitComma(s string) []string {
	var out []string
	cur := ""
	for _, r := range s {
		if r == ',' {
			if cur != "" {
				out = append(out, cur)
			}
			cur = ""
			continue
		}
		cur += string(r)
	}
	if cur != "" {
		out = append(out, cur)
	}
	return out
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "peers:", err)
	os.Exit(1)
}

type progress struct {
	what         string
	total, count int
	start, last  time.Time
}

func newProgress(what string, total int) *progress {
	return &progress{what: what, total: total, start: time.Now(), last: time.Now()}
}

func (p *progress) add(n int) {
	p.count += n
	if time.Since(p.last) >= 5*time.Second {
		p.last = time.Now()
		el := time.Since(p.start).Seconds()
		fmt.Fprintf(os.Stderr, "%s: %d/%d (%.0f%%), %.0f events/s\n", p.what, p.count, p.total, 100*float64(p.count)/float64(p.total), float64(p.count)/el)
	}
}

func (p *progress) done() {
	fmt.Fprintf(os.Stderr, "%s: %d events in %s\n", p.what, p.count, time.Since(p.start).Round(time.Millisecond))
}

// startIngestProfiles starts -ingestprofile's profiles of one engine's
// ingest loop (none when prefix is empty); the function it returns stops
// them and writes them out. The mutex and block profiles sample every
// event while they run, which costs some speed: compare ingest rates of
// runs without the flag.
func startIngestProfiles(prefix, engine string) (func() error, error) {
	if prefix == "" {
		return func() error { return nil }, nil
	}
	name := func(kind string) string { return fmt.Sprintf("%s-%s-ingest-%s.pprof", prefix, engine, kind) }
	f, err := os.Create(name("cpu"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot profile the ingest (is -cpuprofile also set?): %w", err)
	}
	runtime.SetMutexProfileFraction(1)
	runtime.SetBlockProfileRate(1)
	return func() error {
		pprof.StopCPUProfile()
		runtime.SetMutexProfileFraction(0)
		runtime.SetBlockProfileRate(0)
		if err := f.Close(); err != nil {
			return err
		}
		for _, kind := range []string{"mutex", "block"} {
			out, err := os.Create(name(kind))
			if err != nil {
				return err
			}
			if err := pprof.Lookup(kind).WriteTo(out, 0); err != nil {
				out.Close()
				return err
			}
			if err := out.Close(); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// startIngestTrace starts -ingesttrace's execution trace of one engine's
// ingest loop (none when prefix is empty); the function it returns stops
// it. Tracing costs a few percent of speed: compare ingest rates of runs
// without the flag.
func startIngestTrace(prefix, engine string) (func() error, error) {
	if prefix == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(fmt.Sprintf("%s-%s-ingest.trace", prefix, engine))
	if err != nil {
		return nil, err
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot trace the ingest: %w", err)
	}
	return func() error {
		trace.Stop()
		return f.Close()
	}, nil
}
