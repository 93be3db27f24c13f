package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/eventide/eventide/storage/internal/base"
	"github.com/eventide/eventide/storage/internal/sstable"
)

// Bound is one end of a clustering range; a nil Key is unbounded.
type Bound = base.Bound

// ErrTooManyTombstones is returned by a slice that scanned more tombstones
// than its SliceQuery.MaxTombstones.
var ErrTooManyTombstones = errors.New("eventide/storage: too many tombstones scanned")

// SliceQuery reads a range of rows of one partition.
type SliceQuery struct {
	Table     string
	Partition []byte
	// Start and End bound the clustering keys, in storage (byte) order,
	// whatever Reverse says.
	Start, End Bound
	// Reverse returns rows in descending clustering order.
	Reverse bool
	// Limit is the most rows to return; 0 means no limit. The read stops
	// as soon as it has them.
	Limit int
	// MaxTombstones aborts the read with ErrTooManyTombstones once more
	// tombstones than this were scanned; 0 means no limit.
	MaxTombstones int
	// NoCacheFill reads through the block cache without filling it: the
	// data blocks and index pages it holds are used, the ones read from
	// SSTables are not added (a bulk scan, such as the fan-out's walk of
	// a follower list or its trim checks of a million timelines, would
	// otherwise evict the blocks that queries keep hot, and fill the
	// cache's memory with blocks read once).
	NoCacheFill bool
}

// Cell is a live cell of a row.
type Cell struct {
	Column []byte
	Value  []byte
	// WriteTimeMicros is the cell's timestamp.
	WriteTimeMicros int64
	// ExpiresAt is the unix second the cell expires at; 0 if never.
	ExpiresAt int64
	// TTLSeconds is the cell's TTL; 0 if none.
	TTLSeconds int32
	// Counter marks a counter cell; CounterValue holds its sum.
	Counter      bool
	CounterValue int64
}

// Row is the live content of one clustering key.
type Row struct {
	Clustering []byte
	Cells      []Cell
}

// ReadStats says what a read touched: the trace of a query.
type ReadStats struct {
	Rows int
	// LiveCells is the number of live cells returned.
	LiveCells int
	// TombstonesScanned counts every dead cell the read walked: cell
	// tombstones, expired cells (an expired cell is a tombstone), cells
	// shadowed by a deletion, and the range/row/partition deletions
	// themselves: a partition deletion when the read opens, a range or
	// row deletion when the walk reaches it (a read that stops early
	// does not count those beyond). Expired cells in blocks or SSTables
	// skipped unread are not walked and not counted here: they count in
	// BlocksSkipped and SSTablesSkippedExpired.
	TombstonesScanned int
	MemtablesRead     int
	SSTablesRead      int
	// SSTablesSkipped were skipped unopened, for any reason: bloom
	// filter, partition absent, clustering range or expiry, or the slice
	// ended before reaching their first clustering key.
	SSTablesSkipped int
	// SSTablesSkippedByBloom is the part of SSTablesSkipped ruled out by
	// the bloom filter alone, without looking at the partition index.
	SSTablesSkippedByBloom int
	// SSTablesSkippedExpired is the part of SSTablesSkipped whose cells of
	// the partition were all expired or deleted and shadowed nothing.
	SSTablesSkippedExpired int
	BlocksRead             int
	// BlocksCached is the part of BlocksRead found in the block cache;
	// the others were read from their file, decompressed and decoded.
	BlocksCached int
	// BlocksSkipped were fully expired blocks that shadowed nothing,
	// skipped unread.
	BlocksSkipped int
	// IndexPagesRead counts the SSTable index pages read from their file
	// (not found in the block cache) to find the partition.
	IndexPagesRead int
}

func (s ReadStats) String() string {
	return fmt.Sprintf("read %d live and %d tombstoned cells in %d SSTables (%d blocks, %d cached, %d skipped; %d index pages from the file) and %d memtables, %d rows; skipped unread %d SSTables (%d by bloom filter, %d expired)",
		s.LiveCells, s.TombstonesScanned, s.SSTablesRead, s.BlocksRead, s.BlocksCached, s.BlocksSkipped, s.IndexPagesRead, s.MemtablesRead, s.Rows,
		s.SSTablesSkipped, s.SSTablesSkippedByBloom, s.SSTablesSkippedExpired)
}

