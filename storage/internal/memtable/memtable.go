// Package memtable is the in-memory, sorted, mutable part of the LSM: the
// newest writes of every table, waiting to be flushed into SSTables.
//
// Invariants:
//   - Writes (Apply* methods) are serialised by the caller; reads (iterators,
//     Deletions, Partitions) may run concurrently with a writer and with each
//     other and always see whole cells.
//   - Each (table, partition, clustering, column) holds exactly one cell: the
//     base.Reconcile of every version written to it. A write that loses to
//     the held cell costs nothing; one that wins appends a new record (the
//     old one stays readable for readers holding it), counted in SizeBytes.
//   - Cells live in an arena (skiplist.go): keys, values and skiplist nodes
//     in large pointer-free slabs, nodes linked by offsets, so the garbage
//     collector has nothing to scan per entry and an insert allocates
//     nothing on average. Level 0 has back links: reverse iteration (the
//     latest-N query) is a step per cell, not a search. An insert starts
//     from where the last insert into its partition went (a splice, kept
//     in 1,024 slots, two a partition), so a partition's keys arriving in order
//     (TimeUUID DESC clustering: each new event before the last) cost a
//     step per level of the new node (its height is drawn first; 1.33
//     levels on average) instead of a search from the head. A key of the
//     last insert's row (same table, partition and clustering: a writer's
//     event is a row of cells applied one after the other) starts from
//     the last two inserts' paths instead (findInRow): right after the
//     last, or right before it or the one before it, with two key
//     comparisons and no hash of the partition. While the partition's
//     shared key ref is known, comparisons take a node holding it for the
//     same partition without comparing the bytes. A walk in key
//     order (TableIter: a flush) prefetches the next node's data and the
//     node after it, since key order is not allocation order (amd64 only:
//     PREFETCHT0 in prefetch_amd64.s; elsewhere a no-op).
//   - Lifetime: where the platform has anonymous mmap the slabs are mapped
//     from the OS, outside the Go heap (arena.go), never reused, and
//     unmapped when the last reference is dropped (Ref, Unref: storage's
//     versions count them) or, for a memtable never referenced, once it is
//     unreachable. A cell, key or partition slice
//     a memtable hands out (Iter.Cell, TableIter.Cell and Partition) is
//     valid only while its holder keeps the Memtable or the iterator
//     reachable: the iterators hold the skiplist, so a slice is safe for as
//     long as the iterator that produced it is, and a caller that keeps
//     bytes beyond that must copy them. In storage, a read's version holds
//     the memtables and its RowIterator holds their iterators until it is
//     dropped (Rows are valid until Next or Close, as for SSTable blocks);
//     a flush holds the frozen memtable until its SSTables are written, and
//     the SSTable writer copies every key and value it keeps. A slice used
//     past that faults instead of reading another memtable's data.
//   - Partition deletions and range tombstones are kept per partition apart
//     from cells, because they cover ranges rather than keys. A range
//     tombstone is appended (O(1), whatever the partition holds); readers
//     get them fragmented (sorted, disjoint), built once per change and
//     never modified afterwards, so a reader may keep what it got.
package memtable

import (
	"bytes"
	"math"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/eventide/eventide/storage/internal/base"
)

// tombstoneOverheadBytes is the Go heap a range tombstone or a partition's
// deletion holder takes beyond its key bytes, for the size estimate that
// triggers flushes. Cells are counted exactly: the arena bytes they use.
const tombstoneOverheadBytes = 64

type partitionID struct {
	table     uint32
	partition string
}

// Memtable holds recent writes in sorted order.
type Memtable struct {
	list *skiplist

	deletionsMu sync.RWMutex
	deletions   map[partitionID]*partitionDeletions

	sizeBytes    atomic.Int64
	written      atomic.Bool
	minTimestamp atomic.Int64
	maxTimestamp atomic.Int64
	// tableMin holds MinTimestampOf each table id (writer-grown).
	tableMin atomic.Pointer[[]atomic.Int64]
	cells    atomic.Int64
	refs     atomic.Int32
}

// Ref adds a reference to the memtable's arena (see Unref).
func (m *Memtable) Ref() { m.refs.Add(1) }

// Unref drops a reference; the last one unmaps the arena, after which
// no cell, key or iterator of the memtable may be used (the caller's
// references must cover every reader). A memtable never referenced is
// unmapped once unreachable instead.
//
// The unmapping runs on a goroutine of its own: munmap of tens of MiB
// shoots down the TLBs of every CPU running the process and holds the
// process's address-space lock, which page faults wait for; storage
// drops versions under its main lock, and a read drops one in Close.
func (m *Memtable) Unref() {
	switch n := m.refs.Add(-1); {
	case n < 0:
		panic("BUG: memtable unreferenced more often than referenced")
	case n == 0:
		go m.list.slabs.release()
	}
}

