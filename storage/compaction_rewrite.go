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
//   - when the engine is idle (no other compaction to pick, none running,
//     no memtable waiting for a flush), so the rewrite never competes with
//     writes for the CPU; the picker runs at least every
//     compactionCheckInterval, so an idle engine rewrites a window within
//     about a minute of its closing;
//   - rate-limited when it is never idle (a sustained ingest always has a
//     compaction due): one rewrite every rewriteIntervalWhenBusy, ahead of
//     the other work, so closed windows still reach their compact form.

// rewriteIntervalWhenBusy is how often a busy engine takes one closed
// window's rewrite ahead of its other compactions: a few percent of the
// compaction time at most (a window's rewrite reads and writes one
// window's data once).
const rewriteIntervalWhenBusy = 10 * time.Minute

// pickRewriteLocked returns the rewrite of the newest closed window whose
// only SSTable is a short-lived S2 file of a zstd table, or nil if no
// window needs one, a memtable waits for a flush, or (idle) a compaction
// runs or (!idle) the last rewrite is under rewriteIntervalWhenBusy old.
// db.mu is held.
func (db *DB) pickRewriteLocked(nowMicros int64, idle bool) *compaction {
	if len(db.current.imms) > 0 {
		return nil
	}
	if idle && db.compactions > 0 {
		return nil
	}
	if !idle && nowMicros-db.lastRewriteMicros < rewriteIntervalWhenBusy.Microseconds() {
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
			db.lastRewriteMicros = nowMicros
			return &compaction{table: t, inputs: []*sstHandle{h}, reason: "time-window rewrite (s2 to zstd)"}
		}
	}
	return nil
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
