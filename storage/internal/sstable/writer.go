package sstable

// SSTable byte format, version 5 (formatVersion5; version 4 has no
// dictionary, version 3 keeps the
// partition and block indexes as two whole meta blocks, version 2 also
// lacks the tombstone statistics at the end of the properties, version 1
// also the block encodings byte; all are still read)
//
// Primitives: u8/u32/u64 are little-endian fixed width; uvarint, varint
// (zigzag), bytes (uvarint length + bytes) and ldt (local deletion time:
// 0 = NoDeletionTime, 1 = none, else zigzag+2) are defined in encoding.go.
//
// File:
//
//	+-------------------------+ 0
//	| data block              |  cells of one partition (a partition's blocks
//	| ...                     |  are contiguous; a block never holds two
//	| data block              |  partitions)
//	| index page 0            |  the entries of the partitions whose blocks
//	+-------------------------+  precede it (since the previous page) and of
//	| data block              |  their blocks; the file's compression
//	| ...                     |  (S2 in a zstd file: pageCompression)
//	| index page 1            |
//	| ...                     |
//	+-------------------------+ footer.blockIndex.offset
//	| page index              |  meta block, the file's compression
//	+-------------------------+
//	| dictionary (optional)   |  meta block, the file's compression: raw
//	+-------------------------+  zstd dictionary, 8 bytes to 1 MiB (v5)
//	| bloom filter            |  meta block, always uncompressed
//	+-------------------------+
//	| properties              |  meta block, the file's compression
//	+-------------------------+ fileSize - 112
//	| footer (112 bytes)      |
//	+-------------------------+ fileSize
//
// Versions 1 to 3: the data blocks fill [0, footer.blockIndex.offset), and
// the meta blocks are block index, partition index, bloom filter,
// properties: the block and partition indexes are the entries below, of
// the whole file, in one meta block each.
//
// Index page (version 4), decompressed; the writer ends one after the
// partition that brings it to indexPageSize (4 KiB), so a page holds at
// least one partition and all of its blocks' entries:
//
//	+-----------------------------------------------------------------+
//	| partitionEntriesLen uvarint                                     |
//	| partition index entries (restarts count from the page's first)  |
//	| block index entries, of the page's partitions' blocks           |
//	+-----------------------------------------------------------------+
//
// Page index (version 4), decompressed:
//
//	+-----------------------------------------------------------------+
//	| pages uvarint, then per page, in file order:                    |
//	|   shared uvarint | firstKeySuffix bytes (vs previous page's)    |
//	|   partitions uvarint (>= 1) | blocks uvarint                    |
//	|   dataLen uvarint: framed bytes of its data blocks, which       |
//	|     start where the previous page's frame ends (0 for page 0)   |
//	|   storedLen uvarint | rawLen uvarint: the page's frame, at the  |
//	|     end of its data blocks                                      |
//	| lastKey bytes: the file's last partition key (absent if no page)|
//	+-----------------------------------------------------------------+
//
// Every block, data or meta, is framed the same way, so its checksum is
// verified before a byte of it is decompressed or decoded:
//
//	+--------------------------+----------------+------------------+
//	| payload (storedLen)      | compression u8 | crc32c u32       |
//	+--------------------------+----------------+------------------+
//
// crc32c is CRC-32C (Castagnoli) of the payload followed by the compression
// byte. compression is 0 none, 1 zstd (one frame that records its content
// size, no frame checksum; a data block of 4 KiB or more is split into
// several zstd blocks at its values section, or before its shapes and at
// each hole column when its values are shaped, parts of less than 512
// bytes joining the next; Huffman-coded literal sections of 256 literals
// or more in four streams, see zstd_literals.go), 2 s2 (block format), 3
// zstd against the file's dictionary (version 5, data blocks only: one
// zstd frame naming dictionary ID 1, one zstd block, the dictionary as raw
// content). A block that does not shrink is stored with compression 0.
// The payload decompresses to exactly rawLen bytes, recorded by whatever
// points at the block (block index, footer).
//
// Dictionary (version 5): the first dictSampleSize (32 KiB) bytes of the
// file's decompressed data blocks, concatenated in file order. A zstd
// file with less data than that, or none of whose data blocks was
// compressed against it (all under 256 bytes, say), and any other file,
// has none (its footer handle is zero).
//
// Data block, decompressed (all cells of one partition, sorted by
// (clustering, column); stored column-wise, see block.go for why):
//
//	+---------------------------------------------------------------+
//	| header                                                        |
//	|   cells uvarint (>= 1)      rows uvarint (1..cells)           |
//	|   baseTimestamp varint      defaultTTL varint (int32)         |
//	|   columns uvarint (>= 1), then each name as bytes,            |
//	|     strictly ascending (the block's column dictionary)        |
//	|   encodings u8: bits 0-1 row keys (0 prefix, 1 fixed width),  |
//	|     bits 2-3 timestamp predictor (0 previous cell, 1 TimeUUID,|
//	|     2 inverted TimeUUID), bit 4 shaped values; others 0       |
//	|   7 section lengths uvarint: rowKeys, columnIdx, timestamps,  |
//	|     ttls, ldts, valueLens, values                             |
//	+---------------------------------------------------------------+
//	| flags         cells x u8                                      |
//	| rowKeys       prefix: per row shared uvarint, suffix bytes;   |
//	|               fixed width: see rowKeysFixed in block.go       |
//	| columnIdx     per cell: uvarint index into the dictionary;    |
//	|               empty when the dictionary has one name          |
//	| timestamps    byte planes of zigzag(residual - previous       |
//	|               cell's residual), one per cell without SameTS   |
//	|               (the first cell's previous is baseTimestamp);   |
//	|               residual = timestamp - the predictor's value    |
//	| ttls          per cell with ExplicitTTL: varint               |
//	| ldts          per cell with ExplicitLDT: varint delta from    |
//	|               the predicted local deletion time               |
//	| valueLens     plain: byte planes of the value lengths (>= 1), |
//	|               one per cell without EmptyValue; shaped: the    |
//	|               shapes (value_shapes.go)                        |
//	| values        plain: the values, concatenated; shaped: the    |
//	|               hole columns (value_shapes.go)                  |
//	+---------------------------------------------------------------+
//
//	byte planes of n integers: empty if n = 0, else width u8 (1..8),
//	then the n least significant bytes, then the n next bytes, ... up to
//	width planes (so exactly 1 + width*n bytes).
//
//	flags: bits 0-1 kind-1 | 0x04 NewRow (a row key follows; set on the
//	first cell) | 0x08 SameTS | 0x10 ExplicitTTL | 0x20 ExplicitLDT |
//	0x40 EmptyValue | 0x80 reserved, 0.
//
//	A row key shares `shared` leading bytes with the previous row's key
//	(0 for the first row). The default TTL is defaultTTL for expiring
//	cells and 0 for other kinds. The predicted local deletion time is
//	NoDeletionTime for live and counter cells; for expiring cells and
//	tombstones it is floor(timestamp/1e6) + TTL + the offset (ldt -
//	floor(timestamp/1e6) - TTL) of the previous cell of the same kind in
//	the block, 0 for the first. Within a row, column indexes strictly
//	increase; rows strictly increase by key.
//
// Block index, decompressed: one entry per data block in file order (so a
// block's offset is the sum of the previous frames' lengths):
//
//	+-----------------------------------------------------------------+
//	| storedLen uvarint | rawLen uvarint | cells uvarint              |
//	| minClustering bytes | maxClustering bytes                       |
//	| minTimestamp varint | maxTimestamp-minTimestamp uvarint         |
//	| maxLocalDeletionTime ldt (NoDeletionTime if a cell is live)     |
//	+-----------------------------------------------------------------+
//
// Partition index, decompressed: one entry per partition in key order;
// every restartInterval-th (16th) entry, starting with the first, stores
// its whole key (shared = 0). A partition's blocks follow the previous
// partition's, so its first block is the sum of the previous counts. The
// part after the key is length-prefixed, and starts with the block count,
// so a lookup skips entries without decoding them.
//
//	+-----------------------------------------------------------------+
//	| shared uvarint | keySuffix bytes | restLen uvarint, then rest:  |
//	| blocks uvarint (0 iff no cells) | flags u8                      |
//	| [flags&1] partition deletion: markedForDeleteAt varint, ldt     |
//	| [flags&2] count uvarint (>= 1), then per range tombstone, as    |
//	|           fragments (sorted, disjoint: base.FragmentRanges):    |
//	|           bounds u8 (1 start bounded, 2 start inclusive,        |
//	|           4 end bounded, 8 end inclusive), [start bytes],       |
//	|           [end bytes], markedForDeleteAt varint, ldt            |
//	| minTimestamp varint | span uvarint | maxLocalDeletionTime ldt   |
//	| [flags&4] cells uvarint (>= blocks)                             |
//	|           minClustering bytes | maxClustering bytes             |
//	+-----------------------------------------------------------------+
//
// Bloom filter: k u8 (1..30) | bit array (a multiple of 8 bytes, >= 8),
// over xxhash64 of each partition key (see bloom.go).
//
// Properties, decompressed:
//
//	+-----------------------------------------------------------------+
//	| uvarint each: partitions, cells, live, expiring, tombstone,     |
//	|   counter cells, range tombstones, partition deletions, blocks  |
//	| minTimestamp varint | maxTimestamp varint                       |
//	| minClustering, maxClustering: uvarint 0 = none, else len+1 and  |
//	|   the bytes                                                     |
//	| maxLocalDeletionTime ldt | minLocalDeletionTime ldt             |
//	| compression u8                                                  |
//	+---------------------- version 3 only ---------------------------+
//	| createdAt varint (unix seconds, the engine's clock; 0 unknown)  |
//	| deletions histogram   (tombstone cells, range tombstones and    |
//	|                        partition deletions by deletion time)    |
//	| expiry histogram      (expiring cells by expiry)                |
//	| written histogram     (expiring cells by expiry - TTL)          |
//	+-----------------------------------------------------------------+
//
//	histogram: bins uvarint (0..64), then per bin: its time (unix
//	seconds; the first bin a varint, each next one the uvarint distance
//	(>= 1) from the previous), count uvarint (>= 1). A bin's time is at or
//	after every value counted in it (merged bins keep the later time), so
//	a count "before t" is never too high. Counts add up to at most the cells or deletions they describe.
//
// Footer (112 bytes):
//
//	+--------+--------------------------------------------------------+
//	|   0    | block index:     offset u64, storedLen u64, rawLen u64 |
//	|        |   (version 4: the page index)                          |
//	|  24    | partition index: offset u64, storedLen u64, rawLen u64 |
//	|        |   (version 4: all zero; version 5: the dictionary, or  |
//	|        |   all zero if none)                                    |
//	|  48    | bloom filter:    offset u64, storedLen u64, rawLen u64 |
//	|  72    | properties:      offset u64, storedLen u64, rawLen u64 |
//	|  96    | format version u32                                     |
//	| 100    | crc32c u32 of bytes 0..99                              |
//	| 104    | magic "\x89EVTSST\n"                                   |
//	+--------+--------------------------------------------------------+
//
// The four (version 4: three; version 5: three or four) meta blocks are
// contiguous in this order and end where the footer starts; the reader
// rejects any other arrangement.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/eventide/eventide/storage/internal/base"
	"github.com/eventide/eventide/storage/vfs"
)

