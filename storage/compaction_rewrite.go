package storage

import (
	"sort"
	"time"

	"github.com/eventide/eventide/storage/internal/sstable"
)

// Idle rewrite: a zstd time-window table writes flushes and active-window
// compactions as short-lived S2 SSTables (see sstableLife), and a closed
// window is compacted only to merge two or more files. A window that
// closes holding exactly one such SSTable (one flush, or one active-window
// compaction that swallowed all the others) would keep its S2 form for
// good: ~1.5-2x the bytes of its zstd form. pickRewriteLocked rewrites
// such a window as one long-lived zstd SSTable, newest window first:
//   - when the engine is idle: no other compaction to pick, none running,
//     no memtable waiting for a flush, and no batch applied for
//     rewriteQuietPeriod, so the rewrite never competes with writes for
//     the CPU. When only the writes' quiet period is missing, a timer runs
//     the picker again once it has passed, so an engine whose writes stop
//     rewrites its closed windows within about rewriteQuietPeriod;
//   - rate-limited when it is never idle (a sustained ingest always has a
//     compaction due, or a batch applied within the quiet period): one
//     rewrite every rewriteIntervalWhenBusy, ahead of the other work, so
//     closed windows still reach their compact form. Under steady writes
//     (a pipeline applying a batch every few milliseconds) this is the
//     path that runs: six rewrites an hour, more than the one window an
//     hour the events table (WindowSeconds 3600) closes. A table with
//     much shorter windows under steady writes would keep some closed
//     windows in S2 until the writes pause.
//
// Both periods are wall-clock time (Options.schedulingClock), not the
// engine's Clock: they are about sharing the machine, and the data's time
// may run far ahead of the wall clock. A replay of a stream, or
// loadtest/peers' clock set to each batch's event time, closes a window
// every few hundred milliseconds; on the engine clock every window closed
// after its only flush found the engine "idle" between two batches (or
// "busy" for ten of its minutes), and was rewritten with zstd at once:
// those rewrites were 39% of the CPU of loadtest/peers' ingest
// (BENCHMARKS.md, session 9, s9-ingest).

// rewriteIntervalWhenBusy is how often a busy engine takes one closed
// window's rewrite ahead of its other compactions: a few percent of the
// compaction time at most (a window's rewrite reads and writes one
// window's data once).
const rewriteIntervalWhenBusy = 10 * time.Minute

// rewriteQuietPeriod is how long no batch may have been applied before the
// engine counts as idle for a rewrite.
const rewriteQuietPeriod = time.Second

// pickRewriteLocked returns the rewrite of the newest closed window whose
// only SSTable is a short-lived S2 file of a zstd table, or nil if no
// window needs one, a memtable waits for a flush, or (idle) a compaction
// runs or a batch was applied within rewriteQuietPeriod, or (!idle) the
// last rewrite is under rewriteIntervalWhenBusy old. db.mu is held.
func (db *DB) pickRewriteLocked(nowMicros int64, idle bool) *compaction {
	if len(db.current.imms) > 0 {
		return nil
	}
	if idle && db.compactions > 0 {
		return nil
	}
	wall := db.opts.schedulingClock.Now().UnixNano()
	quietFor := time.Duration(wall - db.lastApplyNanos.Load())
	if !idle && time.Duration(wall-db.lastRewriteNanos) < rewriteIntervalWhenBusy {
		return nil
	}
	ids := make([]uint32, 0, len(db.current.sstables))
	for id := range db.current.sstables {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		t := db.tablesByID[id]
		if t == nil || t.def.Compaction != TimeWindow || t.codec != sstable.CompressionZstd {
			continue
		}
		if h := closedWindowToRewrite(t, db.current.sstables[id], nowMicros, db.compacting); h != nil {
			if idle && quietFor < rewriteQuietPeriod {
				db.recheckRewriteLocked(rewriteQuietPeriod - quietFor)
				return nil
			}
			db.lastRewriteNanos = wall
			return &compaction{table: t, inputs: []*sstHandle{h}, reason: "time-window rewrite (s2 to zstd)"}
		}
	}
	return nil
}

// recheckRewriteLocked runs the picker again after wait (once, however
// often it is asked before then): a window waits for the writes to be
// quiet, and nothing else might wake the picker before its periodic check
// a minute later. db.mu is held.
func (db *DB) recheckRewriteLocked(wait time.Duration) {
	if db.rewriteRecheck {
		return
	}
	db.rewriteRecheck = true
	time.AfterFunc(wait, func() {
		db.mu.Lock()
		db.rewriteRecheck = false
		db.mu.Unlock()
		db.maybeScheduleCompaction()
	})
}

// closedWindowToRewrite returns the S2 SSTable of the newest closed window
// that holds only that one SSTable and is not being compacted, or nil.
func closedWindowToRewrite(t *tableState, list []*sstHandle, nowMicros int64, compacting map[uint64]bool) *sstHandle {
	active := timeWindow(nowMicros, t.def.WindowSeconds)
	count := map[int64]int{}
	for _, h := range list {
		count[timeWindow(h.props.MaxTimestamp, t.def.WindowSeconds)]++
	}
	var best *sstHandle
	bestWindow := int64(0)
	for _, h := range list {
		w := timeWindow(h.props.MaxTimestamp, t.def.WindowSeconds)
		if w >= active || count[w] != 1 || h.props.Compression != sstable.CompressionS2 || compacting[h.fileNum] {
			continue
		}
		if best == nil || w > bestWindow {
			best, bestWindow = h, w
		}
	}
	return best
}
