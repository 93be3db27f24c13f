package storage

import (
	"bytes"
	"math"
	"sort"
)

// compaction is one unit of background work on one table: merge inputs
// into (at most) one new SSTable, or, when dropOnly, remove inputs whose
// every cell is expired past gc_grace and shadows nothing.
type compaction struct {
	table    *tableState
	inputs   []*sstHandle
	dropOnly bool
	// intermediate: the output will be compacted again (a time window's
	// active window), so it is written as a short-lived SSTable.
	intermediate bool
	// splitByWindow writes one output per time window of the inputs
	// (a TimeWindow table's tombstone compaction across windows).
	splitByWindow bool
	// noBlockCopy merges every cell, never copying an input's block
	// whole (copyBlock): for tests that pin the copy against the merge.
	noBlockCopy bool
	reason      string
	// paced: a background compaction, whose output writes wait for
	// Options.CompactionThroughput (compaction_pacer.go).
	paced bool
}

// pace returns the function that paces c's output writes, or nil.
func (c *compaction) pace(db *DB) func(n int) {
	if !c.paced || db.pacer == nil {
		return nil
	}
	return db.paceCompaction
}

// pickCompactionLocked chooses the most useful compaction of any table,
// skipping SSTables already being compacted; when there is none, an idle
// rewrite of a closed window, and one such rewrite ahead of everything
// else when the engine has been busy for rewriteIntervalWhenBusy
// (compaction_rewrite.go). db.mu is held.
func (db *DB) pickCompactionLocked() *compaction {
	now := db.opts.Clock.Now()
	if c := db.pickRewriteLocked(now.UnixMicro(), false); c != nil {
		return c // rate-limited: the engine has been busy too long
	}
	ids := make([]uint32, 0, len(db.current.sstables))
	for id := range db.current.sstables {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		t := db.tablesByID[id]
		var free []*sstHandle
		for _, h := range db.current.sstables[id] {
			if !db.compacting[h.fileNum] {
				free = append(free, h)
			}
		}
		if len(free) == 0 {
			continue
		}
		if t.def.Compaction == TimeWindow {
			if c := db.pickExpiredLocked(t, free, now.Unix()); c != nil {
				return c
			}
			if c := pickTimeWindow(t, free, now.UnixMicro()); c != nil {
				return c
			}
			continue
		}
		if in := pickSizeTiered(free, t.def.MinThreshold, t.def.MaxThreshold); in != nil {
			return &compaction{table: t, inputs: in, reason: "size-tiered"}
		}
	}
	// Nothing else to do: look for SSTables worth compacting for their
	// tombstones alone.
	for _, id := range ids {
		if c := db.pickTombstoneLocked(db.tablesByID[id], now.Unix()); c != nil {
			return c
		}
	}
	return db.pickRewriteLocked(now.UnixMicro(), true)
}

