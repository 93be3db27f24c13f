package sstable

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/eventide/eventide/storage/internal/base"
)

// PartitionInfo describes one partition of an SSTable, from its partition
// index entry. Its slices alias the index page it was found in (which it
// keeps alive; Key is the caller's) and must not be modified.
type PartitionInfo struct {
	Key       []byte
	Deletions base.PartitionDeletions
	// MinClustering and MaxClustering are the first and last cells'
	// clustering keys; nil when the partition has no cells.
	MinClustering, MaxClustering []byte
	// MinTimestamp and MaxTimestamp bound the write times (µs) of the
	// cells and of the deletions; both 0 if there are neither.
	MinTimestamp, MaxTimestamp int64
	// MaxLocalDeletionTime is the latest expiry or deletion time of the
	// cells and deletions, base.NoDeletionTime if any cell is live or a
	// counter, math.MinInt64 if there are no cells nor deletions.
	MaxLocalDeletionTime int64
	// Cells is the number of cells.
	Cells int64

	// pg is the index page the partition is in (the whole index of a
	// version 1-3 file); firstBlock and numBlocks its range in the page's
	// block index.
	pg                    *indexPage
	firstBlock, numBlocks int
	// pageFromFile: FindPartition read pg from the file (not resident,
	// not cached).
	pageFromFile bool
}

// IndexPageRead reports whether FindPartition read the partition's index
// page from the file to find it (a cold lookup), for read traces.
func (p PartitionInfo) IndexPageRead() bool { return p.pageFromFile }

// Partition entry flag bits.
const (
	partHasDeletion = 0x01
	partHasRanges   = 0x02
	partHasCells    = 0x04
	partReserved    = 0xf8
)

// Range tombstone bound flag bits.
const (
	rangeStartBounded   = 0x01
	rangeStartInclusive = 0x02
	rangeEndBounded     = 0x04
	rangeEndInclusive   = 0x08
	rangeReserved       = 0xf0
)

// restartInterval is how often a partition index entry stores its whole key
// instead of sharing a prefix with the previous one: lookups binary-search
// the restart entries, then scan at most restartInterval entries. Part of
// format version 1.
const restartInterval = 16

// appendPartitionEntry appends the index entry of p (layout in writer.go).
// prevKey is the previous entry's key, or nil at a restart.
func appendPartitionEntry(dst []byte, prevKey []byte, p *PartitionInfo) []byte {
	shared := commonPrefix(prevKey, p.Key)
	dst = binary.AppendUvarint(dst, uint64(shared))
	dst = appendBytes(dst, p.Key[shared:])
	// The rest of the entry is length-prefixed so that a lookup can skip
	// the entries it passes without decoding them.
	restStart := len(dst)
	dst = binary.AppendUvarint(dst, uint64(p.numBlocks))
	var flags byte
	if !p.Deletions.Partition.IsLive() {
		flags |= partHasDeletion
	}
	if len(p.Deletions.Ranges) > 0 {
		flags |= partHasRanges
	}
	if p.Cells > 0 {
		flags |= partHasCells
	}
	dst = append(dst, flags)
	if flags&partHasDeletion != 0 {
		dst = appendDeletionTime(dst, p.Deletions.Partition)
	}
	if flags&partHasRanges != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(p.Deletions.Ranges)))
		for i := range p.Deletions.Ranges {
			dst = appendRangeTombstone(dst, &p.Deletions.Ranges[i])
		}
	}
	dst = binary.AppendVarint(dst, p.MinTimestamp)
	dst = binary.AppendUvarint(dst, uint64(p.MaxTimestamp)-uint64(p.MinTimestamp))
	dst = appendLDT(dst, p.MaxLocalDeletionTime)
	if flags&partHasCells != 0 {
		dst = binary.AppendUvarint(dst, uint64(p.Cells))
		dst = appendBytes(dst, p.MinClustering)
		dst = appendBytes(dst, p.MaxClustering)
	}
	var lenBuf [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(lenBuf[:], uint64(len(dst)-restStart))
	return slices.Insert(dst, restStart, lenBuf[:n]...)
}

func appendDeletionTime(dst []byte, d base.DeletionTime) []byte {
	dst = binary.AppendVarint(dst, d.MarkedForDeleteAt)
	return appendLDT(dst, d.LocalDeletionTime)
}

