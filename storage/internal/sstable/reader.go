package sstable

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/eventide/eventide/storage/internal/base"
	"github.com/eventide/eventide/storage/vfs"
)

// Reader reads one SSTable. Open loads and verifies the footer, the
// properties, the bloom filter and the index: in version 4 files only the
// page index, whose index pages are read on demand, through the Cache if
// there is one, as data blocks are; in older files the whole partition and
// block indexes, which stay resident. A Reader is safe for
// concurrent use; its iterators are not.
type Reader struct {
	f       vfs.File
	path    string
	fileNum uint64
	cache   *Cache
	dec     *decompressor
	ownDec  bool
	// dict is the file's zstd dictionary (version 5), nil if it has none;
	// its decoder is the Reader's own, shared by its goroutines.
	dict *fileDict

	props Properties
	top   topIndex
	bloom bloomFilter
	// ownPages keeps the index pages a reader without a cache has read.
	ownPages []atomic.Pointer[indexPage]
	// ranges keeps decoded partition entries that hold many range
	// tombstones (see partitionIndex.find).
	ranges rangeCache
	// pinnedBytes is what the index pages pinned at Open (pageRef.pinned)
	// take of the cache's pinning budget, given back by Close.
	pinnedBytes int64

	// recycled holds released blocks for reuse: the cache's pool, shared
	// by the store's readers, or the reader's own without a cache.
	recycled *blockPool
}

// Open reads the SSTable in f. path names the file in errors; fileNum
// identifies its contents in the cache, so it must never be reused for
// different contents while the cache lives. cache may be nil. On success
// the Reader owns f and closes it in Close; on failure f is left open.
// Every error caused by the file's bytes wraps base.ErrCorruption and
// names path and the offset.
func Open(f vfs.File, path string, fileNum uint64, cache *Cache) (*Reader, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cannot stat sstable %s: %w", path, err)
	}
	r := &Reader{f: f, path: path, fileNum: fileNum, cache: cache}
	if cache != nil {
		r.dec, r.recycled = &cache.dec, &cache.blocks
		r.ranges.budget = &cache.rangeBudget
	} else {
		r.dec, r.ownDec, r.recycled = &decompressor{}, true, &blockPool{arena: &blockArena{}}
	}
	if err := r.load(uint64(st.Size())); err != nil {
		if r.ownDec {
			r.dec.close()
		}
		r.dict.close()
		return nil, err
	}
	r.pinPages()
	return r, nil
}

// pinPages reads, validates and keeps every index page of a version 4
// file, if the cache's pinning budget has room for all of them (RocksDB
// pins and prefetches the partitions of its partitioned indexes the same
// way): a lookup then never reads a page from the file, which was the
// slowest step of a cold read (BENCHMARKS.md, s10-read). A file whose
// pages do not fit is read on demand, as before: the budget (a sixteenth of
// the cache's capacity, taken out of it) keeps files of many small
// partitions from pinning unbounded memory. Pinning is best-effort: a
// page that cannot be read or does not validate is left to the lookup
// that needs it, which reports the error as before.
func (r *Reader) pinPages() {
	if r.cache == nil || len(r.top.pages) == 0 || r.top.pages[0].resident != nil {
		return
	}
	// Reserve by the pages' decompressed bytes plus their overhead
	// (decodeIndexPage's size), then settle on the decoded sizes.
	var want int64
	for i := range r.top.pages {
		ref := &r.top.pages[i]
		want += int64(ref.rawLen) + int64(ref.blocks)*12 + int64(ref.partitions)*8/restartInterval + indexPageOverhead
	}
	want += int64(len(r.top.pages)) * 2 * 64 // first keys, estimated
	if !r.cache.reservePin(want) {
		return
	}
	pinned := make([]*indexPage, len(r.top.pages))
	var got int64
	for j := range r.top.pages {
		pg, err := r.readPage(j)
		if err != nil {
			r.cache.releasePin(want)
			return
		}
		pinned[j] = pg
		got += pg.size
	}
	if got > want && !r.cache.reservePin(got-want) {
		r.cache.releasePin(want)
		return
	}
	if got < want {
		r.cache.releasePin(want - got)
	}
	for j, pg := range pinned {
		r.top.pages[j].pinned = pg
	}
	r.pinnedBytes = got
}