// New returns an empty memtable.
func New() *Memtable { return NewAccounted(nil) }

// NewAccounted returns an empty memtable that adds the bytes of arena it
// has mapped from the OS to mapped (if not nil), and subtracts them when
// they are unmapped: after the memtable is unreachable, not when it is
// flushed (see Lifetime in the package doc).
func NewAccounted(mapped *atomic.Int64) *Memtable {
	m := &Memtable{list: newSkiplist(mapped), deletions: make(map[partitionID]*partitionDeletions)}
	m.minTimestamp.Store(math.MaxInt64)
	m.maxTimestamp.Store(math.MinInt64)
	return m
}

// SizeBytes estimates the memory the memtable holds.
func (m *Memtable) SizeBytes() int64 { return m.sizeBytes.Load() }

// Empty reports whether nothing was written.
func (m *Memtable) Empty() bool { return !m.written.Load() }

// MinTimestamp is the smallest write timestamp of any cell or deletion
// (math.MaxInt64 when empty). Compaction uses it to decide whether a
// tombstone may be purged.
func (m *Memtable) MinTimestamp() int64 { return m.minTimestamp.Load() }

// MaxTimestamp is the largest write timestamp (math.MinInt64 when empty).
func (m *Memtable) MaxTimestamp() int64 { return m.maxTimestamp.Load() }

// Cells is the number of distinct cell keys held.
func (m *Memtable) Cells() int64 { return m.cells.Load() }

// MinTimestampOf is the smallest write timestamp of table's cells and
// deletions (math.MaxInt64 if it has none): tables may use unrelated
// timestamp scales (wall-clock micros, stream positions), so a decision
// about one table's data must not look at another's.
func (m *Memtable) MinTimestampOf(table uint32) int64 {
	mins := m.tableMin.Load()
	if mins == nil || int(table) >= len(*mins) {
		return math.MaxInt64
	}
	return (*mins)[table].Load()
}

func (m *Memtable) noteTimestamp(table uint32, ts int64) {
	mins := m.tableMin.Load()
	if mins == nil || int(table) >= len(*mins) {
		// Table ids are small and dense: grow the array (copied, so
		// readers keep a consistent one) to hold this one.
		n := max(int(table)+1, 8)
		if mins != nil {
			n = max(n, 2*len(*mins))
		}
		grown := make([]atomic.Int64, n)
		for i := range grown {
			grown[i].Store(math.MaxInt64)
		}
		if mins != nil {
			for i := range *mins {
				grown[i].Store((*mins)[i].Load())
			}
		}
		m.tableMin.Store(&grown)
		mins = &grown
	}
	if !m.written.Load() {
		m.written.Store(true) // an exchange: not once a cell
	}
	if tm := &(*mins)[table]; ts < tm.Load() {
		tm.Store(ts)
	}
	if ts < m.minTimestamp.Load() {
		m.minTimestamp.Store(ts)
	}
	if ts > m.maxTimestamp.Load() {
		m.maxTimestamp.Store(ts)
	}
}

// ApplyCell writes one cell version, reconciling it with the one held.
// The memtable copies the cell's bytes into its arena. Writer only.
func (m *Memtable) ApplyCell(table uint32, partition []byte, c *base.Cell) {
	before := m.list.arenaBytes
	k := key{table: table, partition: partition, clustering: c.Clustering, column: c.Column}
	ref, inserted := m.list.upsertSharingPartition(k, c)
	if inserted {
		m.cells.Add(1)
	} else {
		var old base.Cell
		m.list.cell(ref, &old)
		merged := base.Reconcile(old, *c)
		// A write that loses to the cell held (an older or duplicate
		// version) costs nothing; one that wins appends a new record, the
		// old one staying for readers that hold it.
		if !sameVersion(&merged, &old) {
			m.list.setCell(ref, &merged)
		}
	}
	m.sizeBytes.Add(m.list.arenaBytes - before)
	m.noteTimestamp(table, c.Timestamp)
}

func sameVersion(a, b *base.Cell) bool {
	return a.Kind == b.Kind && a.Timestamp == b.Timestamp && a.TTL == b.TTL &&
		a.LocalDeletionTime == b.LocalDeletionTime && bytes.Equal(a.Value, b.Value)
}

// ApplyPartitionDeletion records a partition-level deletion. Writer only.
func (m *Memtable) ApplyPartitionDeletion(table uint32, partition []byte, d base.DeletionTime) {
	pd := m.partitionDeletions(table, partition)
	pd.mu.Lock()
	pd.partition = pd.partition.Max(d)
	pd.view = nil
	pd.mu.Unlock()
	m.noteTimestamp(table, d.MarkedForDeleteAt)
}

