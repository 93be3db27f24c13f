package sstable

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/eventide/eventide/storage/internal/base"
)

// IterOptions bound and direct a PartitionIter.
type IterOptions struct {
	// Start and End bound the clustering keys, each inclusive or
	// exclusive; a nil Key is unbounded.
	Start, End base.Bound
	// Reverse iterates from End down to Start: descending clustering
	// keys, and within a row descending columns.
	Reverse bool
	// SkipBlock, if set, is called with the metadata of each block that
	// may overlap [Start, End] before it is read; returning true skips
	// the block unread.
	SkipBlock func(BlockMeta) bool
	// NoCacheFill uses the blocks the cache holds but does not add the
	// ones it reads from the file: a bulk scan (the fan-out's walk of a
	// million followers) must not evict the blocks queries keep hot.
	// Its blocks are released to the arena when the iterator closes.
	// (Its partition's index page is found with
	// Reader.FindPartitionNoCacheFill.)
	NoCacheFill bool
}

// PartitionIter iterates over the cells of one partition within clustering
// bounds, reading only the blocks that can overlap them. Use it from one
// goroutine:
//
//	it := r.NewPartitionIter(info, opts)
//	defer it.Close()
//	for it.Next() { use(it.Cell()) }
//	if err := it.Err(); err != nil { ... }
type PartitionIter struct {
	r      *Reader
	pg     *indexPage
	o      IterOptions
	lo, hi int // the partition's block range
	bi     int // next block to consider, or the current one while blk != nil
	blk    *loadedBlock
	ci     int // next cell index in blk
	// stop is where the bounds end in blk: forward, the first cell
	// after End (blk.len() if none); in reverse, the last cell before
	// Start (-1 if none). Found once per block by binary search, so
	// that handing out a cell compares no keys.
	stop int
	// held are the blocks loaded so far, released by Close: cells handed
	// out alias them and may outlive the iterator's move to another
	// block (a merge keeps the previous cell while it looks ahead).
	held    []*loadedBlock
	heldBuf [4]*loadedBlock // held's first array: most reads load few blocks
	cell    base.Cell
	started bool
	done    bool
	err     error
	read    int
	cached  int
	skipped int
}

// NewPartitionIter returns an iterator over partition p of this reader
// (as returned by FindPartition or a Scanner).
func (r *Reader) NewPartitionIter(p PartitionInfo, o IterOptions) *PartitionIter {
	it := new(PartitionIter)
	r.InitPartitionIter(it, p, o)
	return it
}

// InitPartitionIter sets it up as NewPartitionIter's result, in memory the
// caller owns (a read that reuses its iterators allocates none). it must
// be zero or closed.
func (r *Reader) InitPartitionIter(it *PartitionIter, p PartitionInfo, o IterOptions) {
	*it = PartitionIter{r: r, pg: p.pg, o: o, lo: p.firstBlock, hi: p.firstBlock + p.numBlocks}
	it.held = it.heldBuf[:0]
	if p.numBlocks == 0 && p.firstBlock == 0 {
		it.done = true // no cells (a zero PartitionInfo included)
	} else if !r.owns(p) {
		it.err = fmt.Errorf("cannot iterate partition %x of sstable %s: not one of its partitions (PartitionInfo from another file?)", p.Key, r.path)
		it.done = true
	}
}

// owns reports whether p, as returned by FindPartition or a Scanner, can
// be one of r's partitions: its page was read by r (file numbers are
// unique while a cache lives) and its blocks are the page's.
func (r *Reader) owns(p PartitionInfo) bool {
	if p.pg == nil || p.firstBlock < 0 || p.numBlocks < 0 || p.firstBlock+p.numBlocks > p.pg.blocks.len() {
		return false
	}
	return p.pg.fileNum == r.fileNum
}

// AnyBlock reports whether pred holds for a block of partition p (as
// returned by FindPartition) whose clustering range intersects [minCK, maxCK];
// a nil bound is open. It reads only the block index of p's page (in memory), so a read
// can ask what another file holds before deciding to skip a block.
func (r *Reader) AnyBlock(p PartitionInfo, minCK, maxCK []byte, pred func(BlockMeta) bool) bool {
	lo, hi := p.firstBlock, p.firstBlock+p.numBlocks
	if p.pg == nil || lo < 0 || lo > hi || hi > p.pg.blocks.len() {
		return true // not a partition of a file: claim the worst
	}
	blocks := &p.pg.blocks
	i := lo
	if minCK != nil {
		i = lo + sort.Search(hi-lo, func(j int) bool {
			h := blocks.handle(lo + j)
			return bytes.Compare(h.meta.MaxClustering, minCK) >= 0
		})
	}
	for ; i < hi; i++ {
		h := blocks.handle(i)
		if maxCK != nil && bytes.Compare(h.meta.MinClustering, maxCK) > 0 {
			return false
		}
		if pred(h.meta) {
			return true
		}
	}
	return false
}

