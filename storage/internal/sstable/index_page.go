package sstable

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/eventide/eventide/storage/internal/base"
)

// Format version 4 pages the index. The partition and block index entries
// (the same encodings as versions 1 to 3) are cut into index pages of about
// indexPageSize bytes, each holding whole partitions and the entries of
// their data blocks, written right after those data blocks; a small
// top-level index (the page index, resident) names each page's first key
// and where it is. Pages are read through the block cache like data
// blocks, so the memory an open file pins no longer grows with its
// partitions: a million one-row partitions kept ~80 MiB of index resident
// in versions 1 to 3 (as RocksDB's and Pebble's partitioned indexes do).
// Layout in FORMAT.md.

// indexPageSize is the decompressed size at which the writer ends an index
// page (after the partition that reaches it).
const indexPageSize = 4 << 10

// indexPage is one decoded, validated index page: a run of consecutive
// partitions and the block index entries of their data blocks. Partition
// entries' firstBlock count from the page's first block. PartitionInfo and
// BlockMeta slices alias raw, which is never recycled, so they stay valid
// for as long as they are referenced, cached or not.
type indexPage struct {
	parts  partitionIndex
	blocks blockIndex // fileOffs are file offsets
	// base tells the pages of a file apart in the reader's rangeCache:
	// the page's file offset (0 for the resident index of versions 1-3).
	base    int
	fileNum uint64 // of the reader that read it
	size    int64  // bytes charged to the cache
}

// pageRef is one entry of the page index as kept in memory.
type pageRef struct {
	keyOff, keyEnd     uint32 // the page's first key in topIndex.keys
	partitions, blocks int
	dataOff            uint64 // file offset of the page's first data block
	dataLen            uint64 // framed bytes of its data blocks
	storedLen, rawLen  uint64 // the page's frame, at dataOff + dataLen
	// resident is the whole index of a version 1-3 file, always loaded.
	resident *indexPage
	// pinned is the page read at Open (Reader.pinPages), nil if it was
	// not; set before the Reader is shared and never changed after.
	pinned *indexPage
}

func (p *pageRef) offset() uint64 { return p.dataOff + p.dataLen }

// topIndex is the resident page index: per page its first key and place.
type topIndex struct {
	keys    []byte
	pages   []pageRef
	lastKey []byte // the file's last partition key (nil if none)
	// totals over the pages
	partitions, blocks int
	dataBytes          uint64
}

func (t *topIndex) key(i int) []byte { return t.keys[t.pages[i].keyOff:t.pages[i].keyEnd] }

// firstKey is the file's first partition key (nil if none).
func (t *topIndex) firstKey() []byte {
	if len(t.pages) == 0 {
		return nil
	}
	return t.key(0)
}

// search returns the page that would hold key: the last one whose first
// key is at or before it, or -1 if none can.
func (t *topIndex) search(key []byte) int {
	if len(t.pages) == 0 || bytes.Compare(key, t.lastKey) > 0 {
		return -1
	}
	return sort.Search(len(t.pages), func(i int) bool { return bytes.Compare(t.key(i), key) > 0 }) - 1
}

// appendPageIndexEntry appends the page index entry of one page. prevFirst
// is the previous page's first key (nil for the first page).
func appendPageIndexEntry(dst, prevFirst, first []byte, ref *pageRef) []byte {
	shared := commonPrefix(prevFirst, first)
	dst = binary.AppendUvarint(dst, uint64(shared))
	dst = appendBytes(dst, first[shared:])
	dst = binary.AppendUvarint(dst, uint64(ref.partitions))
	dst = binary.AppendUvarint(dst, uint64(ref.blocks))
	dst = binary.AppendUvarint(dst, ref.dataLen)
	dst = binary.AppendUvarint(dst, ref.storedLen)
	return binary.AppendUvarint(dst, ref.rawLen)
}

// minPageIndexEntry is the fewest bytes a page index entry takes.
const minPageIndexEntry = 7