// Format versions. Each records what it introduced; a number is never
// reused for a different layout.
const (
	// formatVersion1 is the first format: column-wise data blocks of one
	// partition each, block and partition indexes, bloom filter,
	// properties, 112-byte footer.
	formatVersion1 uint32 = 1
	// formatVersion2 adds an encodings byte to the data block header:
	// fixed-width row keys, timestamps predicted from a TimeUUID
	// clustering key, and shaped values (value_shapes.go).
	formatVersion2 uint32 = 2
	// formatVersion3 appends tombstone statistics to the properties: the
	// file's creation time and histograms of its deletions' and expiring
	// cells' times, from which the compaction picker estimates the
	// tombstones a compaction could purge (issue 15).
	formatVersion3 uint32 = 3
	// formatVersion4 pages the index (index_page.go): the partition and
	// block index entries are cut into index pages read through the
	// cache, under a small resident page index, so an open file no
	// longer pins memory per partition (issue 11's million-timeline
	// fan-out, issue 15's RSS).
	formatVersion4 uint32 = 4
	// formatVersion5 gives a zstd file of more than dictSampleSize bytes
	// of data blocks a zstd dictionary (a meta block where versions 1 to
	// 3 had the partition index) against which its data blocks are
	// compressed (compression byte 3), so that small blocks compress
	// nearly as well as large ones and a cold read decodes less (issue
	// 15's window slice).
	formatVersion5 uint32 = 5
	// formatVersion is what the Writer writes.
	formatVersion = formatVersion5
)