// ApplyRangeTombstone records a range (or row) tombstone: an append, so a
// partition's deletions cost O(1) each however many it holds (they are
// fragmented when next read). Writer only.
func (m *Memtable) ApplyRangeTombstone(table uint32, partition []byte, rt base.RangeTombstone) {
	rt = rt.Clone()
	pd := m.partitionDeletions(table, partition)
	pd.mu.Lock()
	pd.pending = append(pd.pending, rt)
	pd.view = nil
	pd.mu.Unlock()
	m.sizeBytes.Add(int64(tombstoneOverheadBytes + len(rt.Start.Key) + len(rt.End.Key)))
	m.noteTimestamp(table, rt.Deletion.MarkedForDeleteAt)
}

// partitionDeletions holds one partition's deletions. Range tombstones are
// appended to pending by the writer; a reader folds pending into fragments
// (sorted, disjoint, base.FragmentRanges) and publishes the result as
// view, which stays valid, unmodified, for whoever holds it.
type partitionDeletions struct {
	mu        sync.Mutex
	partition base.DeletionTime
	fragments []base.RangeTombstone // never modified once built
	pending   []base.RangeTombstone
	view      *base.PartitionDeletions // nil after a change
}

// partitionDeletions returns the partition's deletion holder, creating it.
// Writer only.
func (m *Memtable) partitionDeletions(table uint32, partition []byte) *partitionDeletions {
	id := partitionID{table: table, partition: string(partition)}
	m.deletionsMu.RLock()
	pd := m.deletions[id]
	m.deletionsMu.RUnlock()
	if pd != nil {
		return pd
	}
	pd = &partitionDeletions{partition: base.LiveDeletion}
	m.deletionsMu.Lock()
	m.deletions[id] = pd
	m.deletionsMu.Unlock()
	m.sizeBytes.Add(int64(tombstoneOverheadBytes + len(partition)))
	return pd
}

// Deletions returns the partition's deletions, or nil if it has none. Its
// ranges are fragmented (base.IsFragmented). The result must not be
// modified; it stays valid while the memtable changes.
func (m *Memtable) Deletions(table uint32, partition []byte) *base.PartitionDeletions {
	m.deletionsMu.RLock()
	pd := m.deletions[partitionID{table: table, partition: string(partition)}]
	m.deletionsMu.RUnlock()
	if pd == nil {
		return nil
	}
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.view == nil {
		if len(pd.pending) > 0 {
			// A fresh slice: readers may hold the old fragments.
			all := make([]base.RangeTombstone, 0, len(pd.fragments)+len(pd.pending))
			all = append(append(all, pd.fragments...), pd.pending...)
			pd.fragments = base.FragmentRanges(all)
			pd.pending = nil
		}
		pd.view = &base.PartitionDeletions{Partition: pd.partition, Ranges: pd.fragments}
	}
	return pd.view
}

// HasPartition reports whether the memtable holds anything (cells or
// deletions) for the partition.
func (m *Memtable) HasPartition(table uint32, partition []byte) bool {
	m.deletionsMu.RLock()
	_, deleted := m.deletions[partitionID{table: table, partition: string(partition)}]
	m.deletionsMu.RUnlock()
	if deleted {
		return true
	}
	k := key{table: table, partition: partition}
	n := m.list.findGreaterOrEqual(&k, nil)
	return n != 0 && m.list.table(n) == table && bytes.Equal(m.list.partition(n), partition)
}

// Tables returns the ids of the tables with data, ascending.
func (m *Memtable) Tables() []uint32 {
	seen := map[uint32]bool{}
	for n := m.list.first(); n != 0; {
		t := m.list.table(n)
		seen[t] = true
		// Jump to the next table.
		if t == math.MaxUint32 {
			break
		}
		next := key{table: t + 1}
		n = m.list.findGreaterOrEqual(&next, nil)
	}
	m.deletionsMu.RLock()
	for id := range m.deletions {
		seen[id.table] = true
	}
	m.deletionsMu.RUnlock()
	out := make([]uint32, 0, len(seen))
	for t := range seen {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// DeletionPartitions returns the keys of table's partitions that have
// deletions (partition or range), ascending.
func (m *Memtable) DeletionPartitions(table uint32) [][]byte {
	var keys [][]byte
	m.deletionsMu.RLock()
	for id := range m.deletions {
		if id.table == table {
			keys = append(keys, []byte(id.partition))
		}
	}
	m.deletionsMu.RUnlock()
	sort.Slice(keys, func(i, j int) bool { return bytes.Compare(keys[i], keys[j]) < 0 })
	return keys
}