// pickTombstoneLocked finds the SSTable of t with the highest estimated
// share of droppable tombstones (tombstones, deletions and expired cells a
// compaction could purge on time grounds, from the histograms in its
// properties), at least the table's TombstoneThreshold, written at least
// TombstoneCompactionIntervalSeconds ago, and compacts it with every
// SSTable that may hold older data for its partitions (key ranges overlap
// and their oldest write is not newer than its newest): a purge needs
// every such file in the compaction, or the tombstone must stay to shadow
// what it finds outside (Cassandra's tombstone compactions, with their
// overlaps). A candidate one of whose overlaps is being compacted waits.
//
// In a TimeWindow table only deletions count (expired cells are dropped
// with their window's SSTable). A deletion lands in the window of its
// write while the data it deletes sits in older windows' SSTables, which
// no window compaction ever merges with it; a tombstone compaction takes those in
// too, and writes one SSTable per window (compaction.splitByWindow), so
// each window's surviving data stays in its window and still expires
// whole with it.
func (db *DB) pickTombstoneLocked(t *tableState, nowSeconds int64) *compaction {
	threshold := t.def.tombstoneThreshold()
	if threshold < 0 {
		return nil
	}
	interval := t.def.tombstoneCompactionIntervalSeconds()
	gcBefore := t.def.gcBefore(nowSeconds)
	all := db.current.sstables[t.id]
	memMin := int64(math.MaxInt64)
	for _, mem := range db.current.memtables() {
		memMin = min(memMin, mem.MinTimestampOf(t.id))
	}
	var best *sstHandle
	bestRatio := 0.0
	for _, h := range all {
		created := h.props.Tombstones.CreatedAt
		if db.compacting[h.fileNum] || created == 0 || nowSeconds-created < interval || nowSeconds < h.tombstoneRetryAt {
			continue
		}
		// A memtable with writes as old as the file's may hold data its
		// tombstones shadow, which keeps them: wait for the flush rather
		// than rewrite the file for nothing (with a short interval, over
		// and over).
		if memMin <= h.props.MaxTimestamp {
			continue
		}
		r := h.props.DroppableRatio(nowSeconds, gcBefore)
		if t.def.Compaction == TimeWindow {
			// Expiry is what windows are for: a window's SSTable is
			// dropped whole, unread, once everything in it has expired
			// (pickExpiredLocked). Only deletions need a compaction.
			r = float64(h.props.Tombstones.Deletions.CountBefore(gcBefore)) /
				float64(max(1, h.props.Cells+h.props.RangeTombstones+h.props.PartitionDeletions))
		}
		if r >= threshold && r > bestRatio {
			best, bestRatio = h, r
		}
	}
	if best == nil {
		return nil
	}
	inputs := []*sstHandle{best}
	first, last := best.reader.KeyRange()
	for _, o := range all {
		if o == best || o.props.MinTimestamp > best.props.MaxTimestamp {
			continue
		}
		if of, ol := o.reader.KeyRange(); of == nil || bytes.Compare(of, last) > 0 || bytes.Compare(ol, first) < 0 {
			continue
		}
		if db.compacting[o.fileNum] {
			return nil
		}
		inputs = append(inputs, o)
	}
	return &compaction{table: t, inputs: inputs, reason: tombstoneReason, splitByWindow: t.def.Compaction == TimeWindow}
}

// tombstoneReason is the reason of tombstone compactions.
const tombstoneReason = "tombstones"

// futileTombstoneRetrySeconds is the least time before the output of a
// tombstone compaction that purged nothing may be picked again for its
// tombstones, whatever the table's interval.
const futileTombstoneRetrySeconds = 3600

// pickExpiredLocked finds SSTables whose every cell and deletion is past
// gc_grace (expired cells count from their write time) and that hold
// nothing older than any other SSTable or memtable of the table, so
// dropping them whole cannot resurrect anything (Cassandra's
// getFullyExpiredSSTables).
func (db *DB) pickExpiredLocked(t *tableState, free []*sstHandle, nowSeconds int64) *compaction {
	gcBefore := t.def.gcBefore(nowSeconds)
	var expired []*sstHandle
	all := db.current.sstables[t.id]
	memMin := int64(math.MaxInt64)
	for _, mem := range db.current.memtables() {
		memMin = min(memMin, mem.MinTimestampOf(t.id))
	}
	for _, h := range free {
		if h.props.MaxLocalDeletionTime >= gcBefore {
			continue
		}
		if memMin <= h.props.MaxTimestamp {
			continue
		}
		shadowsOthers := false
		for _, o := range all {
			if o != h && o.props.MinTimestamp <= h.props.MaxTimestamp && !isFullyExpiredCandidate(o, gcBefore) {
				shadowsOthers = true
				break
			}
		}
		if !shadowsOthers {
			expired = append(expired, h)
		}
	}
	if len(expired) == 0 {
		return nil
	}
	return &compaction{table: t, inputs: expired, dropOnly: true, reason: "fully expired"}
}

// isFullyExpiredCandidate reports whether h would itself be dropped as
// fully expired: dropping two such SSTables together is safe because
// neither holds anything live for the other to shadow.
func isFullyExpiredCandidate(h *sstHandle, gcBefore int64) bool {
	return h.props.MaxLocalDeletionTime < gcBefore
}

// compactionBacklogLocked reports whether some table holds limit
// SSTables or more that compaction could still merge away: every
// SSTable, but in a TimeWindow table the first of each closed window,
// which stays, alone, until the window expires (the events table, with
// hour windows and a 7-day TTL, keeps 168). Counting those made every
// write stall for good once a table held StallSSTablesPerTable windows.
// It is the write stall's count (stallReasonLocked) and, at half of it,
// the pacer's back-off (compactionsBehind). db.mu is held.
func (db *DB) compactionBacklogLocked(limit int) bool {
	var nowMicros int64
	for id, list := range db.current.sstables {
		if len(list) < limit {
			continue
		}
		t := db.tablesByID[id]
		if t == nil || t.def.Compaction != TimeWindow || t.def.WindowSeconds <= 0 {
			return true
		}
		if nowMicros == 0 {
			nowMicros = db.opts.Clock.Now().UnixMicro()
		}
		active := timeWindow(nowMicros, t.def.WindowSeconds)
		v := db.current
		b, ok := v.backlog[id]
		if !ok || b.active != active {
			closed := map[int64]bool{}
			for _, h := range list {
				if w := timeWindow(h.props.MaxTimestamp, t.def.WindowSeconds); w < active {
					closed[w] = true
				}
			}
			b = windowBacklog{active: active, n: len(list) - len(closed)}
			if v.backlog == nil {
				v.backlog = make(map[uint32]windowBacklog)
			}
			v.backlog[id] = b
		}
		if b.n >= limit {
			return true
		}
	}
	return false
}