// seek positions bi at the first block to consider.
func (it *PartitionIter) seek() {
	blocks := &it.pg.blocks
	n := it.hi - it.lo
	if !it.o.Reverse {
		// The first block whose last key is at or after Start.
		it.bi = it.lo + sort.Search(n, func(i int) bool {
			h := blocks.handle(it.lo + i)
			return base.AfterStart(h.meta.MaxClustering, it.o.Start)
		})
		return
	}
	// The last block whose first key is at or before End.
	it.bi = it.lo + sort.Search(n, func(i int) bool {
		h := blocks.handle(it.lo + i)
		return !base.BeforeEnd(h.meta.MinClustering, it.o.End)
	}) - 1
}

// Next advances to the next cell, returning false at the end or on error.
func (it *PartitionIter) Next() bool {
	if it.done {
		return false
	}
	if !it.started {
		it.started = true
		it.seek()
	}
	for {
		if it.blk == nil && !it.loadNext() {
			it.done = true
			return false
		}
		if it.o.Reverse {
			if it.ci <= it.stop {
				if it.stop >= 0 {
					it.finish() // the rest is before Start
					return false
				}
				it.blk, it.bi = nil, it.bi-1
				continue
			}
			it.blk.cell(it.ci, &it.cell)
			it.ci--
			return true
		}
		if it.ci >= it.stop {
			if it.stop < it.blk.len() {
				it.finish() // the rest is after End
				return false
			}
			it.blk, it.bi = nil, it.bi+1
			continue
		}
		it.blk.cell(it.ci, &it.cell)
		it.ci++
		return true
	}
}

// loadNext loads the block at bi (moving past skipped blocks) and positions
// ci at its first cell within bounds. It returns false when no block
// remains or on error.
func (it *PartitionIter) loadNext() bool {
	for it.bi >= it.lo && it.bi < it.hi {
		h := it.pg.blocks.handle(it.bi)
		if it.o.Reverse && !base.AfterStart(h.meta.MaxClustering, it.o.Start) ||
			!it.o.Reverse && !base.BeforeEnd(h.meta.MinClustering, it.o.End) {
			return false
		}
		if it.o.SkipBlock != nil && it.o.SkipBlock(h.meta) {
			it.skipped++
			it.step()
			continue
		}
		// The cache is asked first so that the trace can tell cached
		// blocks from those read and decoded (a miss asks twice: a map
		// lookup next to a block read).
		b := it.r.cache.get(it.r.fileNum, it.pg.blocks.fileOffs[it.bi])
		if b != nil {
			it.cached++
		} else {
			src := viaCache
			if it.o.NoCacheFill {
				src = cacheIfPresent
			}
			var err error
			if b, err = it.r.loadBlockFor(it.pg, it.bi, src, &it.o); err != nil {
				it.err = err
				return false
			}
		}
		it.read++
		it.held = append(it.held, b)
		it.blk = b
		it.ci, it.stop = cellRange(b.block, &it.o)
		return true
	}
	return false
}

// cellRange returns where an iterator with options o starts in blk (ci)
// and where the bounds end (stop): forward, from the first cell at or
// after Start to stop, the first cell after End (blk.len() if none); in
// reverse, from the last cell at or before End down to stop, the last
// cell before Start (-1 if none). The iterator hands out no other cell
// of blk (Reader.loadBlockFor relies on it).
func cellRange(blk *block, o *IterOptions) (ci, stop int) {
	n := blk.len()
	if o.Reverse {
		ci = sort.Search(n, func(i int) bool { return !base.BeforeEnd(blk.clustering(i), o.End) }) - 1
		stop = -1
		if !base.AfterStart(blk.clustering(0), o.Start) {
			stop = sort.Search(n, func(i int) bool { return base.AfterStart(blk.clustering(i), o.Start) }) - 1
		}
		return ci, stop
	}
	ci = sort.Search(n, func(i int) bool { return base.AfterStart(blk.clustering(i), o.Start) })
	stop = n
	if !base.BeforeEnd(blk.clustering(n-1), o.End) {
		stop = sort.Search(n, func(i int) bool { return !base.BeforeEnd(blk.clustering(i), o.End) })
	}
	return ci, stop
}

// cellsHandedOut is the range [c0, c1) of blk's cells an iterator with
// options o reads.
func cellsHandedOut(blk *block, o *IterOptions) (c0, c1 int) {
	ci, stop := cellRange(blk, o)
	if o.Reverse {
		return stop + 1, ci + 1
	}
	return ci, stop
}

func (it *PartitionIter) step() {
	if it.o.Reverse {
		it.bi--
	} else {
		it.bi++
	}
}

func (it *PartitionIter) finish() {
	it.done = true
	it.blk = nil
}