// PinnedIndexBytes is what the index pages the Reader pinned at Open take
// (0 if it pinned none).
func (r *Reader) PinnedIndexBytes() int64 { return r.pinnedBytes }

func (r *Reader) corruptf(off uint64, format string, args ...any) error {
	return base.CorruptionErrorf("sstable %s at offset %d: %s", r.path, off, fmt.Sprintf(format, args...))
}

// wrapAt adds the file and offset to a decoding error.
func (r *Reader) wrapAt(off uint64, what string, err error) error {
	return fmt.Errorf("sstable %s: %s at offset %d: %w", r.path, what, off, err)
}

func (r *Reader) load(size uint64) error {
	if size < footerLen {
		return r.corruptf(0, "file of %d bytes is shorter than the %d-byte footer", size, footerLen)
	}
	buf := make([]byte, footerLen)
	if err := r.readAt(buf, size-footerLen); err != nil {
		return err
	}
	ft, _, err := decodeFooter(buf, size)
	if err != nil {
		return r.wrapAt(size-footerLen, "footer", err)
	}
	propsRaw, err := r.readMeta(ft.properties, "properties")
	if err != nil {
		return err
	}
	props, tail, err := decodeProperties(propsRaw, ft.version)
	if err == nil && len(tail) != 0 {
		err = base.CorruptionErrorf("cannot decode properties: got %d trailing bytes", len(tail))
	}
	if err != nil {
		return r.wrapAt(ft.properties.offset, "properties", err)
	}
	props.FormatVersion = ft.version
	props.FileBytes = int64(size)
	r.props = props

	bloomRaw, err := r.readMeta(ft.bloom, "bloom filter")
	if err != nil {
		return err
	}
	if r.bloom, _, err = decodeBloomFilter(bloomRaw); err != nil {
		return r.wrapAt(ft.bloom.offset, "bloom filter", err)
	}
	if h := ft.dictionary(); h != (metaHandle{}) {
		raw, err := r.readMeta(h, "dictionary")
		if err != nil {
			return err
		}
		if r.dict, err = decodeDictionary(raw); err != nil {
			return r.wrapAt(h.offset, "dictionary", err)
		}
		r.props.DictionaryBytes = int64(len(raw))
	}
	if ft.version >= formatVersion4 {
		err = r.loadPageIndex(ft)
	} else {
		err = r.loadResidentIndex(ft)
	}
	if err != nil {
		return err
	}
	r.props.DataBytes = int64(r.top.dataBytes)
	r.props.IndexBytes = r.props.FileBytes - r.props.DataBytes
	return nil
}

// loadPageIndex loads the page index of a version 4 file and checks it
// against the properties; the pages themselves are checked as they are
// read.
func (r *Reader) loadPageIndex(ft footer) error {
	raw, err := r.readMeta(ft.blockIndex, "page index")
	if err != nil {
		return err
	}
	if r.top, err = decodePageIndex(raw, ft.blockIndex.offset); err != nil {
		return r.wrapAt(ft.blockIndex.offset, "page index", err)
	}
	if int64(r.top.partitions) != r.props.Partitions || int64(r.top.blocks) != r.props.DataBlocks {
		return r.corruptf(ft.blockIndex.offset, "page index: got %d partitions in %d blocks, properties say %d in %d",
			r.top.partitions, r.top.blocks, r.props.Partitions, r.props.DataBlocks)
	}
	if r.cache == nil {
		r.ownPages = make([]atomic.Pointer[indexPage], len(r.top.pages))
	}
	return nil
}