// Rows is what a slice returns: its rows in order, then its error and its
// trace. *RowIterator is the local implementation; a client of a remote
// shard can be another.
type Rows interface {
	// Next advances to the next row with at least one live cell.
	Next() bool
	// Row is the current row, valid until the next call to Next or Close.
	Row() *Row
	// Err is the error that ended the iteration, if any.
	Err() error
	// Stats is what the read touched so far (complete after Next returns
	// false or Close).
	Stats() ReadStats
	// Close releases what the read holds and returns Err.
	Close() error
}

// ctxCheckInterval is how many merged cells a slice reads between two
// checks of its context: often enough that a cancelled query stops within
// a block or two, rarely enough to cost nothing measurable.
const ctxCheckInterval = 256

// rowScan is the state of one slice read: its snapshot, sources, merge
// and the row being built. RowIterator hands it out and takes it back into
// rowScanPool once the read has finished, so a query allocates neither it
// nor its first buffers.
type rowScan struct {
	db    *DB
	ctx   context.Context
	v     *version
	q     SliceQuery
	now   int64
	merge *mergingIter
	// cands are the SSTables that hold the partition, and
	// memMinTimestamp the oldest write in the memtables that do
	// (olderDataOverlaps).
	cands           []candidate
	memMinTimestamp int64
	// deletion gathers the partition deletion and the range tombstones
	// of every source (each source's already fragmented);
	// rangeSources counts the sources that had ranges, and ranges is the
	// cursor over their fragments that moves with the scan;
	// rangesCounted is how many of them are counted as scanned
	// tombstones (countRanges).
	deletion      base.PartitionDeletions
	rangeSources  int
	ranges        base.RangeCursor
	rangesCounted int
	sstIters      []*sstable.PartitionIter
	stats         ReadStats

	row      Row
	building rowBuilder
	// The first arrays of what a read of one source (the usual case)
	// sets up, in the iterator's own allocation.
	mergeBuf    mergingIter
	sourcesBuf  [1]cellSource
	lazyBuf     [1]lazySource
	sstItersBuf [1]*sstable.PartitionIter
	cellsBuf    [2][1]Cell // Row's and building's first arrays
	candsBuf    [1]candidate
	sstIterVals [1]sstable.PartitionIter // the first SSTable's iterator
	// iterVals holds the SSTables' iterators; sources and lazy are what
	// open gave the merge (kept to be reused, see spare).
	iterVals []sstable.PartitionIter
	sources  []cellSource
	lazy     []lazySource
	// spare holds the arrays an earlier read of several sources grew
	// beyond the first ones above, emptied, for the next read that takes
	// this scan from the pool.
	spare scanSpares
	// untilCtxCheck counts merged cells down to the next context check.
	untilCtxCheck int32
	// pending says merge.Cell() holds a cell not yet consumed: the first
	// cell of the next row, read to know the previous row had ended.
	pending bool
	done    bool
	err     error
}

// rowBuilder assembles the live cells of one clustering key.
type rowBuilder struct {
	inRow      bool
	clustering []byte
	deletion   base.DeletionTime
	cells      []Cell
}

// Slice starts a slice read. The iterator sees a consistent snapshot of
// the store taken now. The read checks ctx as it scans (every few hundred
// cells): once ctx is done, Next returns false and Err wraps ctx.Err().
// The result is a *RowIterator.
func (db *DB) Slice(ctx context.Context, q SliceQuery) (Rows, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cannot read partition %q of table %q: %w", q.Partition, q.Table, err)
	}
	if len(q.Partition) == 0 {
		return nil, fmt.Errorf("cannot read table %q: empty partition key", q.Table)
	}
	if q.Limit < 0 {
		return nil, fmt.Errorf("cannot read table %q: negative limit %d", q.Table, q.Limit)
	}
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return nil, ErrClosed
	}
	t, err := db.lookupTableLocked(q.Table)
	if err != nil {
		db.mu.Unlock()
		return nil, err
	}
	v := db.current
	v.ref()
	db.mu.Unlock()

	s := rowScanPool.Get().(*rowScan)
	s.db, s.ctx, s.v, s.q, s.now, s.untilCtxCheck = db, ctx, v, q, db.opts.Clock.Now().Unix(), ctxCheckInterval
	s.deletion.Partition = base.LiveDeletion
	s.row.Cells, s.building.cells = s.cellsBuf[0][:0], s.cellsBuf[1][:0]
	s.open(t.id)
	it := &RowIterator{s: s}
	runtime.SetFinalizer(it, releaseUnclosed)
	return it, nil
}