const (
	// footerMagic ends every SSTable. The high-bit first byte and the
	// newline catch files mangled by 7-bit or line-ending conversions.
	footerMagic = "\x89EVTSST\n"
	// footerLen is four meta handles, the version, the checksum and the
	// magic.
	footerLen = 4*24 + 4 + 4 + 8
	// blockTrailerLen is the compression byte and the CRC-32C.
	blockTrailerLen = 1 + 4
	// defaultBlockSize is the target uncompressed data block size. A cold
	// read decompresses and decodes whole blocks, so smaller blocks make
	// cold slices cheaper and files bigger; with the file's dictionary
	// (version 5) a 16 KiB block compresses nearly as well as a 32 KiB
	// one without it, and the engine writes 16 KiB blocks when it uses
	// dictionaries (storage.Options.SSTableDictionary; issue 15,
	// BENCHMARKS.md).
	defaultBlockSize = 32 << 10
	// dictSampleSize is how many bytes of decompressed data blocks a zstd
	// Writer holds back before it fixes the file's dictionary: the first
	// dictSampleSize bytes of them, stored once (compressed) as the
	// dictionary meta block. The held blocks are then compressed against
	// it (costing a few bytes each, as the dictionary holds them), and
	// every later one. A file with fewer bytes of data gets no dictionary.
	dictSampleSize = 32 << 10
	// headBlockSize caps the first block of every partition: with the
	// newest rows first (a DESC TimeUUID clustering), that block is the
	// one every "latest N" query decodes on a cache miss. 16 KiB holds
	// the newest 50 events of ~200 bytes in one block: half of the
	// default 32 KiB (about 1% more bytes on the issue 2 workload), the
	// whole of a 16 KiB block written against a dictionary.
	headBlockSize = 16 << 10
	// writeBufferSize batches the writes of small blocks into fewer
	// system calls.
	writeBufferSize = 256 << 10
)