// loadResidentIndex loads and checks the whole partition and block indexes
// of a version 1-3 file, kept as its only, resident, page.
func (r *Reader) loadResidentIndex(ft footer) error {
	biRaw, err := r.readMeta(ft.blockIndex, "block index")
	if err != nil {
		return err
	}
	blocks, err := decodeBlockIndex(biRaw, ft.blockIndex.offset)
	if err != nil {
		return r.wrapAt(ft.blockIndex.offset, "block index", err)
	}
	piRaw, err := r.readMeta(ft.partitionIndex, "partition index")
	if err != nil {
		return err
	}
	parts, err := decodePartitionIndex(piRaw)
	if err != nil {
		return r.wrapAt(ft.partitionIndex.offset, "partition index", err)
	}
	pg := &indexPage{parts: parts, blocks: blocks, fileNum: r.fileNum}
	if err := r.crossCheck(pg); err != nil {
		return r.wrapAt(ft.partitionIndex.offset, "partition index", err)
	}
	r.top = topIndex{lastKey: parts.lastKey, partitions: parts.count, blocks: blocks.len(), dataBytes: ft.blockIndex.offset}
	if parts.count > 0 {
		r.top.keys = parts.firstKey
		r.top.pages = []pageRef{{keyEnd: uint32(len(parts.firstKey)), partitions: parts.count, blocks: blocks.len(), dataLen: ft.blockIndex.offset, resident: pg}}
	}
	return nil
}

// crossCheck verifies that the resident index and the properties agree:
// the page's own checks, and the totals.
func (r *Reader) crossCheck(pg *indexPage) error {
	p := &r.props
	if int64(pg.parts.count) != p.Partitions {
		return base.CorruptionErrorf("cannot check partition index: got %d partitions, properties say %d", pg.parts.count, p.Partitions)
	}
	if pg.parts.numBlocks != pg.blocks.len() || int64(pg.blocks.len()) != p.DataBlocks {
		return base.CorruptionErrorf("cannot check indexes: partitions reference %d blocks, block index has %d, properties say %d",
			pg.parts.numBlocks, pg.blocks.len(), p.DataBlocks)
	}
	cells, err := pg.crossCheck()
	if err != nil {
		return err
	}
	if cells != p.Cells {
		return base.CorruptionErrorf("cannot check indexes: blocks hold %d cells, properties say %d", cells, p.Cells)
	}
	return nil
}

// readAt reads len(buf) bytes at off; a short read means the file is
// shorter than its footer says, which is corruption.
func (r *Reader) readAt(buf []byte, off uint64) error {
	n, err := r.f.ReadAt(buf, int64(off))
	if n == len(buf) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return r.corruptf(off, "cannot read %d bytes: got %d (truncated file?)", len(buf), n)
	}
	return fmt.Errorf("cannot read sstable %s at offset %d: %w", r.path, off, err)
}

// readMeta reads, verifies and decompresses a meta block.
func (r *Reader) readMeta(h metaHandle, what string) ([]byte, error) {
	frame := make([]byte, h.storedLen+blockTrailerLen)
	if err := r.readAt(frame, h.offset); err != nil {
		return nil, err
	}
	raw, err := r.dec.decodeBlockFrame(frame, h.rawLen, nil)
	if err != nil {
		return nil, r.wrapAt(h.offset, what, err)
	}
	return raw, nil
}

// Properties returns the file's properties. The slices alias the reader.
func (r *Reader) Properties() Properties { return r.props }

// MayContain reports whether the file may hold partitionKey. False is
// certain; true is wrong about 1% of the time at 10 bits per key.
func (r *Reader) MayContain(partitionKey []byte) bool {
	return r.bloom.mayContain(bloomHash(partitionKey))
}

// KeyRange returns the smallest and largest partition keys of the file
// (nil, nil if it has no partitions).
func (r *Reader) KeyRange() (first, last []byte) { return r.top.firstKey(), r.top.lastKey }

// FindPartition looks a partition up: in the resident page index, then in
// the one index page that may hold it (read through the cache). The error
// is an I/O error or corruption of that page.
func (r *Reader) FindPartition(key []byte) (PartitionInfo, bool, error) {
	return r.findPartition(key, viaCache)
}

// FindPartitionNoCacheFill is FindPartition for a bulk scan: a cached
// index page is used, one read from the file is not added to the cache
// (IterOptions.NoCacheFill).
func (r *Reader) FindPartitionNoCacheFill(key []byte) (PartitionInfo, bool, error) {
	return r.findPartition(key, cacheIfPresent)
}