func appendRangeTombstone(dst []byte, rt *base.RangeTombstone) []byte {
	var flags byte
	if rt.Start.Key != nil {
		flags |= rangeStartBounded
	}
	if rt.Start.Inclusive {
		flags |= rangeStartInclusive
	}
	if rt.End.Key != nil {
		flags |= rangeEndBounded
	}
	if rt.End.Inclusive {
		flags |= rangeEndInclusive
	}
	dst = append(dst, flags)
	if rt.Start.Key != nil {
		dst = appendBytes(dst, rt.Start.Key)
	}
	if rt.End.Key != nil {
		dst = appendBytes(dst, rt.End.Key)
	}
	return appendDeletionTime(dst, rt.Deletion)
}

func decodeRangeTombstone(c *cursor) base.RangeTombstone {
	var rt base.RangeTombstone
	flags := c.byte1("range tombstone flags")
	if flags&rangeReserved != 0 {
		c.fail("range tombstone flags", "reserved bits set in %#02x", flags)
	}
	rt.Start.Inclusive = flags&rangeStartInclusive != 0
	rt.End.Inclusive = flags&rangeEndInclusive != 0
	if flags&rangeStartBounded != 0 {
		rt.Start.Key = nonNil(c.bytes("range tombstone start"))
	}
	if flags&rangeEndBounded != 0 {
		rt.End.Key = nonNil(c.bytes("range tombstone end"))
	}
	rt.Deletion.MarkedForDeleteAt = c.varint("range tombstone timestamp")
	rt.Deletion.LocalDeletionTime = c.ldt("range tombstone deletion time")
	return rt
}

// nonNil keeps an empty bounded key distinct from an unbounded (nil) one.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// partitionEntry is one decoded partition index entry. The key is split as
// stored (shared prefix length and suffix); the range tombstones are kept
// encoded until a caller wants them, so scanning past entries allocates
// nothing.
type partitionEntry struct {
	shared     int
	suffix     []byte
	info       PartitionInfo // Key and Deletions.Ranges unset
	rangesRaw  []byte
	rangeCount int
}

// decodeEntryKey decodes the key part of an entry: the shared prefix
// length and the suffix; rest is the rest of the entry, tail what follows.
func decodeEntryKey(src []byte) (shared int, suffix, rest, tail []byte, err error) {
	c := cursor{b: src}
	n := c.uvarint("partition key prefix")
	if c.err == nil && n > math.MaxInt32 {
		c.fail("partition key prefix", "got %d, want at most %d", n, math.MaxInt32)
	}
	suffix = c.bytes("partition key suffix")
	rest = c.bytes("partition entry")
	return int(n), suffix, rest, c.b, c.err
}

// decodePartitionEntry decodes one entry and checks it is self-consistent.
func decodePartitionEntry(src []byte) (partitionEntry, []byte, error) {
	return decodePartitionEntryInto(src, nil)
}