// Cell returns the current cell, valid until the next call to Next; its
// slices (the bytes it aliases) stay valid until Close. Neither may be
// modified.
func (it *PartitionIter) Cell() *base.Cell { return &it.cell }

// Err returns the error that ended the iteration, if any.
func (it *PartitionIter) Err() error { return it.err }

// BlocksRead is the number of data blocks loaded (from the cache or the
// file).
func (it *PartitionIter) BlocksRead() int { return it.read }

// BlocksCached is how many of the BlocksRead came from the cache; the
// others were read from the file and decoded.
func (it *PartitionIter) BlocksCached() int { return it.cached }

// BlocksSkipped is the number of blocks SkipBlock turned away.
func (it *PartitionIter) BlocksSkipped() int { return it.skipped }

// Close releases the iterator's blocks: cells it returned are invalid
// afterwards.
func (it *PartitionIter) Close() {
	it.done = true
	it.blk = nil
	for i, b := range it.held {
		b.release()
		it.held[i] = nil
	}
	it.held = it.held[:0]
}

// Scanner reads a whole SSTable in order, partition by partition, for
// compaction. It uses cached blocks but does not fill the cache.
//
//	s := r.NewScanner()
//	defer s.Close()
//	for s.NextPartition() {
//		info := s.Partition()
//		for s.NextCell() { use(s.Cell()) }
//	}
//	if err := s.Err(); err != nil { ... }
//
// The bytes a Cell aliases stay valid until the scanner has moved past
// the block after theirs: it holds the current block and the one before,
// and releases a block when it loads (or, at NextPartition, leaves) the
// second block after it. A merge that keeps the last cell of one source
// while it advances that source (compaction's) therefore sees valid bytes
// for as long as it holds the cell, up to its own next step.
type Scanner struct {
	r      *Reader
	page   int        // index of the next page to walk
	pg     *indexPage // the page being walked
	w      partitionWalker
	info   PartitionInfo
	has    bool
	bi, hi int
	// blk is the block cells come from; prev the one before, still
	// held (see above). Both are released by Close.
	blk, prev *loadedBlock
	ci        int
	cell      base.Cell
	err       error
	ra        readahead
}

// NewScanner returns a scanner positioned before the first partition.
func (r *Reader) NewScanner() *Scanner {
	return &Scanner{r: r}
}

// hold makes b (which may be nil) the current block, releasing the one
// before the current one.
func (s *Scanner) hold(b *loadedBlock) {
	if s.prev != nil {
		s.prev.release()
	}
	s.prev, s.blk = s.blk, b
}

// NextPartition moves to the next partition, skipping the rest of the
// current one's cells. It returns false at the end or on error.
func (s *Scanner) NextPartition() bool {
	s.has = false
	if s.blk != nil {
		s.hold(nil)
	}
	if s.err != nil {
		return false
	}
	e, ok, err := s.w.next()
	for err == nil && !ok {
		if s.page >= len(s.r.top.pages) {
			return false
		}
		if s.pg, err = s.r.page(s.page, cacheIfPresent); err != nil {
			s.err = err
			return false
		}
		s.page++
		s.w = s.pg.parts.walker()
		e, ok, err = s.w.next()
	}
	if err != nil {
		s.err = s.r.wrapAt(uint64(s.pg.base), "partition index", err)
		return false
	}
	s.info = s.w.info(&e)
	s.info.pg = s.pg
	s.bi, s.hi = s.info.firstBlock, s.info.firstBlock+s.info.numBlocks
	s.has = true
	return true
}

// Partition returns the current partition. Its Key is newly allocated for
// each partition, so it stays valid after the scanner moves on.
func (s *Scanner) Partition() PartitionInfo { return s.info }

// NextCell moves to the next cell of the current partition, returning false
// at its end or on error.
func (s *Scanner) NextCell() bool {
	if !s.has || s.err != nil {
		return false
	}
	for {
		if s.blk != nil && s.ci < s.blk.len() {
			s.blk.cell(s.ci, &s.cell)
			s.ci++
			return true
		}
		if s.bi >= s.hi {
			return false
		}
		b, err := s.r.loadBlockAhead(s.pg, s.bi, cacheIfPresent, &s.ra)
		if err != nil {
			s.err = err
			s.has = false
			return false
		}
		s.hold(b)
		s.ci = 0
		s.bi++
	}
}

// Cell returns the current cell; it must not be modified. Its bytes stay
// valid as the Scanner doc says.
func (s *Scanner) Cell() *base.Cell { return &s.cell }

// Err returns the error that stopped the scan, if any.
func (s *Scanner) Err() error { return s.err }

// Close releases the blocks the scanner holds: cells it returned are
// invalid afterwards. The scanner is then at its end.
func (s *Scanner) Close() {
	s.hold(nil)
	s.hold(nil)
	s.has = false
	s.page = len(s.r.top.pages)
	s.w = partitionWalker{}
}