// releaseUnclosed releases the scan of a RowIterator that became
// unreachable without Close (a caller's bug): until now its snapshot kept
// the SSTables it read from being deleted and its blocks from going back
// to the arena. It runs on the runtime's cleanup goroutine, once, and
// never for an iterator that was finished or closed (release stops it).
// The scan is not pooled again: nothing else can hold it, but a leak is
// rare enough not to matter.
func releaseUnclosed(it *RowIterator) {
	s := it.s
	if s == nil {
		return
	}
	db, table := s.db, s.q.Table
	s.finish()
	if s.v != nil {
		s.v.unref()
	}
	db.metrics.unclosedReads.Add(1)
	db.log.Warn("a slice was never closed; the garbage collector released it (call Close on every Rows, or read it to the end)",
		"table", table)
}

// rowScanPool holds finished scans for the next read (reset to zero, so a
// pooled scan pins no snapshot, context or block).
var rowScanPool = sync.Pool{New: func() any { return new(rowScan) }}

// RowIterator returns the rows of a slice in order. Close it when done.
//
// Its scan goes back to a pool as soon as the read has finished (Next has
// returned false, or Close): from then on Row is empty and Stats and Err
// are the read's final ones. Until then it holds a snapshot (the SSTables
// it reads cannot be deleted) and the blocks it is on. An iterator
// dropped before that is released when the garbage collector finds it
// unreachable (a finalizer: no allocation, unlike runtime.AddCleanup's
// closure, on the read path), with a warning in the log and
// Metrics.UnclosedReads counting it.
type RowIterator struct {
	s     *rowScan // nil once finished
	stats ReadStats
	err   error
}

// Next advances to the next row with at least one live cell.
func (it *RowIterator) Next() bool {
	if it.s == nil {
		return false
	}
	if it.s.next() {
		return true
	}
	it.release()
	return false
}

// Row returns the current row; it is valid until the next call to Next or
// Close (which lets the row's blocks be reused).
func (it *RowIterator) Row() *Row {
	if it.s == nil {
		return &Row{}
	}
	return &it.s.row
}

// Err returns the error that ended the iteration, if any.
func (it *RowIterator) Err() error {
	if it.s == nil {
		return it.err
	}
	return it.s.err
}

// Stats returns what the read touched so far (complete after Next returns
// false or Close).
func (it *RowIterator) Stats() ReadStats {
	if it.s == nil {
		return it.stats
	}
	return it.s.stats
}

// Close releases the snapshot and returns Err.
func (it *RowIterator) Close() error {
	if it.s != nil {
		it.release()
	}
	return it.err
}

// release finishes the scan (closing its SSTable iterators and counting
// the read in the metrics, if Next has not), keeps its stats and error,
// releases its snapshot and puts it back in the pool.
func (it *RowIterator) release() {
	s := it.s
	runtime.SetFinalizer(it, nil)
	s.finish()
	it.stats, it.err = s.stats, s.err
	if s.v != nil {
		s.v.unref()
	}
	spare := s.spares()
	*s = rowScan{spare: spare}
	rowScanPool.Put(s)
	it.s = nil
}

// candidate is one SSTable that holds the partition.
type candidate struct {
	h    *sstHandle
	info sstable.PartitionInfo
}