// decodePartitionEntryInto is decodePartitionEntry that also appends the
// entry's range tombstones to *ranges, if ranges is not nil, decoding them
// once instead of once to validate and once more for the caller.
func decodePartitionEntryInto(src []byte, ranges *[]base.RangeTombstone) (partitionEntry, []byte, error) {
	var e partitionEntry
	shared, suffix, rest, tail, err := decodeEntryKey(src)
	if err != nil {
		return partitionEntry{}, nil, err
	}
	e.shared, e.suffix = shared, suffix
	c := cursor{b: rest}
	blocks := c.uvarint("partition block count")
	flags := c.byte1("partition flags")
	if c.err == nil && flags&partReserved != 0 {
		c.fail("partition flags", "reserved bits set in %#02x", flags)
	}
	e.info.Deletions.Partition = base.LiveDeletion
	if flags&partHasDeletion != 0 {
		e.info.Deletions.Partition.MarkedForDeleteAt = c.varint("partition deletion timestamp")
		e.info.Deletions.Partition.LocalDeletionTime = c.ldt("partition deletion time")
	}
	if flags&partHasRanges != 0 {
		// A range tombstone takes at least 3 bytes.
		e.rangeCount = c.length("range tombstone count", 3)
		if c.err == nil && e.rangeCount == 0 {
			c.fail("range tombstone count", "got 0 with the ranges flag set")
		}
		start := c.b
		if ranges != nil && c.err == nil {
			*ranges = slices.Grow(*ranges, e.rangeCount)
		}
		for i := 0; i < e.rangeCount && c.err == nil; i++ {
			rt := decodeRangeTombstone(&c)
			if ranges != nil {
				*ranges = append(*ranges, rt)
			}
		}
		if c.err == nil {
			e.rangesRaw = start[:len(start)-len(c.b)]
		}
	}
	e.info.MinTimestamp = c.varint("partition min timestamp")
	span := c.uvarint("partition timestamp span")
	e.info.MaxLocalDeletionTime = c.ldt("partition max deletion time")
	if flags&partHasCells != 0 {
		cells := c.uvarint("partition cell count")
		e.info.MinClustering = nonNil(c.bytes("partition min clustering"))
		e.info.MaxClustering = nonNil(c.bytes("partition max clustering"))
		if c.err == nil && (cells == 0 || blocks == 0 || blocks > cells || cells > math.MaxInt64) {
			c.fail("partition entry", "got %d cells in %d blocks, want 1 <= blocks <= cells", cells, blocks)
		}
		if c.err == nil && bytes.Compare(e.info.MinClustering, e.info.MaxClustering) > 0 {
			c.fail("partition entry", "min clustering %x sorts after max %x", e.info.MinClustering, e.info.MaxClustering)
		}
		e.info.Cells = int64(cells)
		e.info.numBlocks = int(min(blocks, math.MaxInt32))
	} else if c.err == nil && blocks != 0 {
		c.fail("partition entry", "got %d blocks without cells", blocks)
	}
	c.done("partition entry")
	if c.err != nil {
		return partitionEntry{}, nil, c.err
	}
	if span > uint64(math.MaxInt64)-uint64(e.info.MinTimestamp) {
		return partitionEntry{}, nil, base.CorruptionErrorf("cannot decode partition entry: timestamp span %d overflows from %d", span, e.info.MinTimestamp)
	}
	e.info.MaxTimestamp = int64(uint64(e.info.MinTimestamp) + span)
	return e, tail, nil
}

// ranges decodes the entry's range tombstones (nil if none). The keys alias
// the index.
func (e *partitionEntry) ranges() []base.RangeTombstone {
	if e.rangeCount == 0 {
		return nil
	}
	out := make([]base.RangeTombstone, e.rangeCount)
	c := cursor{b: e.rangesRaw}
	for i := range out {
		out[i] = decodeRangeTombstone(&c)
	}
	if c.err != nil {
		panic(fmt.Sprintf("BUG: validated range tombstones no longer decode: %v", c.err))
	}
	// Writers fragment ranges (sorted, disjoint); files written before
	// they did are fragmented here, so readers can rely on it.
	return base.FragmentRanges(out)
}

// partitionIndex is the decompressed partition index kept in memory, with
// the position of every restart entry (found and validated by
// decodePartitionIndex).
type partitionIndex struct {
	raw       []byte
	restarts  []restartPoint
	count     int // partitions
	numBlocks int // data blocks referenced, in total
	// firstKey and lastKey are the smallest and largest partition keys
	// (nil if there are none).
	firstKey, lastKey []byte
}

type restartPoint struct {
	off        uint32 // entry offset in raw
	firstBlock uint32 // the entry's first block
}

// decodePartitionIndex decodes and validates every entry: keys strictly
// ascending, a full key at each restart, prefixes no longer than the
// previous key.
func decodePartitionIndex(raw []byte) (partitionIndex, error) {
	return decodePartitionIndexCheck(raw, nil)
}