// timeWindow returns the window index of a timestamp.
func timeWindow(timestampMicros int64, windowSeconds int64) int64 {
	w := windowSeconds * 1_000_000
	if timestampMicros < 0 {
		return (timestampMicros - w + 1) / w
	}
	return timestampMicros / w
}

// pickTimeWindow groups SSTables by the window of their newest write. The
// active window (now's) is compacted size-tiered; every older window is
// compacted into one SSTable.
func pickTimeWindow(t *tableState, free []*sstHandle, nowMicros int64) *compaction {
	active := timeWindow(nowMicros, t.def.WindowSeconds)
	windows := map[int64][]*sstHandle{}
	var keys []int64
	for _, h := range free {
		w := timeWindow(h.props.MaxTimestamp, t.def.WindowSeconds)
		if _, ok := windows[w]; !ok {
			keys = append(keys, w)
		}
		windows[w] = append(windows[w], h)
	}
	// Newest window first, as Cassandra does: recent data is read most.
	sort.Slice(keys, func(i, j int) bool { return keys[i] > keys[j] })
	for _, w := range keys {
		list := windows[w]
		if w >= active {
			if in := pickSizeTiered(list, t.def.MinThreshold, t.def.MaxThreshold); in != nil {
				return &compaction{table: t, inputs: in, intermediate: true, reason: "time-window active"}
			}
			continue
		}
		if len(list) >= 2 {
			if len(list) > t.def.MaxThreshold {
				list = list[:t.def.MaxThreshold]
			}
			return &compaction{table: t, inputs: list, reason: "time-window closed"}
		}
	}
	return nil
}

// Size-tiered buckets: an SSTable joins a bucket when its size is within
// [bucketLow, bucketHigh] times the bucket's average, and every SSTable
// under minSSTableSize shares one bucket. bucketLow and bucketHigh are
// Cassandra's defaults; its minimum of 50 MB is not: it assumes flushes of
// tens of MB, and a flush of a 16 MiB memtable of events writes ~1-1.5 MB
// of compressed data here. With 50 MB, every three new flushes of a window
// were merged into the window's one growing SSTable, rewriting it each
// time (the ingest benchmark compacted 8, 15, 22, ... 49 MB in a row);
// with 4 MiB, files merge with files of their own size, and each byte is
// rewritten about once per factor of four in size.
const (
	bucketLow      = 0.5
	bucketHigh     = 1.5
	minSSTableSize = 4 << 20
)

// pickSizeTiered returns the bucket of similar-size SSTables with at
// least minThreshold members (the one with the smallest average size, as
// merging small files is cheapest and cuts the count most), capped at
// maxThreshold, or nil.
func pickSizeTiered(list []*sstHandle, minThreshold, maxThreshold int) []*sstHandle {
	if len(list) < minThreshold {
		return nil
	}
	sorted := append([]*sstHandle(nil), list...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].size < sorted[j].size })
	type bucket struct {
		members []*sstHandle
		total   int64
	}
	var buckets []*bucket
	for _, h := range sorted {
		placed := false
		for _, b := range buckets {
			avg := b.total / int64(len(b.members))
			if (float64(h.size) >= bucketLow*float64(avg) && float64(h.size) <= bucketHigh*float64(avg)) ||
				(h.size < minSSTableSize && avg < minSSTableSize) {
				b.members = append(b.members, h)
				b.total += h.size
				placed = true
				break
			}
		}
		if !placed {
			buckets = append(buckets, &bucket{members: []*sstHandle{h}, total: h.size})
		}
	}
	for _, b := range buckets {
		if len(b.members) >= minThreshold {
			if len(b.members) > maxThreshold {
				return b.members[:maxThreshold]
			}
			return b.members
		}
	}
	return nil
}