// WriterOptions configure a Writer.
type WriterOptions struct {
	// Compression of the blocks. The zero value is CompressionNone; the
	// engine's default is CompressionZstd (see DefaultWriterOptions).
	Compression Compression
	// BlockSize is the target uncompressed size of a data block; 0 means
	// 32 KiB. A partition's first block targets at most 16 KiB (see
	// headBlockSize). A block is closed before a cell would push it
	// past the target, so only a single cell larger than the target makes
	// a larger block.
	BlockSize int
	// BloomBitsPerKey sizes the bloom filter; 0 means 10 (about 1%
	// false positives). At most 64.
	BloomBitsPerKey int
	// ZstdLevel is a zstd level (1..22) mapped to the closest of the
	// encoder's speeds; 0 means the default (level 3). Data blocks
	// compressed against the file's dictionary always use the fastest
	// speed (see zstdDictLevel); the level applies to the rest.
	ZstdLevel int
	// CreatedAtSeconds is recorded in the properties as the file's
	// creation time (unix seconds, the engine's clock).
	CreatedAtSeconds int64
	// ZstdHeadBlocks compresses the first block of each partition with
	// zstd like the others in a zstd file. By default a zstd file's head
	// blocks are S2 (see blockCompression).
	ZstdHeadBlocks bool
	// NoDictionary keeps a zstd file from getting a dictionary: its data
	// blocks are compressed on their own, as before format version 5.
	NoDictionary bool
	// DictionarySampleSize is how many bytes of data blocks a zstd file
	// needs for a dictionary, and the dictionary's size; 0 means 32 KiB,
	// the engine's setting. Smaller values are for tests whose files are
	// small. It is clamped to 8 bytes .. 1 MiB.
	DictionarySampleSize int

	// oneStreamLiterals keeps klauspost/compress's literal sections as
	// the encoder writes them (one Huffman stream below 1024 literals),
	// for tests and measurements against the four-stream rewrite (see
	// literalStreams).
	oneStreamLiterals bool
	// ownLiteralTables keeps a Huffman table for every literal section
	// as the encoder writes them, instead of sharing one between
	// consecutive sections where that costs few bytes (see
	// literalStreams.shareTables), for tests and measurements.
	ownLiteralTables bool
	// observeDataBlock, if set, sees every data block's uncompressed
	// bytes and its zstd splits before compression (experiments that
	// compress the writer's blocks another way; see
	// column_dicts_experiment_test.go). It must not keep raw or splits.
	observeDataBlock func(raw []byte, splits []int)
}

// DefaultWriterOptions returns the options the engine uses by default.
func DefaultWriterOptions() WriterOptions {
	return WriterOptions{Compression: CompressionZstd, BlockSize: defaultBlockSize, BloomBitsPerKey: defaultBloomBitsPerKey}
}

// Writer writes one SSTable: call StartPartition for each partition in
// ascending key order, Add for its cells in ascending (clustering, column)
// order, then Finish. A Writer is not safe for concurrent use. After an
// I/O error every call returns that error.
type Writer struct {
	f    vfs.File
	bw   *bufio.Writer
	opts WriterOptions
	comp *compressor
	off  uint64 // bytes handed to bw
	err  error  // sticky I/O or setup error
	done bool

	inPartition bool
	cur         PartitionInfo // the partition being written (Key in keyBufs)
	haveCell    bool
	lastCK      []byte // the current partition's last cell (owned)
	lastCol     []byte
	prevKey     []byte // the previous partition's key, for ordering
	// keyBufs hold the current and the previous partition's keys
	// (alternately), ckBufs the current one's min and max clustering:
	// reused, as a flush of one-row partitions allocated them for each.
	keyBufs    [2][]byte
	keyBuf     int
	ckBufs     [2][]byte
	sinceYield int // raw block bytes written since the last yield
	havePrev   bool
	partitions int

	blk      blockBuilder
	rawBuf   []byte
	frameBuf []byte
	// The index page being filled: its partitions' entries and their
	// blocks' entries, its first key, where its data blocks start.
	blockIndex []byte
	partIndex  []byte
	pageFirst  []byte
	pageParts  int
	pageBlocks int
	pageData   uint64
	pageBuf    []byte
	// pageIndex holds the entries of the pages written; prevFirst is the
	// last one's first key.
	pageIndex []byte
	prevFirst []byte
	pages     int
	dataBytes uint64 // framed bytes of the data blocks
	hashes    []uint64
	props     Properties

	// The dictionary (format version 5): until dictDone, data blocks are
	// held in pending (their decompressed bytes in pendRaw) instead of
	// being written, and no index page is cut, because a block's index
	// entry needs its compressed length. dict is the file's dictionary,
	// nil if it has none.
	wantDict bool
	dictDone bool
	dict     []byte
	pending  []pendingBlock
	pendRaw  []byte
	// dictBlocks counts the data blocks compressed against dict: a file
	// with none is written without its dictionary.
	dictBlocks int
}

// pendingBlock is a data block held back until the dictionary is fixed.
type pendingBlock struct {
	rawEnd int    // end of its bytes in Writer.pendRaw
	splits []int  // compressor splits, relative to its start
	entry  []byte // its block index entry after the stored length
	head   bool   // a partition's first block, not its last (blockCompression)
}

// writeBuffers pools the Writers' 256 KiB write buffers across SSTables.
var writeBuffers sync.Pool

// NewWriter returns a Writer that writes to f from its current position
// (normally a new, empty file). It does not sync or close f.
func NewWriter(f vfs.File, opts WriterOptions) *Writer {
	if opts.BlockSize <= 0 {
		opts.BlockSize = defaultBlockSize
	}
	opts.BlockSize = min(opts.BlockSize, maxBlockRawLen/4)
	if opts.BloomBitsPerKey <= 0 {
		opts.BloomBitsPerKey = defaultBloomBitsPerKey
	}
	opts.BloomBitsPerKey = min(opts.BloomBitsPerKey, maxBloomBitsPerKey)
	bw, _ := writeBuffers.Get().(*bufio.Writer)
	if bw == nil {
		bw = bufio.NewWriterSize(f, writeBufferSize)
	} else {
		bw.Reset(f)
	}
	w := &Writer{f: f, bw: bw, opts: opts, props: newProperties(opts.Compression)}
	w.props.Tombstones.CreatedAt = opts.CreatedAtSeconds
	w.blk.shapeValues = opts.Compression == CompressionZstd
	w.wantDict = opts.Compression == CompressionZstd && !opts.NoDictionary
	if w.opts.DictionarySampleSize <= 0 {
		w.opts.DictionarySampleSize = dictSampleSize
	}
	w.opts.DictionarySampleSize = min(max(w.opts.DictionarySampleSize, minDictLen), maxDictLen)
	w.dictDone = !w.wantDict
	if !opts.Compression.Valid() {
		w.err = fmt.Errorf("cannot create sstable writer: got compression %d, want none, zstd or s2", opts.Compression)
		return w
	}
	w.comp, w.err = newCompressor(opts.Compression, opts.ZstdLevel)
	if w.comp != nil && !opts.oneStreamLiterals {
		w.comp.minFourStreams = min4StreamLiterals
		if !opts.ownLiteralTables {
			w.comp.lits.maxShareExtra = maxSharedTableExtra
		}
	}
	return w
}

