// Package sstable owns Eventide's immutable sorted file: one SSTable holds
// the partitions of one table, each with its cells sorted by (clustering,
// column) and its partition-level deletions (partition deletion and range
// tombstones). The byte format is drawn at the top of writer.go and in
// storage/FORMAT.md.
//
// Surface:
//
//	NewWriter(f, WriterOptions)         StartPartition, Add, CopiesBlocks, CopyBlock,
//	                                    EstimatedSize, Finish
//	Open(f, path, fileNum, *Cache)      *Reader: Properties, MayContain, FindPartition,
//	                                    NewPartitionIter, NewScanner, Check, Close
//	Scanner                             NextPartition, NextCell; BlockStart and
//	                                    BlockCells, for a compaction to hand a block it
//	                                    passes through unchanged to Writer.CopyBlock,
//	                                    which writes its frame as it is (block_copy.go)
//	NewCache(bytes)                     shared LRU of decoded blocks and index pages
//	                                    (nil = no cache)
//
// Invariants:
//   - Partitions are strictly ascending by key (bytes.Compare); the cells of
//     a partition are strictly ascending by (clustering, column). The writer
//     rejects anything else, and the reader verifies it (Check, and every
//     decoded block).
//   - A data block holds cells of exactly one partition; a partition's
//     blocks are contiguous in the file and in the block index.
//   - Everything Open loads (footer, properties, page index or, before
//     version 4, both whole indexes, bloom filter) and every index page and
//     data block is checksummed; a decompressed length must equal the
//     recorded one. Any malformed byte surfaces as an error wrapping
//     base.ErrCorruption that names the file and the offset, never as a
//     panic or as silently wrong data.
//   - A Reader is immutable after Open and safe for concurrent use;
//     iterators and scanners are not (one goroutine each).
//   - The format version is recorded in the footer; a version number is
//     never reused for a different layout. The writer writes version 5;
//     the reader reads versions 1 to 5.
//
// Dictionary (version 5): a zstd Writer holds its first 32 KiB of data
// blocks back, makes them the file's raw zstd dictionary (a checksummed
// meta block), and compresses every data block against it, so 16 KiB
// blocks compress about as well as 32 KiB ones without it and a cold read
// of a few rows decodes half as much (WriterOptions.NoDictionary turns it
// off; the engine turns it on only with storage.Options.SSTableDictionary,
// since it costs density). A Reader
// keeps the dictionary resident and creates one zstd decoder registered
// with it, on the first block that needs it, shared by its goroutines.
//
// Range tombstones: the writer stores each partition's as fragments
// (base.FragmentRanges), and FindPartition hands them out so, fragmenting the
// lists of files written before; a partition with many (rows deleted one
// by one) is decoded once and kept by its Reader, within a budget of a
// quarter of the Cache's capacity shared by the readers of that Cache.
//
// Reading: a version 4 file's partition and block index entries are cut
// into index pages of about 4 KiB (whole partitions and their blocks'
// entries, each page written after its data blocks); Open keeps only the
// page index (each page's first key and place: about 40 bytes per page,
// i.e. per ~50 small partitions) and the bloom filter (10 bits per
// partition) resident. FindPartition binary-searches the page index, reads
// the page through the Cache (checksummed and fully validated when it is
// read, like a data block) and looks the key up in it; a PartitionInfo
// keeps its page, so an iterator never looks it up again. With a Cache,
// Open also reads, validates and pins every index page of the file for
// the Reader's life when they fit the cache's pinning budget (a sixteenth
// of its capacity, shared by its readers and taken out of the capacity,
// CacheMetrics.PinnedIndexBytes; Close gives it back), so lookups in such
// files never read a page from the file; a page that fails to read or
// validate at Open is left to the lookup that needs it, which reports it. The Cache evicts
// data blocks before index pages while pages take at most half of it.
// Pages are never recycled: an evicted page stays valid for whoever still holds a
// PartitionInfo of it. A Reader opened without a Cache keeps the pages it
// has read (as it kept whole indexes before). Files of versions 1 to 3 keep their whole
// (decompressed) partition and block indexes resident, as one page. Within
// a page, entries are compact byte slices plus offset tables, decoded on
// demand. A data
// block is decoded once into packed cells (offsets, no pointers, so the
// garbage collector does not scan cached blocks) over its expanded keys
// and its bytes (or, for shaped values, a buffer the values are rebuilt
// into), and shared through the Cache; iterators hand out base.Cells whose
// slices alias the block, so iteration allocates nothing per cell. A
// PartitionIter that reads a block of shaped values from the file
// rebuilds only the values of the cells within its bounds, and caches the
// block so, keeping its decompressed bytes; the Cache rebuilds the rest,
// once, before it hands the block to any other reader (lazy_values.go).
//
// Block memory and the lifetime of cells: a decoded block's buffers (its
// decompressed bytes, packed cells, expanded keys and rebuilt values) come
// from the Cache's block arena (block_memory.go), slabs mapped from the OS
// outside the Go heap, so that the garbage collector neither scans nor
// counts them (a Reader without a Cache, or a platform without mmap, uses
// Go allocations recycled the same way). Blocks are reference-counted: the
// cache holds one reference, a PartitionIter holds every block it loaded
// until Close, a Scanner the block it reads and the one before, Check
// each block while it checks it. When the last reference goes, the
// buffers go back to the arena's free lists and are reused for the next
// block read; with Cache.PoisonReleased they are first overwritten with
// 0xdb. So the invariant every caller keeps: a cell's bytes are valid only
// while the iterator or scanner that returned it holds the block, that
// is until PartitionIter.Close, or until the Scanner has loaded the
// second block after the cell's (see Scanner); whoever needs them longer
// copies them. A stray slice into a released buffer does not keep it
// alive (it is not Go memory) and reads poison or another block's bytes.
// The arena's memory is bounded by the cache's capacity plus the blocks
// iterators and scanners hold beyond it; CacheMetrics.MappedBytes reports it.
// On Linux, Cache.PrefaultNow makes the arena map and fault in the cache's
// whole capacity at once (Cache.Prefault: when it first needs memory),
// so that cold reads decode
// into resident memory (CacheMetrics.ReservedBytes is what no block has
// used yet; Cache.ReleaseReserve unmaps it when the store closes).
package sstable
