package storage

import (
	"sync"
	"time"
)

// Compaction throughput limit (Options.CompactionThroughput; Cassandra's
// compaction_throughput, RocksDB's rate limiter). A compaction is one
// goroutine decoding, merging and encoding as fast as one core allows:
// the active time window's second-tier merge of the all-in-one at 38,000
// events/s (four 5.3 MB SSTables into one of 21 MB) took 523 ms of one of
// the machine's two cores, and in that second the writer, the embedded
// NATS server and the HTTP reads, which need about one and a half cores,
// waited: the query p99 went to 10.8 ms and the publish p99 to 71 ms
// (BENCHMARKS.md, "What the burst is"). Pacing spreads the same work over
// a longer time, so it never takes a whole core for long.
//
// What is limited is the bytes a background compaction writes to its
// output SSTables, counted as the SSTable writer hands its buffer (256
// KiB) to the file: the output is where a compaction can stop between two
// chunks holding nothing anyone else waits for (no lock, no manifest
// edit, only its own inputs' references), and in the active window's
// merges, the ones that stall the machine, the output is about the input
// (nothing to purge, S2 in and out). A closed window's merge writes
// zstd, about half its input, so it is paced by its output too: its
// input moves at about twice the limit.
//
// The limit is a token bucket shared by every background compaction:
// compactionBurstBytes may be written at once after an idle time, so a
// small merge (a counts table's, a first-tier merge's first megabytes)
// is not slowed, and a waiter is debited before it waits, so concurrent
// compactions queue behind each other. Manual compactions (DB.Compact,
// CompactAll) are not paced: their caller waits for them, and for the
// background compactions of the table already running, which run unpaced
// while a manual one is under way.
//
// A limit must never let compactions fall behind the flushes for good:
// when a table holds half of StallSSTablesPerTable SSTables or more (the
// count at which writers stall, as in stallReasonLocked), pacing is off
// until it holds fewer, and a compaction waiting for the bucket is woken
// (maybeScheduleCompaction kicks the pacer after every flush and
// compaction) to finish at full speed. The other half is room for the
// flushes that arrive while the compaction under way catches up. And
// Close cuts a wait short: the compaction under way then finishes
// unpaced, as every compaction did before.

// compactionBurstBytes is how many bytes of compaction output the bucket
// holds when full: about 50 ms of one core's merge (40 MB/s), so short
// merges run at full speed while long ones are spread.
const compactionBurstBytes = 2 << 20

// compactionPacer is the token bucket. Its arithmetic takes the time as
// an argument (reserve), so tests drive it with any clock; the waiting
// is DB.paceCompaction's.
type compactionPacer struct {
	bytesPerSecond float64
	burst          float64

	mu     sync.Mutex
	tokens float64 // may go negative: bytes reserved ahead of the rate
	last   time.Time
	// kicked is closed (and replaced) to wake every waiter, so that it
	// looks again whether pacing still applies.
	kicked chan struct{}
}

func newCompactionPacer(bytesPerSecond, burst int64) *compactionPacer {
	return &compactionPacer{
		bytesPerSecond: float64(bytesPerSecond),
		burst:          float64(max(burst, 0)),
		tokens:         float64(max(burst, 0)),
		kicked:         make(chan struct{}),
	}
}

// reserve takes n bytes from the bucket at now and returns how long the
// caller must wait before writing them (0: at once), and the channel
// that a kick closes.
func (p *compactionPacer) reserve(now time.Time, n int) (time.Duration, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.last.IsZero() {
		if elapsed := now.Sub(p.last); elapsed > 0 {
			p.tokens = min(p.burst, p.tokens+elapsed.Seconds()*p.bytesPerSecond)
		}
	}
	if now.After(p.last) {
		p.last = now
	}
	p.tokens -= float64(n)
	if p.tokens >= 0 {
		return 0, p.kicked
	}
	return time.Duration(-p.tokens / p.bytesPerSecond * float64(time.Second)), p.kicked
}

// refund gives back n bytes reserved by a caller that did not wait for
// them (pacing was turned off during its wait): an unpaced write takes
// no tokens.
func (p *compactionPacer) refund(n int) {
	p.mu.Lock()
	p.tokens = min(p.burst, p.tokens+float64(n))
	p.mu.Unlock()
}

// kick wakes every waiter.
func (p *compactionPacer) kick() {
	p.mu.Lock()
	close(p.kicked)
	p.kicked = make(chan struct{})
	p.mu.Unlock()
}

// paceCompaction waits until the compaction throughput limit lets a
// background compaction write n more bytes. It holds no lock while it
// waits, and returns at once when there is no limit, when the DB is
// closing, or when a table's SSTables pile up toward the write stall
// (compactionsBehind); a wait already begun ends when either happens.
func (db *DB) paceCompaction(n int) {
	p := db.pacer
	if p == nil || n <= 0 || db.compactionsBehind() {
		return
	}
	select {
	case <-db.closing:
		return
	default:
	}
	wait, kicked := p.reserve(db.opts.schedulingClock.Now(), n)
	if wait <= 0 {
		return
	}
	start := time.Now()
	db.metrics.pacedWaiting.Add(1)
	defer func() {
		db.metrics.pacedWaiting.Add(-1)
		db.metrics.pacedNanos.Add(int64(time.Since(start)))
	}()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return
		case <-db.closing:
			p.refund(n)
			return
		case <-kicked:
			if db.compactionsBehind() {
				p.refund(n)
				return
			}
			p.mu.Lock()
			kicked = p.kicked
			p.mu.Unlock()
		}
	}
}

// compactionsBehind reports whether some table holds half of
// StallSSTablesPerTable SSTables or more, or a DB.Compact is under way
// (it waits for the running compactions of its table): compactions then
// run unpaced.
func (db *DB) compactionsBehind() bool {
	if db.manualCompactions.Load() > 0 {
		return true
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.current == nil {
		return true
	}
	return db.compactionBacklogLocked(max(db.opts.StallSSTablesPerTable/2, 1))
}