// decodePageIndex decodes and validates the page index of a version 4 file
// whose data blocks and index pages fill [0, regionEnd) exactly: first keys
// strictly ascending, every page holding at least one partition, frames
// tiling the region, the last key not before the last page's first.
func decodePageIndex(raw []byte, regionEnd uint64) (topIndex, error) {
	c := cursor{b: raw}
	n := c.length("page count", minPageIndexEntry)
	var t topIndex
	if c.err == nil {
		t.pages = make([]pageRef, 0, n)
	}
	var off uint64
	for i := 0; i < n && c.err == nil; i++ {
		shared := c.uvarint("page first key prefix")
		suffix := c.bytes("page first key suffix")
		parts := c.uvarint("page partitions")
		blocks := c.uvarint("page blocks")
		var ref pageRef
		ref.dataLen = c.uvarint("page data length")
		ref.storedLen = c.uvarint("page stored length")
		ref.rawLen = c.uvarint("page raw length")
		if c.err != nil {
			break
		}
		prev := []byte(nil)
		if i > 0 {
			prev = t.key(i - 1)
		}
		switch {
		case shared > uint64(len(prev)):
			c.fail("page index entry", "page %d shares %d bytes with a %d-byte key", i, shared, len(prev))
		case i > 0 && bytes.Compare(prev[shared:], suffix) >= 0:
			c.fail("page index entry", "page %d: first key does not sort after the previous page's", i)
		case parts == 0 || parts > math.MaxInt32 || blocks > math.MaxInt32:
			c.fail("page index entry", "page %d: got %d partitions and %d blocks, want 1..%d of each", i, parts, blocks, math.MaxInt32)
		case ref.storedLen == 0 || ref.rawLen == 0 || ref.rawLen > maxBlockRawLen:
			c.fail("page index entry", "page %d: got stored length %d, raw length %d, want 1..%d", i, ref.storedLen, ref.rawLen, maxBlockRawLen)
		case ref.dataLen > regionEnd-off || ref.storedLen+blockTrailerLen > regionEnd-off-ref.dataLen:
			c.fail("page index entry", "page %d at offset %d (%d data bytes, %d-byte page) overruns the data section (%d bytes)", i, off, ref.dataLen, ref.storedLen, regionEnd)
		case (blocks == 0) != (ref.dataLen == 0):
			c.fail("page index entry", "page %d: got %d blocks in %d data bytes", i, blocks, ref.dataLen)
		}
		if c.err != nil {
			break
		}
		keyOff := len(t.keys)
		t.keys = append(t.keys, prev[:shared]...)
		t.keys = append(t.keys, suffix...)
		if uint64(len(t.keys)) > math.MaxUint32 {
			c.fail("page index", "got more than %d bytes of keys", uint64(math.MaxUint32))
			break
		}
		ref.keyOff, ref.keyEnd = uint32(keyOff), uint32(len(t.keys))
		ref.partitions, ref.blocks = int(parts), int(blocks)
		ref.dataOff = off
		off += ref.dataLen + ref.storedLen + blockTrailerLen
		t.pages = append(t.pages, ref)
		t.partitions += ref.partitions
		t.blocks += ref.blocks
		t.dataBytes += ref.dataLen
	}
	if n > 0 && c.err == nil {
		t.lastKey = nonNil(c.bytes("last partition key"))
		if c.err == nil && bytes.Compare(t.lastKey, t.key(n-1)) < 0 {
			c.fail("page index", "last key sorts before the last page's first key")
		}
	}
	c.done("page index")
	if c.err != nil {
		return topIndex{}, c.err
	}
	if off != regionEnd {
		return topIndex{}, base.CorruptionErrorf("cannot decode page index: pages and data blocks cover %d bytes, data section is %d", off, regionEnd)
	}
	if t.partitions > math.MaxInt32 || t.blocks > math.MaxInt32 {
		return topIndex{}, base.CorruptionErrorf("cannot decode page index: got %d partitions and %d blocks, want at most %d of each", t.partitions, t.blocks, math.MaxInt32)
	}
	return t, nil
}

// appendIndexPage appends the decompressed contents of an index page:
// the partition entries' length, the partition entries, the block entries.
func appendIndexPage(dst, parts, blocks []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(parts)))
	dst = append(dst, parts...)
	return append(dst, blocks...)
}