func (w *Writer) usable(op string) error {
	if w.err != nil {
		return w.err
	}
	if w.done {
		return fmt.Errorf("cannot %s: sstable writer already finished", op)
	}
	return nil
}

// StartPartition ends the current partition, if any, and starts the
// partition key, whose keys must sort strictly after the previous
// partition's. del holds its partition deletion and range tombstones (use
// base.LiveDeletion and no ranges for none); it is copied. A partition may
// have no cells.
func (w *Writer) StartPartition(key []byte, del base.PartitionDeletions) error {
	if err := w.usable("start partition"); err != nil {
		return err
	}
	prev, havePrev := w.prevKey, w.havePrev
	if w.inPartition {
		prev, havePrev = w.cur.Key, true
	}
	if havePrev && bytes.Compare(key, prev) <= 0 {
		return fmt.Errorf("cannot start partition %x: got a key that does not sort after the previous partition %x", key, prev)
	}
	if w.inPartition {
		if err := w.finishPartition(); err != nil {
			return err
		}
	}
	w.cur = PartitionInfo{
		Key:                  w.nextKeyBuf(key),
		Deletions:            base.PartitionDeletions{Partition: del.Partition},
		MinTimestamp:         math.MaxInt64,
		MaxTimestamp:         math.MinInt64,
		MaxLocalDeletionTime: math.MinInt64,
		firstBlock:           w.pageBlocks,
	}
	// Stored as fragments (sorted, disjoint), so a read moves one cursor
	// through them instead of checking every range for every cell.
	ranges := base.FragmentRanges(del.Ranges)
	if len(ranges) > 0 {
		w.cur.Deletions.Ranges = make([]base.RangeTombstone, len(ranges))
		for i, rt := range ranges {
			w.cur.Deletions.Ranges[i] = rt.Clone()
		}
	}
	if !del.Partition.IsLive() {
		w.props.PartitionDeletions++
		w.noteDeletion(del.Partition)
		w.props.Tombstones.Deletions.Add(del.Partition.LocalDeletionTime)
	}
	w.props.RangeTombstones += int64(len(ranges))
	for _, rt := range ranges {
		w.noteDeletion(rt.Deletion)
		w.props.Tombstones.Deletions.Add(rt.Deletion.LocalDeletionTime)
	}
	w.inPartition, w.haveCell = true, false
	return nil
}

// noteDeletion folds a deletion into the partition's and the file's
// timestamp and deletion-time bounds.
func (w *Writer) noteDeletion(d base.DeletionTime) {
	w.cur.MinTimestamp = min(w.cur.MinTimestamp, d.MarkedForDeleteAt)
	w.cur.MaxTimestamp = max(w.cur.MaxTimestamp, d.MarkedForDeleteAt)
	w.cur.MaxLocalDeletionTime = max(w.cur.MaxLocalDeletionTime, d.LocalDeletionTime)
	w.props.MinLocalDeletionTime = min(w.props.MinLocalDeletionTime, d.LocalDeletionTime)
}

// Add appends a cell to the current partition. Cells must be strictly
// ascending by (clustering, column). The cell's bytes are copied.
func (w *Writer) Add(c *base.Cell) error {
	if err := w.usable("add cell"); err != nil {
		return err
	}
	if !w.inPartition {
		return fmt.Errorf("cannot add cell: no partition started")
	}
	if !c.Kind.Valid() {
		return fmt.Errorf("cannot add cell %x/%q: got kind %d, want 1..4", c.Clustering, c.Column, c.Kind)
	}
	if w.haveCell && base.CompareCellKeys(w.lastCK, w.lastCol, c.Clustering, c.Column) >= 0 {
		return fmt.Errorf("cannot add cell %x/%q to partition %x: it does not sort after %x/%q", c.Clustering, c.Column, w.cur.Key, w.lastCK, w.lastCol)
	}
	if n := len(c.Clustering) + len(c.Column) + len(c.Value); n > maxBlockRawLen/4 {
		return fmt.Errorf("cannot add cell %x/%q: got %d bytes of key and value, want at most %d", c.Clustering, c.Column, n, maxBlockRawLen/4)
	}
	sameRow := w.haveCell && bytes.Equal(w.lastCK, c.Clustering)
	target := w.opts.BlockSize
	if w.cur.numBlocks == 0 {
		target = min(target, headBlockSize)
	}
	if !w.blk.empty() && (w.blk.size()+cellSize(c, !sameRow) > target ||
		(!sameRow && w.blk.keyBytes+len(c.Clustering) > maxBlockKeyBytes)) {
		if err := w.flushBlock(true); err != nil {
			return err
		}
	}
	w.blk.add(c, sameRow)
	w.noteCell(c, sameRow)
	return nil
}