// decodePartitionIndexCheck is decodePartitionIndex that also checks each
// entry against its blocks in blocks, if not nil (see checkEntry), so an
// index page is validated in one walk.
func decodePartitionIndexCheck(raw []byte, blocks *blockIndex) (partitionIndex, error) {
	if uint64(len(raw)) > math.MaxUint32 {
		return partitionIndex{}, base.CorruptionErrorf("cannot decode partition index: got %d bytes, want at most %d", len(raw), uint64(math.MaxUint32))
	}
	pi := partitionIndex{raw: raw}
	w := pi.walker()
	for {
		e, ok, err := w.next()
		if err != nil {
			return partitionIndex{}, err
		}
		if !ok {
			break
		}
		if blocks != nil {
			if _, err := checkEntry(blocks, w.n-1, &e.info); err != nil {
				return partitionIndex{}, err
			}
		}
		if (w.n-1)%restartInterval == 0 {
			pi.restarts = append(pi.restarts, restartPoint{off: uint32(w.entryOff), firstBlock: uint32(w.firstBlock)})
		}
		if w.n == 1 {
			pi.firstKey = append([]byte{}, w.key...)
		}
		if len(w.src) == 0 {
			pi.lastKey = append([]byte{}, w.key...)
		}
		if w.nextBlock > math.MaxUint32 {
			return partitionIndex{}, base.CorruptionErrorf("cannot decode partition index: got more than %d blocks", uint64(math.MaxUint32))
		}
	}
	pi.count = w.n
	pi.numBlocks = w.nextBlock
	return pi, nil
}

func (pi *partitionIndex) walker() partitionWalker {
	return partitionWalker{src: pi.raw, raw: pi.raw}
}

// partitionWalker decodes partition index entries in order, rebuilding each
// key and each entry's first block.
type partitionWalker struct {
	raw, src   []byte
	n          int    // entries decoded
	entryOff   int    // offset of the last entry
	key        []byte // the last entry's full key (reused buffer)
	firstBlock int    // the last entry's first block
	nextBlock  int
}

// next decodes the next entry; ok is false at the end.
func (w *partitionWalker) next() (e partitionEntry, ok bool, err error) {
	if len(w.src) == 0 {
		return partitionEntry{}, false, nil
	}
	w.entryOff = len(w.raw) - len(w.src)
	e, tail, err := decodePartitionEntry(w.src)
	if err != nil {
		return partitionEntry{}, false, fmt.Errorf("partition index entry %d at index offset %d: %w", w.n, w.entryOff, err)
	}
	if w.n%restartInterval == 0 && e.shared != 0 {
		return partitionEntry{}, false, base.CorruptionErrorf("cannot decode partition index entry %d: restart shares %d bytes, want 0", w.n, e.shared)
	}
	if e.shared > len(w.key) {
		return partitionEntry{}, false, base.CorruptionErrorf("cannot decode partition index entry %d: shares %d bytes with a %d-byte key", w.n, e.shared, len(w.key))
	}
	if w.n > 0 && bytes.Compare(w.key[e.shared:], e.suffix) >= 0 {
		return partitionEntry{}, false, base.CorruptionErrorf("cannot decode partition index entry %d: key does not sort after the previous one", w.n)
	}
	w.key = append(w.key[:e.shared], e.suffix...)
	w.firstBlock = w.nextBlock
	w.nextBlock += e.info.numBlocks
	e.info.firstBlock = w.firstBlock
	w.src = tail
	w.n++
	return e, true, nil
}

// info materializes the PartitionInfo of the entry just returned by next,
// with a newly allocated Key.
func (w *partitionWalker) info(e *partitionEntry) PartitionInfo {
	info := e.info
	info.Key = bytes.Clone(w.key)
	if info.Key == nil {
		info.Key = []byte{}
	}
	info.Deletions.Ranges = e.ranges()
	return info
}

// restartKey is the full key of restart entry i.
func (pi *partitionIndex) restartKey(i int) []byte {
	_, suffix, _, _, err := decodeEntryKey(pi.raw[pi.restarts[i].off:])
	if err != nil {
		panic(fmt.Sprintf("BUG: validated partition index entry no longer decodes: %v", err))
	}
	return suffix
}