// decodeIndexPage decodes and validates index page raw (as described by
// ref, whose first key is first; next is the following page's first key,
// nil for the last page, whose last key must then be lastKey): every entry
// of both indexes, the page's counts and keys against the page index, and
// each partition's bounds and cell count against its blocks. The page
// aliases raw.
func decodeIndexPage(raw []byte, ref *pageRef, first, next, lastKey []byte) (*indexPage, error) {
	c := cursor{b: raw}
	n := c.length("page partition index length", 1)
	partsRaw := c.take("page partition index", n)
	if c.err != nil {
		return nil, c.err
	}
	keep := handleScratch.Get().(*[]blockHandle)
	if *keep == nil {
		*keep = make([]blockHandle, 0, 128)
	}
	defer func() {
		clear(*keep)
		*keep = (*keep)[:0]
		handleScratch.Put(keep)
	}()
	bi, err := decodeBlockIndexKeep(c.b, ref.dataLen, (*keep)[:0])
	if err != nil {
		return nil, err
	}
	*keep = bi.decoded // grown, for the pool
	for i := range bi.fileOffs {
		bi.fileOffs[i] += ref.dataOff
	}
	// Each partition is checked against its blocks as the index is
	// walked (one walk, where a page miss used to take two).
	pg := &indexPage{blocks: bi, base: int(ref.offset())}
	pi, err := decodePartitionIndexCheck(partsRaw, &pg.blocks)
	if err != nil {
		return nil, err
	}
	pg.parts = pi
	pg.blocks.decoded = nil // the entries alias raw; the page keeps its offsets only
	if pi.count != ref.partitions || pi.numBlocks != ref.blocks || bi.len() != ref.blocks {
		return nil, base.CorruptionErrorf("cannot check index page: got %d partitions referencing %d blocks and %d block entries, page index says %d partitions and %d blocks",
			pi.count, pi.numBlocks, bi.len(), ref.partitions, ref.blocks)
	}
	if !bytes.Equal(pi.firstKey, first) {
		return nil, base.CorruptionErrorf("cannot check index page: first key %x, page index says %x", pi.firstKey, first)
	}
	if next != nil && bytes.Compare(pi.lastKey, next) >= 0 {
		return nil, base.CorruptionErrorf("cannot check index page: last key %x does not sort before the next page's first key %x", pi.lastKey, next)
	}
	if next == nil && !bytes.Equal(pi.lastKey, lastKey) {
		return nil, base.CorruptionErrorf("cannot check index page: last key %x, page index says %x", pi.lastKey, lastKey)
	}
	pg.size = int64(cap(raw)) + int64(len(bi.entryOffs))*12 + int64(len(pi.restarts))*8 + 2*int64(len(pi.firstKey)) + indexPageOverhead
	return pg, nil
}

// handleScratch holds the decoded block index entries of a page while it
// is validated (blockIndex.decoded).
var handleScratch = sync.Pool{New: func() any { return new([]blockHandle) }}

// indexPageOverhead is what a cached page costs besides its slices.
const indexPageOverhead = 256

// crossCheck verifies that the page's partitions and blocks agree: every
// block belongs to exactly one partition, a partition's blocks are in
// clustering order and match its bounds and cell count. It returns the
// page's cells.
func (pg *indexPage) crossCheck() (int64, error) {
	if pg.parts.numBlocks != pg.blocks.len() {
		return 0, base.CorruptionErrorf("cannot check indexes: partitions reference %d blocks, block index has %d", pg.parts.numBlocks, pg.blocks.len())
	}
	var cells int64
	w := pg.parts.walker()
	for {
		e, ok, err := w.next()
		if err != nil {
			return 0, err
		}
		if !ok {
			return cells, nil
		}
		sum, err := checkEntry(&pg.blocks, w.n-1, &e.info)
		if err != nil {
			return 0, err
		}
		cells += sum
	}
}