func (it *rowScan) open(tableID uint32) {
	q := &it.q
	sources := orSpare(it.sourcesBuf[:0], it.spare.sources)
	lazy := orSpare(it.lazyBuf[:0], it.spare.lazy)
	it.sstIters = orSpare(it.sstItersBuf[:0], it.spare.iters)
	it.memMinTimestamp = int64(1<<63 - 1)
	for _, mem := range it.v.memtables() {
		if !mem.HasPartition(tableID, q.Partition) {
			continue
		}
		it.stats.MemtablesRead++
		it.memMinTimestamp = min(it.memMinTimestamp, mem.MinTimestamp())
		if d := mem.Deletions(tableID, q.Partition); d != nil {
			it.addDeletions(d)
		}
		sources = append(sources, mem.NewIter(tableID, q.Partition, q.Start, q.End, q.Reverse))
	}

	cands := orSpare(it.candsBuf[:0], it.spare.cands)
	for _, h := range it.v.sstables[tableID] {
		if !h.reader.MayContain(q.Partition) {
			it.stats.SSTablesSkipped++
			it.stats.SSTablesSkippedByBloom++
			continue
		}
		find := h.reader.FindPartition
		if q.NoCacheFill {
			find = h.reader.FindPartitionNoCacheFill
		}
		info, ok, err := find(q.Partition)
		if info.IndexPageRead() {
			it.stats.IndexPagesRead++
		}
		if err != nil && it.err == nil {
			// Next reports it; the sources are still set up so that
			// finish and Close work as usual.
			it.err = fmt.Errorf("cannot read partition %q of table %q: %w", q.Partition, q.Table, err)
		}
		if !ok {
			it.stats.SSTablesSkipped++
			continue
		}
		cands = append(cands, candidate{h: h, info: info})
	}

	it.cands = cands
	// The SSTables' iterators live in the scan's own array (the pooled
	// one's, if large enough): sized now, as they must not move.
	it.iterVals = it.sstIterVals[:]
	if len(cands) > len(it.iterVals) {
		if it.iterVals = it.spare.iterVals[:cap(it.spare.iterVals)]; len(cands) > len(it.iterVals) {
			it.iterVals = make([]sstable.PartitionIter, len(cands))
		}
	}
	for i := range cands {
		c := &cands[i]
		in := &c.info
		// A partition's deletions may cover clustering keys beyond its
		// cells, so with deletions it is judged against the whole range.
		if in.MaxLocalDeletionTime < it.now && !it.olderDataOverlaps(i, in.MaxTimestamp, in.MinClustering, in.MaxClustering, !in.Deletions.IsEmpty()) {
			// Everything it holds for the partition is expired or deleted
			// and shadows nothing: reading it could only count tombstones.
			it.stats.SSTablesSkipped++
			it.stats.SSTablesSkippedExpired++
			continue
		}
		it.addDeletions(&c.info.Deletions)
		if c.info.Cells == 0 || !overlaps(c.info.MinClustering, c.info.MaxClustering, q.Start, q.End) {
			it.stats.SSTablesSkipped++
			continue
		}
		it.stats.SSTablesRead++
		idx := i
		o := sstable.IterOptions{
			Start: q.Start, End: q.End, Reverse: q.Reverse, NoCacheFill: q.NoCacheFill,
			SkipBlock: func(b sstable.BlockMeta) bool {
				return b.MaxLocalDeletionTime < it.now && !it.olderDataOverlaps(idx, b.MaxTimestamp, b.MinClustering, b.MaxClustering, false)
			},
		}
		var pi *sstable.PartitionIter
		pi = &it.iterVals[len(it.sstIters)]
		c.h.reader.InitPartitionIter(pi, c.info, o)
		it.sstIters = append(it.sstIters, pi)
		first := c.info.MinClustering
		if q.Reverse {
			first = c.info.MaxClustering
		}
		lazy = append(lazy, lazySource{src: pi, first: first})
	}
	if it.rangeSources > 1 {
		it.deletion.Ranges = base.FragmentRanges(it.deletion.Ranges)
	}
	it.ranges = base.NewRangeCursor(it.deletion.Ranges, q.Reverse)
	it.sources, it.lazy = sources, lazy
	it.merge = &it.mergeBuf
	it.merge.initWith(sources, lazy, q.Reverse, it.spare.heap)
}

// olderDataOverlaps reports whether any source other than candidate skip
// may hold a live cell written at or before maxTimestamp with a
// clustering key in [minCK, maxCK] (everywhere, if wholeRange): only such
// a cell can be shadowed by expired cells or old deletions, so when there
// is none, fully expired SSTables and blocks can be skipped without
// changing the result. Cells that are dead at now are dead whether or not
// something shadows them, so a candidate with nothing live, or whose
// overlapping blocks hold nothing live that old, does not count (the
// ±2 s jitter of time-series writes makes consecutive files overlap
// slightly, and the overlap is usually expired on both sides).
func (it *rowScan) olderDataOverlaps(skip int, maxTimestamp int64, minCK, maxCK []byte, wholeRange bool) bool {
	if it.memMinTimestamp <= maxTimestamp {
		return true
	}
	for i := range it.cands {
		if i == skip {
			continue
		}
		in := &it.cands[i].info
		if in.MinTimestamp > maxTimestamp || in.MaxLocalDeletionTime < it.now {
			continue
		}
		if !in.Deletions.IsEmpty() {
			return true
		}
		if in.Cells == 0 {
			continue
		}
		lo, hi := minCK, maxCK
		if wholeRange {
			lo, hi = nil, nil
		}
		if it.cands[i].h.reader.AnyBlock(*in, lo, hi, func(b sstable.BlockMeta) bool {
			return b.MinTimestamp <= maxTimestamp && b.MaxLocalDeletionTime >= it.now
		}) {
			return true
		}
	}
	return false
}

