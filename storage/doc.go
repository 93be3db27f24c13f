// Package storage is Eventide's LSM storage engine, specialised for
// time-bucketed, TTL'd event data with Cassandra's data model.
//
// Public surface:
//
//	Open(dir, Options) (*DB, error)    Options from DefaultOptions(): logger, Prometheus
//	                                   registerer, clock and filesystem are injected
//	DB.CreateTable(TableDef)           name, compaction strategy, default TTL, gc_grace,
//	                                   tombstone_gc mode, tombstone compaction threshold
//	                                   and interval, compression, counters
//	Batch                              Put, PutTTL, DeleteCell, DeleteRow, DeleteRange,
//	                                   DeletePartition, AddCounter across tables;
//	                                   Filter(keep) drops mutations by table and partition
//	DB.Apply(ctx, *Batch)              atomic and durable (WAL group commit); a
//	                                   stall waits at most until ctx is done
//	DB.ApplyNoSync(ctx, *Batch)        atomic and ordered like Apply, returns without
//	                                   waiting for the fsync: durable with the next synced
//	                                   write, Flush or Close, or within WALSyncInterval
//	                                   (for writes that can be redone, e.g. fan-out chunks)
//	DB.Slice(ctx, SliceQuery) Rows     bounded, forward or reverse, limit, tombstone cap,
//	                                   ReadStats trace; stops when ctx is done. Read it
//	                                   to the end or Close it: until then it pins its
//	                                   SSTables (a dropped one is released by the GC,
//	                                   logged and counted in Metrics.UnclosedReads)
//	DB.Flush, DB.Compact, DB.CompactAll
//	DB.Metrics() Metrics               String() prints the LSM as a table
//	DB.MemtableUsage() (bytes, frozen) what the memtables hold, cheaply
//	DB.MemtableUsageChange()           the same, and a channel closed when they may
//	                                   have shrunk (a flush, a failure, Close): to
//	                                   wait for room without polling
//	DB.Check()                         verifies every file
//	DB.Snapshot() *Snapshot            a flushed, pinned view of the SSTables; its
//	                                   ExportTable writes a table's cells that a filter
//	                                   keeps to SSTables outside the store (snapshot.go).
//	                                   Close it (a dropped one is released by the GC,
//	                                   logged and counted in Metrics.UnclosedSnapshots)
//	DB.Ingest(files, *Batch)           installs external SSTables and a batch in one
//	                                   manifest edit, after checking every block (ingest.go)
//	DB.Recovery() RecoveryInfo         what Open replayed and cut from the WAL
//	DB.Health() Health                 write health: nil, transient (a full disk;
//	                                   retried) or permanent (restart)
//	DB.Close()
//
// Data model: a table holds partitions (any bytes); a partition holds rows
// ordered by clustering key (bytes, compared with bytes.Compare: encode
// typed keys with package bucket); a row holds sparse cells (column name ->
// value, write timestamp in µs, optional expiry). Only explicit deletions
// create tombstones.
//
// Semantics (Cassandra's, exactly):
//   - The highest timestamp wins. On equal timestamps a tombstone or
//     expiring cell beats a live cell, a tombstone beats an expiring cell,
//     between two expiring cells or two tombstones the later local deletion
//     time wins, otherwise the greater value bytes win.
//   - A deletion (cell, row, range or partition) shadows every cell with a
//     timestamp <= its own.
//   - TTLs are seconds; an expired cell reads as a tombstone whose gc_grace
//     counts from its write time.
//   - Compaction purges a tombstone only when it is older than gc_grace
//     (TombstoneGCTimeout, the default; TombstoneGCImmediate tables, whose
//     writes follow a stream order, do not wait) and no SSTable outside the
//     compaction, nor any memtable, may hold older data for its partition.
//     SSTables record estimates of their droppable tombstones; the picker
//     compacts one past TombstoneThreshold, with its overlaps, once it is
//     older than TombstoneCompactionIntervalSeconds.
//   - Counter cells add up; a deleted counter must not be incremented again.
//
// Layout of the engine, one file per subsystem: batch.go (mutations and
// their WAL record), db.go (open, recovery, apply, memtable rotation,
// stalls), flush.go, manifest.go, version.go (ref-counted snapshots),
// snapshot.go and ingest.go (exports and ingests of SSTables), read.go
// and merging_iter.go (slices), compaction.go and
// compaction_picker.go (STCS, TWCS and tombstone compactions; a merge
// copies an input's data block whole where it would pass it through
// unchanged), compaction_pacer.go (Options.CompactionThroughput:
// background compactions wait between output chunks, holding no lock),
// compaction_rewrite.go (S2-to-zstd rewrite of closed windows, when idle
// and writes were quiet for a second, or rate-limited), metrics.go,
// check.go, filenames.go; internal/base (cells, reconciliation, range
// tombstone fragments), internal/memtable, internal/wal and
// internal/sstable (on-disk formats, see FORMAT.md);
// vfs (the filesystem interface, and MemFS, a filesystem that can crash
// below the page cache, for tests).
//
// Memory: the engine's own memory is a budget set by Options, about
// MemtableSize x (1 + MaxImmutableMemtables) of memtable arena plus
// BlockCacheSize of decoded blocks (16 MiB x 3 + 32 MiB at the defaults).
// The memtable arena and the decoded data blocks' buffers are mapped from
// the OS outside the Go heap (where the platform has mmap), so the garbage
// collector's heap goal, twice the live heap at GOGC=100, does not double
// them; a flushed memtable is unmapped as soon as the last version
// holding it (a read in progress) is dropped, and a block's buffers are
// reused for the next block read once neither the cache nor any read
// or compaction holds it. Rows a read returns are valid until its Next or
// Close, as their bytes may be in a memtable's arena or a recycled block.
// A read's own state (its merge, its SSTable iterators, the rows' arrays,
// and the arrays an earlier read of several sources grew) comes from a
// pool and goes back when the read finishes, so a one-SSTable slice
// allocates about three small objects on the Go heap and reads cause few
// collections.
// The block cache's arena is mapped and faulted in whole by Open
// (Options.LazyBlockCacheMemory), so that cold reads do not pay page
// faults while it fills.
// Metrics reports MemtableMappedBytes, BlockCacheBytes,
// BlockCacheMappedBytes and BlockCachePinnedIndexBytes; docs/ARCHITECTURE.md
// ("The engine's memory") says how to size the budget.
package storage
