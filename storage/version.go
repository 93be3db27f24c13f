package storage

import (
	"fmt"
	"sort"
	"sync/atomic"

	"github.com/eventide/eventide/storage/internal/memtable"
	"github.com/eventide/eventide/storage/internal/sstable"
)

// sstHandle is an open SSTable shared by every version that lists it. It
// is closed when the last version holding it goes away, and its file is
// removed then if compaction made it obsolete.
type sstHandle struct {
	db       *DB
	fileNum  uint64
	tableID  uint32
	path     string
	size     int64
	reader   *sstable.Reader
	props    sstable.Properties
	refs     atomic.Int32
	obsolete atomic.Bool
	// tombstoneRetryAt (unix seconds) keeps the tombstone picker off the
	// output of a tombstone compaction that purged nothing: its estimate
	// over-counts (see sstable.TombstoneStats.Droppable) or something
	// older still overlaps, and rewriting it again at once would change
	// nothing. Guarded by db.mu; not persisted.
	tombstoneRetryAt int64
}

func (h *sstHandle) ref() { h.refs.Add(1) }

// discard closes and removes an SSTable that no version ever listed (a
// flush or compaction output that is not installed).
func (h *sstHandle) discard() {
	h.obsolete.Store(true)
	h.ref()
	h.unref()
}

func (h *sstHandle) unref() {
	switch n := h.refs.Add(-1); {
	case n < 0:
		panic(fmt.Sprintf("BUG: sstable %s unreferenced more than referenced", h.path))
	case n == 0:
		h.db.releaseSSTable(h)
	}
}

// version is an immutable snapshot of what a read must merge: the mutable
// memtable, the frozen ones waiting for a flush (newest first) and every
// table's SSTables (ordered by file number, oldest first). Readers hold a
// reference so flushes and compactions never close files under them, nor
// unmap a memtable's arena: each version counts a reference to each of
// its memtables, and the last one dropped unmaps it (memtable.Unref).
// A flush reads its frozen memtable without a reference of its own: the
// memtable stays in every current version until that flush installs one
// without it.
type version struct {
	refs     atomic.Int32
	mem      *memtable.Memtable
	imms     []*immMemtable
	sstables map[uint32][]*sstHandle
	// backlog memoizes compactionBacklogLocked's count of a TimeWindow
	// table's mergeable SSTables for the active window it was counted in,
	// so that the write path's stall check (every Apply) does not walk a
	// week of closed windows each time. Guarded by db.mu.
	backlog map[uint32]windowBacklog
}

// windowBacklog is a TimeWindow table's count of SSTables compaction could
// still merge away, as of the active window active.
type windowBacklog struct {
	active int64
	n      int
}

// immMemtable is a frozen memtable and the first WAL segment that holds
// none of its records.
type immMemtable struct {
	mem             *memtable.Memtable
	walSegmentAfter uint64
}

func newVersion(mem *memtable.Memtable, imms []*immMemtable, ssts map[uint32][]*sstHandle) *version {
	v := &version{mem: mem, imms: imms, sstables: ssts}
	for _, m := range v.memtables() {
		m.Ref()
	}
	for _, list := range ssts {
		sort.Slice(list, func(i, j int) bool { return list[i].fileNum < list[j].fileNum })
		for _, h := range list {
			h.ref()
		}
	}
	v.refs.Store(1)
	return v
}

func (v *version) ref() { v.refs.Add(1) }

func (v *version) unref() {
	switch n := v.refs.Add(-1); {
	case n < 0:
		panic("BUG: version unreferenced more than referenced")
	case n == 0:
		for _, list := range v.sstables {
			for _, h := range list {
				h.unref()
			}
		}
		// The last version holding a flushed memtable unmaps its arena
		// here: every reader of it holds a version.
		for _, m := range v.memtables() {
			m.Unref()
		}
	}
}

// memtables returns the mutable memtable and the frozen ones, newest first.
func (v *version) memtables() []*memtable.Memtable {
	out := make([]*memtable.Memtable, 0, 1+len(v.imms))
	out = append(out, v.mem)
	for i := len(v.imms) - 1; i >= 0; i-- {
		out = append(out, v.imms[i].mem)
	}
	return out
}

// cloneSSTables copies the table -> SSTables map so an edit can change it.
func (v *version) cloneSSTables() map[uint32][]*sstHandle {
	out := make(map[uint32][]*sstHandle, len(v.sstables))
	for t, list := range v.sstables {
		out[t] = append([]*sstHandle(nil), list...)
	}
	return out
}