// overlaps reports whether the clustering range [minCK, maxCK] intersects
// [start, end].
func overlaps(minCK, maxCK []byte, start, end base.Bound) bool {
	return base.AfterStart(maxCK, start) && base.BeforeEnd(minCK, end)
}

func (it *rowScan) addDeletions(d *base.PartitionDeletions) {
	if !d.Partition.IsLive() {
		if it.deletion.Partition.IsLive() {
			it.stats.TombstonesScanned++
		}
		it.deletion.Partition = it.deletion.Partition.Max(d.Partition)
	}
	// The source's ranges are fragments, sorted: those overlapping the
	// slice are one run of them. The first source's run is used as is;
	// more are gathered into a new slice and fragmented together.
	run := base.OverlappingFragments(d.Ranges, it.q.Start, it.q.End)
	if len(run) == 0 {
		return
	}
	it.rangeSources++
	if it.rangeSources == 1 {
		it.deletion.Ranges = run
		return
	}
	if it.rangeSources == 2 {
		it.deletion.Ranges = append([]base.RangeTombstone(nil), it.deletion.Ranges...)
	}
	it.deletion.Ranges = append(it.deletion.Ranges, run...)
}

// next advances to the next row with at least one live cell; false means
// the read has finished (or failed at open: release finishes it then).
func (it *rowScan) next() bool {
	if it.done || it.err != nil {
		return false
	}
	if it.q.Limit > 0 && it.stats.Rows >= it.q.Limit {
		it.finish()
		return false
	}
	if it.tooManyTombstones() { // a partition deletion is counted at open
		return false
	}
	b := &it.building
	for {
		if !it.pending && !it.merge.Next() {
			if err := it.merge.Err(); err != nil {
				it.fail(err)
				return false
			}
			// The walk reached the slice's end, past every deletion
			// within its bounds.
			it.countRanges(it.ranges.Len())
			if it.tooManyTombstones() {
				return false
			}
			if b.inRow && len(b.cells) > 0 {
				it.emit()
				return true
			}
			it.finish()
			return false
		}
		it.pending = false
		if it.untilCtxCheck--; it.untilCtxCheck <= 0 {
			it.untilCtxCheck = ctxCheckInterval
			if err := it.ctx.Err(); err != nil {
				it.fail(fmt.Errorf("cannot finish reading partition %q of table %q: %w", it.q.Partition, it.q.Table, err))
				return false
			}
		}
		c := it.merge.Cell()
		if b.inRow && !bytes.Equal(c.Clustering, b.clustering) {
			if len(b.cells) > 0 {
				// c begins the next row; the merge keeps it as the
				// lookahead for the next call ("what is needed, plus one").
				it.pending = true
				it.emit()
				return true
			}
			b.inRow = false
		}
		if !b.inRow {
			b.inRow = true
			b.clustering = c.Clustering
			b.cells = b.cells[:0]
			b.deletion = it.deletion.Partition.Max(it.ranges.Deletion(c.Clustering))
			if it.countRanges(it.ranges.Reached()) && it.tooManyTombstones() {
				return false
			}
		}
		if b.deletion.Deletes(c.Timestamp) || !c.IsLive(it.now) {
			it.stats.TombstonesScanned++
			if it.tooManyTombstones() {
				return false
			}
			continue
		}
		cell := Cell{Column: c.Column, Value: c.Value, WriteTimeMicros: c.Timestamp}
		switch c.Kind {
		case base.KindExpiring:
			cell.ExpiresAt, cell.TTLSeconds = c.LocalDeletionTime, c.TTL
		case base.KindCounter:
			cell.Counter, cell.CounterValue = true, c.CounterValue()
		}
		b.cells = append(b.cells, cell)
	}
}