// find looks key up: a binary search over the restarts, then a scan of at
// most restartInterval entries, decoding only their keys until one
// matches.
//
// A partition with at least minCachedRanges range tombstones is decoded
// once and kept in rc (if not nil, and while its budget lasts): a
// partition whose rows were deleted one by one holds a range tombstone per
// row, and decoding them all again for every read was most of the cost of
// reading it, where cell tombstones sit in cached blocks.
//
// pageBase is added to entry offsets to key rc: the page's offset in the file.
func (pi *partitionIndex) find(key []byte, rc *rangeCache, pageBase int) (PartitionInfo, bool) {
	i := sort.Search(len(pi.restarts), func(i int) bool { return bytes.Compare(pi.restartKey(i), key) > 0 }) - 1
	if i < 0 {
		return PartitionInfo{}, false
	}
	src := pi.raw[pi.restarts[i].off:]
	firstBlock := int(pi.restarts[i].firstBlock)
	var buf [64]byte
	cur := buf[:0]
	for n := 0; n < restartInterval && len(src) > 0; n++ {
		shared, suffix, rest, tail, err := decodeEntryKey(src)
		if err != nil || shared > len(cur) {
			panic(fmt.Sprintf("BUG: validated partition index no longer decodes: %v", err))
		}
		cur = append(cur[:shared], suffix...)
		switch c := bytes.Compare(cur, key); {
		case c == 0:
			off := pageBase + len(pi.raw) - len(src)
			if info, ok := rc.get(off); ok {
				info.Key = bytes.Clone(key)
				info.firstBlock = firstBlock
				return info, true
			}
			var ranges []base.RangeTombstone
			e, _, err := decodePartitionEntryInto(src, &ranges)
			if err != nil {
				panic(fmt.Sprintf("BUG: validated partition index entry no longer decodes: %v", err))
			}
			info := e.info
			info.Deletions.Ranges = base.FragmentRanges(ranges)
			if len(ranges) >= minCachedRanges {
				rc.add(off, detached(info))
			}
			info.Key = bytes.Clone(key)
			info.firstBlock = firstBlock
			return info, true
		case c > 0:
			return PartitionInfo{}, false
		}
		firstBlock += entryBlocks(rest)
		src = tail
	}
	return PartitionInfo{}, false
}

// detached is info with its own copies of the bytes it aliases, so that a
// cached entry does not keep a whole index page alive.
func detached(info PartitionInfo) PartitionInfo {
	info.MinClustering = bytes.Clone(info.MinClustering)
	info.MaxClustering = bytes.Clone(info.MaxClustering)
	ranges := make([]base.RangeTombstone, len(info.Deletions.Ranges))
	for i, rt := range info.Deletions.Ranges {
		ranges[i] = rt.Clone()
	}
	info.Deletions.Ranges = ranges
	return info
}

// entryBlocks is the block count of a validated entry, which leads the
// rest of the entry so that skipping an entry can keep count of blocks.
func entryBlocks(rest []byte) int {
	v, _ := binary.Uvarint(rest)
	return int(v)
}

// minCachedRanges is the fewest range tombstones that make a partition's
// decoded entry worth keeping in a rangeCache.
const minCachedRanges = 32

// rangeTombstoneCost is what one cached range tombstone is counted as
// against the budget: the struct and typical keys (copied, see detached).
const rangeTombstoneCost = 112

// rangeCache keeps the decoded entries (PartitionInfo without Key, with
// fragmented ranges) of one reader's partitions that hold many range
// tombstones, counted against a budget shared by the readers of a Cache.
// Entries are never evicted: once the budget is spent, further partitions
// are decoded on every read, as before. Safe for concurrent use; a nil
// *rangeCache caches nothing.
type rangeCache struct {
	entries sync.Map // entry offset (int) -> PartitionInfo
	bytes   atomic.Int64
	budget  *atomic.Int64
}

func (rc *rangeCache) get(off int) (PartitionInfo, bool) {
	if rc == nil {
		return PartitionInfo{}, false
	}
	v, ok := rc.entries.Load(off)
	if !ok {
		return PartitionInfo{}, false
	}
	return v.(PartitionInfo), true
}

func (rc *rangeCache) add(off int, info PartitionInfo) {
	if rc == nil || rc.budget == nil {
		return
	}
	cost := int64(len(info.Deletions.Ranges)) * rangeTombstoneCost
	if rc.budget.Add(-cost) < 0 {
		rc.budget.Add(cost)
		return
	}
	if _, loaded := rc.entries.LoadOrStore(off, info); loaded {
		rc.budget.Add(cost)
		return
	}
	rc.bytes.Add(cost)
}

// release returns the cache's bytes to the budget (the reader closes).
func (rc *rangeCache) release() {
	if rc == nil || rc.budget == nil {
		return
	}
	rc.budget.Add(rc.bytes.Swap(0))
}