func (r *Reader) findPartition(key []byte, src blockSource) (PartitionInfo, bool, error) {
	j := r.top.search(key)
	if j < 0 {
		return PartitionInfo{}, false, nil
	}
	pg, fromFile, err := r.pageFrom(j, src)
	if err != nil {
		return PartitionInfo{}, false, err
	}
	info, ok := pg.parts.find(key, &r.ranges, pg.base)
	if ok {
		info.pg = pg
		info.pageFromFile = fromFile
	}
	return info, ok, nil
}

// Close closes the file. Iterators must not be used afterwards.
func (r *Reader) Close() error {
	r.ranges.release()
	if r.pinnedBytes > 0 {
		r.cache.releasePin(r.pinnedBytes)
		r.pinnedBytes = 0
	}
	if r.ownDec {
		r.dec.close()
	}
	r.dict.close()
	if err := r.f.Close(); err != nil {
		return fmt.Errorf("cannot close sstable %s: %w", r.path, err)
	}
	return nil
}

// blockSource says where loadBlock may look for and put a block.
type blockSource uint8

const (
	// viaCache reads through the cache and fills it: point reads.
	viaCache blockSource = iota
	// cacheIfPresent uses a cached block but does not fill the cache:
	// whole-file scans, which would only evict the hot blocks.
	cacheIfPresent
	// fromDisk always reads the file: verification.
	fromDisk
)

// loadBlock returns data block i decoded, checking it against its index
// entry, with a reference the caller must release once it no longer uses
// the block's cells.
func (r *Reader) loadBlock(pg *indexPage, i int, src blockSource) (*loadedBlock, error) {
	return r.loadBlockAhead(pg, i, src, nil)
}

// loadBlockFor is loadBlock for a PartitionIter with options o: when the
// block is read from the file, only the shaped values of the cells the
// iterator will hand out are rebuilt before it is cached, and the rest
// when another reader takes it from the cache (see lazyValues).
func (r *Reader) loadBlockFor(pg *indexPage, i int, src blockSource, o *IterOptions) (*loadedBlock, error) {
	return r.loadBlockWith(pg, i, src, nil, o)
}

// readahead serves a sequential reader (the Scanner) block frames out of
// large reads: compacting a file of one-row partitions was one pread per
// ~50-byte block. Its buffer is reused from fill to fill: no block keeps
// its frame (one stored uncompressed is copied into the block's buffer).
type readahead struct {
	buf []byte
	off uint64 // file offset of buf[0]
}

// readaheadSize is how much a Scanner reads at a time.
const readaheadSize = 256 << 10

// frame returns the n bytes at off, reading ahead if they are not in buf.
func (ra *readahead) frame(r *Reader, off uint64, n int) ([]byte, error) {
	if off >= ra.off && off+uint64(n) <= ra.off+uint64(len(ra.buf)) {
		return ra.buf[off-ra.off : off-ra.off+uint64(n) : off-ra.off+uint64(n)], nil
	}
	size := uint64(max(n, readaheadSize))
	if end := uint64(r.props.FileBytes); off < end && off+size > end {
		size = max(end-off, uint64(n))
	}
	buf := ra.buf[:0]
	if uint64(cap(buf)) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	ra.buf = buf[:0] // nothing cached while it is overwritten
	if err := r.readAt(buf, off); err != nil {
		return nil, err
	}
	ra.buf, ra.off = buf, off
	return buf[:n:n], nil
}

// framePool recycles the buffers compressed blocks are read into, for
// every Reader of the process: a block keeps only its decompressed bytes
// and an iterator lives for one query, so without it every uncached block
// read would leave its compressed frame (~8 KiB) to the garbage
// collector. (One pool per Reader, as before, started empty for each file
// and was emptied by collections, so a read of a file it had not read
// since still allocated its frame.)
var framePool sync.Pool // of *[]byte

// loadBlockAhead is loadBlock reading through ra, if not nil.
func (r *Reader) loadBlockAhead(pg *indexPage, i int, src blockSource, ra *readahead) (*loadedBlock, error) {
	return r.loadBlockWith(pg, i, src, ra, nil)
}