// countRanges counts the range and row deletions the walk has reached,
// reached of them in scan order (base.RangeCursor.Reached), as scanned
// tombstones: each once, when the walk gets to it. It reports whether it
// counted any.
func (it *rowScan) countRanges(reached int) bool {
	if reached <= it.rangesCounted {
		return false
	}
	it.stats.TombstonesScanned += reached - it.rangesCounted
	it.rangesCounted = reached
	return true
}

// tooManyTombstones fails the read once it has scanned more tombstones
// than the query allows.
func (it *rowScan) tooManyTombstones() bool {
	if it.q.MaxTombstones > 0 && it.stats.TombstonesScanned > it.q.MaxTombstones {
		it.fail(fmt.Errorf("%w: %d in partition %q of table %q (limit %d); narrow the slice bounds",
			ErrTooManyTombstones, it.stats.TombstonesScanned, it.q.Partition, it.q.Table, it.q.MaxTombstones))
		return true
	}
	return false
}

// emit moves the assembled row to Row.
func (it *rowScan) emit() {
	b := &it.building
	it.row.Clustering = b.clustering
	// The row takes the built cells and gives its array to the next
	// row: Row is valid only until the next call to Next.
	it.row.Cells, b.cells = b.cells, it.row.Cells[:0]
	if it.q.Reverse {
		// Cells of a row arrive in descending column order.
		cells := it.row.Cells
		for i, j := 0, len(cells)-1; i < j; i, j = i+1, j-1 {
			cells[i], cells[j] = cells[j], cells[i]
		}
	}
	it.stats.Rows++
	it.stats.LiveCells += len(it.row.Cells)
	b.inRow = false
	b.cells = b.cells[:0]
}

func (it *rowScan) fail(err error) {
	it.err = err
	it.finish()
}

func (it *rowScan) finish() {
	if it.done {
		return
	}
	it.done = true
	// SSTables the merge never positioned were not read after all.
	unopened := it.merge.unopened()
	it.stats.SSTablesRead -= unopened
	it.stats.SSTablesSkipped += unopened
	for _, s := range it.sstIters {
		it.stats.BlocksRead += s.BlocksRead()
		it.stats.BlocksCached += s.BlocksCached()
		it.stats.BlocksSkipped += s.BlocksSkipped()
		s.Close()
	}
	it.db.metrics.read(&it.stats)
}

// scanSpares are a pooled scan's arrays for reads of several sources.
type scanSpares struct {
	sources  []cellSource
	lazy     []lazySource
	heap     []cellSource
	cands    []candidate
	iters    []*sstable.PartitionIter
	iterVals []sstable.PartitionIter
}

// maxSpare is the most elements a pooled scan keeps in a spare array: a
// read of more sources than that allocates its own.
const maxSpare = 64

// spares returns the scan's grown arrays, cleared (they pin nothing), to
// keep for the next read; the first arrays inside the scan are not kept.
// The scan has finished: its iterators are closed.
func (it *rowScan) spares() scanSpares {
	return scanSpares{
		sources:  spareOf(it.sources, len(it.sourcesBuf), it.spare.sources),
		lazy:     spareOf(it.lazy, len(it.lazyBuf), it.spare.lazy),
		heap:     spareOf(it.merge.heap, len(it.merge.heapBuf), it.spare.heap),
		cands:    spareOf(it.cands, len(it.candsBuf), it.spare.cands),
		iters:    spareOf(it.sstIters, len(it.sstItersBuf), it.spare.iters),
		iterVals: spareOf(it.iterVals, len(it.sstIterVals), it.spare.iterVals),
	}
}

// spareOf returns a (cleared) if it grew beyond a scan's first array of
// inline elements and is not too large, else the spare kept before.
func spareOf[T any](a []T, inline int, kept []T) []T {
	if cap(a) <= inline || cap(a) > maxSpare {
		return kept
	}
	a = a[:cap(a)]
	clear(a)
	return a[:0]
}

// orSpare returns first, or spare (emptied) if it has more room.
func orSpare[T any](first, spare []T) []T {
	if cap(spare) > cap(first) {
		return spare[:0]
	}
	return first
}