// checkEntry checks partition n (info, with its first block set) against
// its blocks: they exist, are in clustering order, and match its bounds
// and cell count. It returns the partition's cells.
func checkEntry(blocks *blockIndex, n int, info *PartitionInfo) (int64, error) {
	if info.firstBlock+info.numBlocks > blocks.len() {
		return 0, base.CorruptionErrorf("cannot check partition %d: blocks [%d, %d) beyond the %d of the block index", n, info.firstBlock, info.firstBlock+info.numBlocks, blocks.len())
	}
	var sum int64
	var prev blockHandle
	for i := info.firstBlock; i < info.firstBlock+info.numBlocks; i++ {
		h := blocks.handle(i)
		sum += int64(h.meta.Cells)
		if i == info.firstBlock && !bytes.Equal(h.meta.MinClustering, info.MinClustering) {
			return 0, base.CorruptionErrorf("cannot check partition %d: min clustering %x, its first block says %x", n, info.MinClustering, h.meta.MinClustering)
		}
		if i == info.firstBlock+info.numBlocks-1 && !bytes.Equal(h.meta.MaxClustering, info.MaxClustering) {
			return 0, base.CorruptionErrorf("cannot check partition %d: max clustering %x, its last block says %x", n, info.MaxClustering, h.meta.MaxClustering)
		}
		if i > info.firstBlock && bytes.Compare(prev.meta.MaxClustering, h.meta.MinClustering) > 0 {
			return 0, base.CorruptionErrorf("cannot check block %d: min clustering %x sorts before the previous block's max %x", i, h.meta.MinClustering, prev.meta.MaxClustering)
		}
		prev = h
	}
	if sum != info.Cells {
		return 0, base.CorruptionErrorf("cannot check partition %d: %d cells, its blocks hold %d", n, info.Cells, sum)
	}
	return sum, nil
}

// page returns index page j, from the cache or the file (filling the cache
// if src is viaCache).
func (r *Reader) page(j int, src blockSource) (*indexPage, error) {
	pg, _, err := r.pageFrom(j, src)
	return pg, err
}

// pageFrom is page, also saying whether the page was read from the file
// (neither resident nor cached).
func (r *Reader) pageFrom(j int, src blockSource) (*indexPage, bool, error) {
	ref := &r.top.pages[j]
	if ref.resident != nil {
		return ref.resident, false, nil
	}
	if ref.pinned != nil && src != fromDisk {
		return ref.pinned, false, nil
	}
	off := ref.offset()
	// Without a cache, pages read for lookups stay with the reader (as
	// whole indexes did before version 4), so a store without a block
	// cache does not read and validate a page for every lookup.
	keep := r.cache == nil && src == viaCache && r.ownPages != nil
	if keep {
		if pg := r.ownPages[j].Load(); pg != nil {
			return pg, false, nil
		}
	}
	if src != fromDisk {
		if pg := r.cache.getPage(r.fileNum, off); pg != nil {
			return pg, false, nil
		}
	}
	pg, err := r.readPage(j)
	if err != nil {
		return nil, false, err
	}
	if keep {
		r.ownPages[j].CompareAndSwap(nil, pg)
	}
	if src == viaCache {
		r.cache.addPage(r.fileNum, off, pg)
	}
	return pg, true, nil
}

// readPage reads index page j from the file, checks and decodes it.
func (r *Reader) readPage(j int) (*indexPage, error) {
	ref := &r.top.pages[j]
	off := ref.offset()
	// The page keeps its bytes (infos alias them), so the frame is not
	// pooled: a page stored uncompressed aliases it.
	frame := make([]byte, ref.storedLen+blockTrailerLen)
	if err := r.readAt(frame, off); err != nil {
		return nil, err
	}
	raw, err := r.dec.decodeBlockFrame(frame, ref.rawLen, nil)
	if err != nil {
		return nil, r.wrapAt(off, fmt.Sprintf("index page %d", j), err)
	}
	var next []byte
	if j+1 < len(r.top.pages) {
		next = r.top.key(j + 1)
	}
	pg, err := decodeIndexPage(raw, ref, r.top.key(j), next, r.top.lastKey)
	if err != nil {
		return nil, r.wrapAt(off, fmt.Sprintf("index page %d", j), err)
	}
	pg.fileNum = r.fileNum
	return pg, nil
}