// loadBlockWith is loadBlockAhead, rebuilding only the shaped values of
// the cells an iterator with options o hands out if o is not nil.
func (r *Reader) loadBlockWith(pg *indexPage, i int, src blockSource, ra *readahead, o *IterOptions) (*loadedBlock, error) {
	off := pg.blocks.fileOffs[i]
	if src != fromDisk {
		if b := r.cache.get(r.fileNum, off); b != nil {
			return b, nil
		}
	}
	h := pg.blocks.handle(i)
	n := int(h.frameLen())
	var bufp *[]byte
	var frame []byte
	if ra != nil {
		var err error
		if frame, err = ra.frame(r, off, n); err != nil {
			return nil, err
		}
	} else {
		bufp, _ = framePool.Get().(*[]byte)
		if bufp == nil {
			bufp = new([]byte)
		}
		if cap(*bufp) < n {
			*bufp = make([]byte, n)
		}
		frame = (*bufp)[:n]
		if err := r.readAt(frame, off); err != nil {
			framePool.Put(bufp)
			return nil, err
		}
	}
	// The block lives in arena buffers (see blockArena): its cells and
	// decompressed bytes in mem, sized up front from the index entry; a
	// frame stored uncompressed is copied there too, so that no block
	// keeps a frame or a readahead buffer alive.
	arena := r.recycled.arena
	rawLen, ncells := int(h.rawLen), h.meta.Cells
	if h.rawLen > maxBlockRawLen || uint64(ncells) > h.rawLen {
		// decodeDataFrame or checkBlockMeta rejects such an entry; do
		// not size a buffer by it.
		rawLen, ncells = 0, 0
	}
	cb := cellBytes(ncells)
	// zstdOutputSlack past the block lets zstd copy in whole words.
	mem := arena.alloc(cb + rawLen + zstdOutputSlack)
	dst := mem[cb:cb:len(mem)]
	raw, err := r.dec.decodeDataFrame(frame, h.rawLen, dst, r.dict)
	if err == nil && len(raw) > 0 && &raw[:1][0] != &dst[:1][0] {
		raw = append(dst, raw...)
	}
	if bufp != nil {
		framePool.Put(bufp)
	}
	if err != nil {
		arena.free(mem)
		return nil, r.wrapAt(off, fmt.Sprintf("data block %d", i), err)
	}
	vals := r.recycled.valsBuffer(rawLen)
	scratch := vals
	if scratch == nil {
		scratch = r.recycled.getScratch()
	}
	keys := keyScratch.Get().(*[]byte)
	defer keyScratch.Put(keys)
	// Values are rebuilt in part only in a block a bound of o cuts: the
	// iterator hands out every cell of a block within its bounds (the
	// index entry's first and last keys say so), and rebuilding all of
	// them at once is cheaper than in two steps.
	deferValues := o != nil && (!base.AfterStart(h.meta.MinClustering, o.Start) || !base.BeforeEnd(h.meta.MaxClustering, o.End))
	b, tail, err := decodeBlockValues(raw, r.props.FormatVersion, cellsIn(mem, ncells)[:0], scratch, (*keys)[:0], deferValues)
	if err == nil && cap(b.keys) > cap(*keys) && cap(b.keys) <= maxKeyScratch {
		*keys = b.keys[:0:cap(b.keys)] // grown: the next block reuses it once adopt has copied the keys
	}
	if err == nil && len(tail) != 0 {
		err = base.CorruptionErrorf("cannot decode block: got %d trailing bytes", len(tail))
	}
	if err == nil {
		err = checkBlockMeta(&b.meta, &h.meta)
	}
	if err != nil {
		if vals != nil {
			arena.free(vals)
		} else {
			r.recycled.putScratch(scratch)
		}
		arena.free(mem)
		return nil, r.wrapAt(off, fmt.Sprintf("data block %d", i), err)
	}
	if b.lazy != nil {
		b.buildValues(cellsHandedOut(b, o))
	}
	lb := r.recycled.get()
	r.recycled.adopt(lb, b, mem, vals, rawLen)
	if src == viaCache {
		r.cache.add(r.fileNum, off, lb)
	}
	return lb, nil
}

