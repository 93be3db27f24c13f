package storage

import (
	"sort"

	"github.com/eventide/eventide/storage/internal/sstable"
)

// Idle rewrite: a zstd time-window table writes flushes and active-window
// compactions as short-lived S2 SSTables (see sstableLife), and a closed
// window is compacted only to merge two or more files. A window that
// closes holding exactly one such SSTable (one flush, or one active-window
// compaction that swallowed all the others) would keep its S2 form for
// good: ~1.5-2x the bytes of its zstd form. When the engine has nothing
// else to do (no other compaction to pick, none running, no memtable
// waiting for a flush), pickIdleRewriteLocked rewrites one such window as
// a long-lived zstd SSTable, newest window first, so closed windows always
// reach their compact form without competing with writes for the CPU.
// The picker runs at least every compactionCheckInterval, so a window is
// rewritten within about a minute of closing on an idle engine.

// pickIdleRewriteLocked returns the rewrite of the newest closed window
// whose only SSTable is a short-lived S2 file of a zstd table, or nil if
// the engine is busy or no window needs one. db.mu is held.
func (db *DB) pickIdleRewriteLocked(nowMicros int64) *compaction {
	if db.compactions > 0 || len(db.current.imms) > 0 {
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
		if h := closedWindowToRewrite(t, db.current.sstables[id], nowMicros); h != nil && !db.compacting[h.fileNum] {
			return &compaction{table: t, inputs: []*sstHandle{h}, reason: "time-window rewrite (s2 to zstd)"}
		}
	}
	return nil
}

// closedWindowToRewrite returns the S2 SSTable of the newest closed window
// that holds only that one SSTable, or nil.
func closedWindowToRewrite(t *tableState, list []*sstHandle, nowMicros int64) *sstHandle {
	active := timeWindow(nowMicros, t.def.WindowSeconds)
	count := map[int64]int{}
	for _, h := range list {
		count[timeWindow(h.props.MaxTimestamp, t.def.WindowSeconds)]++
	}
	var best *sstHandle
	bestWindow := int64(0)
	for _, h := range list {
		w := timeWindow(h.props.MaxTimestamp, t.def.WindowSeconds)
		if w >= active || count[w] != 1 || h.props.Compression != sstable.CompressionS2 {
			continue
		}
		if best == nil || w > bestWindow {
			best, bestWindow = h, w
		}
	}
	return best
}