// noteCell records c, just written to the current partition, as its last
// cell and in the partition's and the file's statistics.
func (w *Writer) noteCell(c *base.Cell, sameRow bool) {
	if !w.haveCell {
		w.ckBufs[0] = append(w.ckBufs[0][:0], c.Clustering...)
		w.cur.MinClustering = w.ckBufs[0]
	}
	if !sameRow {
		w.lastCK = append(w.lastCK[:0], c.Clustering...)
	}
	w.lastCol = append(w.lastCol[:0], c.Column...)
	w.haveCell = true
	w.cur.Cells++
	w.cur.MinTimestamp = min(w.cur.MinTimestamp, c.Timestamp)
	w.cur.MaxTimestamp = max(w.cur.MaxTimestamp, c.Timestamp)
	w.cur.MaxLocalDeletionTime = max(w.cur.MaxLocalDeletionTime, cellMaxLDT(c))
	w.countCell(c)
}

// countCell counts c in the file's properties.
func (w *Writer) countCell(c *base.Cell) {
	switch c.Kind {
	case base.KindLive:
		w.props.LiveCells++
	case base.KindExpiring:
		w.props.ExpiringCells++
		w.props.MinLocalDeletionTime = min(w.props.MinLocalDeletionTime, c.LocalDeletionTime)
	case base.KindTombstone:
		w.props.TombstoneCells++
		w.props.MinLocalDeletionTime = min(w.props.MinLocalDeletionTime, c.LocalDeletionTime)
	case base.KindCounter:
		w.props.CounterCells++
	}
	w.props.Cells++
	w.props.Tombstones.noteCell(c)
}

// EstimatedSize is the file size so far plus what is buffered, counting
// the open block uncompressed.
func (w *Writer) EstimatedSize() int64 {
	return int64(w.off) + int64(w.blk.size()) + int64(len(w.pendRaw)) + int64(len(w.blockIndex)+len(w.partIndex)+len(w.pageIndex)+len(w.hashes))
}

// flushBlock compresses, frames and writes the open block and records it
// in the block index. more says the partition has cells after it.
func (w *Writer) flushBlock(more bool) error {
	var meta BlockMeta
	var splits []int
	w.rawBuf, meta, splits = w.blk.finish(w.rawBuf[:0])
	h := blockHandle{rawLen: uint64(len(w.rawBuf)), meta: meta}
	head := w.cur.numBlocks == 0 && more
	if !w.dictDone {
		// Held back: its entry without the stored length (0 is one
		// byte), its bytes, its splits.
		entry := appendBlockIndexEntry(nil, &h)[1:]
		w.pendRaw = append(w.pendRaw, w.rawBuf...)
		w.pending = append(w.pending, pendingBlock{rawEnd: len(w.pendRaw), splits: append([]int(nil), splits...), entry: entry, head: head})
	} else if err := w.writeBlock(w.rawBuf, splits, &h, head); err != nil {
		return err
	}
	w.blockAdded(len(w.rawBuf))
	w.blk.reset()
	if !w.dictDone && len(w.pendRaw) >= w.opts.DictionarySampleSize {
		if err := w.fixDict(); err != nil {
			return err
		}
	}
	return nil
}

// blockAdded counts a data block added to the current partition (written,
// held back or copied) of rawLen decompressed bytes.
//
// SSTables are written by background work (flushes, compactions) that can
// keep every P busy for seconds. Yielding after each block's worth of data
// (a few hundred µs of CPU) lets latency-sensitive goroutines, such as a
// NATS delivery or a writer's commit, run between blocks instead of
// waiting for the scheduler's 10 ms preemption. Not after every block: a
// million one-row partitions are a million tiny blocks, and yielding after
// each was 12% of writing them.
func (w *Writer) blockAdded(rawLen int) {
	w.pageBlocks++
	w.cur.numBlocks++
	w.props.DataBlocks++
	w.sinceYield += rawLen
	if w.sinceYield >= defaultBlockSize {
		w.sinceYield = 0
		runtime.Gosched()
	}
}

// writeBlock compresses, frames and writes one data block and appends its
// block index entry (h without its stored length).
func (w *Writer) writeBlock(raw []byte, splits []int, h *blockHandle, head bool) error {
	var stored int
	if w.opts.observeDataBlock != nil {
		w.opts.observeDataBlock(raw, splits)
	}
	w.frameBuf, stored = w.comp.appendBlockFrame(w.frameBuf[:0], raw, w.blockCompression(head), splits, true)
	w.countDictBlock(stored)
	if err := w.write(w.frameBuf); err != nil {
		return err
	}
	h.storedLen = uint64(stored)
	w.frameWritten(h, len(w.frameBuf))
	return nil
}

// frameWritten records a data block's frame of frameLen bytes just
// written: its block index entry and the data bytes.
func (w *Writer) frameWritten(h *blockHandle, frameLen int) {
	w.blockIndex = appendBlockIndexEntry(w.blockIndex, h)
	w.dataBytes += uint64(frameLen)
}

