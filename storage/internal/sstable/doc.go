// Package sstable owns Eventide's immutable sorted file: one SSTable holds
// the partitions of one table, each with its cells sorted by (clustering,
// column) and its partition-level deletions (partition deletion and range
// tombstones). The byte format is drawn at the top of writer.go and in
// storage/FORMAT.md.
//
// Surface:
//
//	NewWriter(f, WriterOptions)         StartPartition, Add, EstimatedSize, Finish
//	Open(f, path, fileNum, *Cache)      *Reader: Properties, MayContain, Partition,
//	                                    NewPartitionIter, NewScanner, Check, Close
//	NewCache(bytes)                     shared LRU of decoded blocks (nil = no cache)
//
// Invariants:
//   - Partitions are strictly ascending by key (bytes.Compare); the cells of
//     a partition are strictly ascending by (clustering, column). The writer
//     rejects anything else, and the reader verifies it (Check, and every
//     decoded block).
//   - A data block holds cells of exactly one partition; a partition's
//     blocks are contiguous in the file and in the block index.
//   - Everything Open loads (footer, properties, both indexes, bloom filter)
//     and every block is checksummed; a decompressed length must equal the
//     recorded one. Any malformed byte surfaces as an error wrapping
//     base.ErrCorruption that names the file and the offset, never as a
//     panic or as silently wrong data.
//   - A Reader is immutable after Open and safe for concurrent use;
//     iterators and scanners are not (one goroutine each).
//   - The format version is recorded in the footer; a version number is
//     never reused for a different layout. The writer writes version 3;
//     the reader reads versions 1 to 3.
//
// Range tombstones: the writer stores each partition's as fragments
// (base.FragmentRanges), and Partition hands them out so, fragmenting the
// lists of files written before; a partition with many (rows deleted one
// by one) is decoded once and kept by its Reader, within a budget of a
// quarter of the Cache's capacity shared by the readers of that Cache.
//
// Reading: Open keeps the (decompressed) partition and block indexes in
// memory as compact byte slices plus offset tables, and decodes entries on
// demand, so memory stays proportional to the on-disk index size. A data
// block is decoded once into packed cells (offsets, no pointers, so the
// garbage collector does not scan cached blocks) over its expanded keys
// and its bytes (or, for shaped values, a buffer the values are rebuilt
// into), and shared through the Cache; iterators hand out base.Cells whose
// slices alias the block, so iteration allocates nothing per cell. Blocks are reference-counted: a PartitionIter holds every block it
// loaded until Close (so the cells it returned are valid until then), the
// cache holds one reference, and the buffers of a block nobody references
// any more are reused for the next block read instead of being left to
// the garbage collector.
package sstable