// keyScratch holds the buffers a block's row keys are expanded into while
// it is decoded: adopt copies them into the block's arena memory, so the
// expansion need not allocate on the Go heap for every block read.
var keyScratch = sync.Pool{New: func() any { return new([]byte) }}

// maxKeyScratch bounds the key buffers keyScratch keeps.
const maxKeyScratch = 256 << 10

// checkBlockMeta compares what a block holds with what its index entry
// says; the iterators rely on the entry to seek and to skip.
func checkBlockMeta(got, want *BlockMeta) error {
	if got.Cells != want.Cells || got.MinTimestamp != want.MinTimestamp || got.MaxTimestamp != want.MaxTimestamp ||
		got.MaxLocalDeletionTime != want.MaxLocalDeletionTime ||
		!bytes.Equal(got.MinClustering, want.MinClustering) || !bytes.Equal(got.MaxClustering, want.MaxClustering) {
		return base.CorruptionErrorf("cannot check block against its index entry: got %d cells %x..%x ts %d..%d ldt %d, want %d cells %x..%x ts %d..%d ldt %d",
			got.Cells, got.MinClustering, got.MaxClustering, got.MinTimestamp, got.MaxTimestamp, got.MaxLocalDeletionTime,
			want.Cells, want.MinClustering, want.MaxClustering, want.MinTimestamp, want.MaxTimestamp, want.MaxLocalDeletionTime)
	}
	return nil
}

// Check reads every index page and data block from the file (not the
// cache), verifies its checksum, decodes it fully, and checks that cells
// are in order within and across the blocks of each partition and match
// the indexes and the properties. It returns the first problem found.
func (r *Reader) Check() error {
	var cells int64
	for j := range r.top.pages {
		pg, err := r.page(j, fromDisk)
		if err != nil {
			return err
		}
		n, err := r.checkPage(pg)
		if err != nil {
			return err
		}
		cells += n
	}
	if cells != r.props.Cells {
		return r.corruptf(0, "blocks hold %d cells, properties say %d", cells, r.props.Cells)
	}
	return nil
}

// checkPage checks the data blocks of one index page, returning its cells.
func (r *Reader) checkPage(pg *indexPage) (int64, error) {
	var cells int64
	w := pg.parts.walker()
	for {
		e, ok, err := w.next()
		if err != nil {
			return 0, r.wrapAt(uint64(pg.base), "partition index", err)
		}
		if !ok {
			return cells, nil
		}
		cells += e.info.Cells
		var last base.Cell
		// prev is the block last aliases, released once the next block
		// is checked against it.
		var prev *loadedBlock
		releasePrev := func() {
			if prev != nil {
				prev.release()
				prev = nil
			}
		}
		var minTS, maxTS int64
		for i := e.info.firstBlock; i < e.info.firstBlock+e.info.numBlocks; i++ {
			b, err := r.loadBlock(pg, i, fromDisk)
			if err != nil {
				releasePrev()
				return 0, err
			}
			var first base.Cell
			b.cell(0, &first)
			if prev != nil && base.CompareCellKeys(last.Clustering, last.Column, first.Clustering, first.Column) >= 0 {
				err := r.corruptf(pg.blocks.fileOffs[i], "data block %d of partition %x: first cell %x/%q does not sort after the previous block's last %x/%q",
					i, w.key, first.Clustering, first.Column, last.Clustering, last.Column)
				releasePrev()
				b.release()
				return 0, err
			}
			releasePrev()
			b.cell(b.len()-1, &last)
			prev = b
			if i == e.info.firstBlock {
				minTS, maxTS = b.meta.MinTimestamp, b.meta.MaxTimestamp
			}
			minTS, maxTS = min(minTS, b.meta.MinTimestamp), max(maxTS, b.meta.MaxTimestamp)
		}
		releasePrev()
		if e.info.Cells > 0 && (minTS < e.info.MinTimestamp || maxTS > e.info.MaxTimestamp) {
			return 0, r.corruptf(pg.blocks.fileOffs[e.info.firstBlock], "partition %x: cells span timestamps %d..%d, index says %d..%d",
				w.key, minTS, maxTS, e.info.MinTimestamp, e.info.MaxTimestamp)
		}
	}
}