// blockCompression is the compression of a data block: the file's, but S2
// for the first block of a partition of several blocks in a zstd file
// unless ZstdHeadBlocks (a partition of one block, such as a timeline's
// or a small table's, stays zstd: its reads decode it all anyway). With the newest rows first (a DESC TimeUUID clustering)
// the head block is the one every cold "latest N" read and every read of
// a mostly expired partition decodes, and zstd's entropy tables cost a
// cold read of it about twice S2's CPU (BENCHMARKS.md, s10-read); the
// head block is at most headBlockSize, one block of a partition's many.
func (w *Writer) blockCompression(head bool) Compression {
	if head && w.opts.Compression == CompressionZstd && !w.opts.ZstdHeadBlocks {
		return CompressionS2
	}
	return w.opts.Compression
}

// countDictBlock counts the block framed in frameBuf (payload of stored
// bytes) if it was compressed against the dictionary.
func (w *Writer) countDictBlock(stored int) {
	if Compression(w.frameBuf[stored]) == compressionZstdDict {
		w.dictBlocks++
	}
}

// fixDict ends the hold-back: with at least DictionarySampleSize bytes
// held, the first DictionarySampleSize of them become the file's
// dictionary; then the held blocks are written (against it, if any) with
// their index entries.
func (w *Writer) fixDict() error {
	w.dictDone = true
	if n := w.opts.DictionarySampleSize; len(w.pendRaw) >= n {
		w.dict = append([]byte(nil), w.pendRaw[:n]...)
		if err := w.comp.setDict(w.dict); err != nil {
			w.err = fmt.Errorf("cannot write sstable: %w", err)
			return w.err
		}
	}
	start := 0
	for i := range w.pending {
		pb := &w.pending[i]
		raw := w.pendRaw[start:pb.rawEnd]
		start = pb.rawEnd
		var stored int
		if w.opts.observeDataBlock != nil {
			w.opts.observeDataBlock(raw, pb.splits)
		}
		w.frameBuf, stored = w.comp.appendBlockFrame(w.frameBuf[:0], raw, w.blockCompression(pb.head), pb.splits, true)
		w.countDictBlock(stored)
		if err := w.write(w.frameBuf); err != nil {
			return err
		}
		w.blockIndex = binary.AppendUvarint(w.blockIndex, uint64(stored))
		w.blockIndex = append(w.blockIndex, pb.entry...)
		w.dataBytes += uint64(len(w.frameBuf))
	}
	w.pending, w.pendRaw = nil, nil
	return nil
}

func (w *Writer) write(b []byte) error {
	if _, err := w.bw.Write(b); err != nil {
		w.err = fmt.Errorf("cannot write sstable at offset %d: %w", w.off, err)
		return w.err
	}
	w.off += uint64(len(b))
	return nil
}

// finishPartition writes the open block and the partition's index entry.
func (w *Writer) finishPartition() error {
	if !w.blk.empty() {
		if err := w.flushBlock(false); err != nil {
			return err
		}
	}
	p := &w.cur
	if p.MinTimestamp > p.MaxTimestamp {
		// Neither cells nor deletions.
		p.MinTimestamp, p.MaxTimestamp = 0, 0
	}
	if p.Cells > 0 {
		w.ckBufs[1] = append(w.ckBufs[1][:0], w.lastCK...)
		p.MaxClustering = w.ckBufs[1]
		if w.props.MinClustering == nil || bytes.Compare(p.MinClustering, w.props.MinClustering) < 0 {
			w.props.MinClustering = append(nonNil(w.props.MinClustering)[:0], p.MinClustering...)
		}
		if w.props.MaxClustering == nil || bytes.Compare(p.MaxClustering, w.props.MaxClustering) > 0 {
			w.props.MaxClustering = append(nonNil(w.props.MaxClustering)[:0], p.MaxClustering...)
		}
	}
	if p.Cells > 0 || !p.Deletions.IsEmpty() {
		w.props.MinTimestamp = min(w.props.MinTimestamp, p.MinTimestamp)
		w.props.MaxTimestamp = max(w.props.MaxTimestamp, p.MaxTimestamp)
	}
	w.props.MaxLocalDeletionTime = max(w.props.MaxLocalDeletionTime, p.MaxLocalDeletionTime)
	var prev []byte
	if w.pageParts%restartInterval != 0 {
		prev = w.prevKey
	} else if w.pageParts == 0 {
		w.pageFirst = append(w.pageFirst[:0], p.Key...)
	}
	w.partIndex = appendPartitionEntry(w.partIndex, prev, p)
	w.hashes = append(w.hashes, bloomHash(p.Key))
	w.prevKey, w.havePrev = p.Key, true
	w.partitions++
	w.pageParts++
	w.props.Partitions++
	w.inPartition = false
	// While blocks are held back (their entries not yet in blockIndex),
	// the page grows past its size instead.
	if w.dictDone && len(w.partIndex)+len(w.blockIndex) >= indexPageSize {
		return w.flushPage()
	}
	return nil
}

// pageCompression is the codec of a file's index pages: S2 in a zstd
// file, else the file's own. A page is read from the file by the first
// lookup of any of its partitions, and on a store just opened that read
// (zstd decompression, ~5-10 µs for a 4 KiB page, next to validating it)
// sat in the slowest percent of cold reads; index entries (lengths,
// timestamps, keys) compress poorly anyway. Measured on loadtest/peers'
// store at 2,000,000 events: 761 KB of pages, 606 KB with zstd, 653 KB
// with S2 (0.07% of the files). Readers decode any frame's codec.
func pageCompression(file Compression) Compression {
	if file == CompressionZstd {
		return CompressionS2
	}
	return file
}

// nextKeyBuf copies key into the key buffer not holding the previous
// partition's key.
func (w *Writer) nextKeyBuf(key []byte) []byte {
	w.keyBuf ^= 1
	w.keyBufs[w.keyBuf] = append(w.keyBufs[w.keyBuf][:0], key...)
	return w.keyBufs[w.keyBuf]
}

// flushPage writes the index page being filled after its data blocks and
// adds its entry to the page index.
func (w *Writer) flushPage() error {
	w.pageBuf = appendIndexPage(w.pageBuf[:0], w.partIndex, w.blockIndex)
	var stored int
	w.frameBuf, stored = w.comp.appendBlockFrame(w.frameBuf[:0], w.pageBuf, pageCompression(w.opts.Compression), nil, false)
	if len(w.pageBuf) > maxBlockRawLen {
		w.err = fmt.Errorf("cannot write sstable index page: got %d bytes, want at most %d", len(w.pageBuf), maxBlockRawLen)
		return w.err
	}
	ref := pageRef{partitions: w.pageParts, blocks: w.pageBlocks, dataLen: w.off - w.pageData,
		storedLen: uint64(stored), rawLen: uint64(len(w.pageBuf))}
	if err := w.write(w.frameBuf); err != nil {
		return err
	}
	w.pageIndex = appendPageIndexEntry(w.pageIndex, w.prevFirst, w.pageFirst, &ref)
	w.prevFirst, w.pageFirst = w.pageFirst, w.prevFirst
	w.pages++
	w.partIndex, w.blockIndex = w.partIndex[:0], w.blockIndex[:0]
	w.pageParts, w.pageBlocks, w.pageData = 0, 0, w.off
	return nil
}

// Finish ends the last partition and writes the indexes, the bloom filter,
// the properties and the footer, then flushes its buffer to the file. It
// neither syncs nor closes the file. It returns the file's properties.
func (w *Writer) Finish() (Properties, error) {
	if err := w.usable("finish sstable"); err != nil {
		return Properties{}, err
	}
	if w.inPartition {
		if err := w.finishPartition(); err != nil {
			return Properties{}, err
		}
	}
	if !w.dictDone {
		if err := w.fixDict(); err != nil {
			return Properties{}, err
		}
	}
	w.done = true
	defer w.comp.close()
	props := w.props
	props.Tombstones.clearHints()
	if props.MinTimestamp > props.MaxTimestamp {
		props.MinTimestamp, props.MaxTimestamp = 0, 0
	}
	if w.pageParts > 0 {
		if err := w.flushPage(); err != nil {
			return Properties{}, err
		}
	}
	pageIndex := binary.AppendUvarint(nil, uint64(w.pages))
	pageIndex = append(pageIndex, w.pageIndex...)
	if w.pages > 0 {
		pageIndex = appendBytes(pageIndex, w.prevKey)
	}
	var f footer
	f.version = formatVersion
	var err error
	if f.blockIndex, err = w.writeMeta(pageIndex, w.opts.Compression); err != nil {
		return Properties{}, err
	}
	if w.dictBlocks == 0 {
		// No block needs it: readers need not load it.
		w.dict = nil
	}
	if w.dict != nil {
		if f.partitionIndex, err = w.writeMeta(w.dict, w.opts.Compression); err != nil {
			return Properties{}, err
		}
	}
	// Bloom filter bits are random: compressing them only costs time.
	if f.bloom, err = w.writeMeta(appendBloomFilter(nil, w.hashes, w.opts.BloomBitsPerKey), CompressionNone); err != nil {
		return Properties{}, err
	}
	if f.properties, err = w.writeMeta(appendProperties(nil, &props), w.opts.Compression); err != nil {
		return Properties{}, err
	}
	if err := w.write(appendFooter(nil, &f)); err != nil {
		return Properties{}, err
	}
	if err := w.bw.Flush(); err != nil {
		w.err = fmt.Errorf("cannot write sstable: %w", err)
		return Properties{}, w.err
	}
	// Flushed and done: the buffer goes back for the next Writer (not
	// after an error, which may leave it holding unwritten bytes).
	w.bw.Reset(nil)
	writeBuffers.Put(w.bw)
	w.bw = nil
	props.FormatVersion = formatVersion
	props.DictionaryBytes = int64(len(w.dict))
	props.DataBytes = int64(w.dataBytes)
	props.FileBytes = int64(w.off)
	props.IndexBytes = props.FileBytes - props.DataBytes
	return props, nil
}

func (w *Writer) writeMeta(raw []byte, c Compression) (metaHandle, error) {
	var stored int
	w.frameBuf, stored = w.comp.appendBlockFrame(w.frameBuf[:0], raw, c, nil, false)
	h := metaHandle{offset: w.off, storedLen: uint64(stored), rawLen: uint64(len(raw))}
	if len(raw) > maxBlockRawLen {
		w.err = fmt.Errorf("cannot write sstable meta block: got %d bytes, want at most %d", len(raw), maxBlockRawLen)
		return h, w.err
	}
	return h, w.write(w.frameBuf)
}
