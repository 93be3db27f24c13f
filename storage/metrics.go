package storage

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventide/eventide/storage/vfs"
)

// metrics holds the engine's counters. They are plain atomics read by
// Metrics() and exported to Prometheus through a collector that reads
// them at scrape time, so the write path never touches client_golang.
type metrics struct {
	db *DB

	batches, mutations           atomic.Int64
	walSyncs, walSyncedRecords   atomic.Int64
	walSyncedBytes, walSyncNanos atomic.Int64
	flushes, flushedBytes        atomic.Int64
	compactions, compactedIn     atomic.Int64
	compactedOut, purgedTombs    atomic.Int64
	droppedSSTables              atomic.Int64
	stalls, stallNanos           atomic.Int64
	// pacedNanos is the time background compactions waited for the
	// throughput limit; pacedWaiting how many wait now.
	pacedNanos, pacedWaiting   atomic.Int64
	reads, readTombstones      atomic.Int64
	readLiveCells, readBlocks  atomic.Int64
	readSSTables, readSSTSkips atomic.Int64
	// unclosedReads counts slices released by the garbage collector
	// because their caller never closed them (releaseUnclosed).
	unclosedReads atomic.Int64
	// unclosedSnapshots counts snapshots released by the garbage
	// collector (releaseUnclosedSnapshot).
	unclosedSnapshots atomic.Int64
	// memtableMapped is the memtable arena mapped from the OS, outside
	// the Go heap (memtable.NewAccounted). It is an allocation of its own,
	// not a field: every memtable's arena keeps a pointer to it in the
	// argument of the cleanup that unmaps the arena once the memtable is
	// unreachable, and an object reachable from a cleanup's argument
	// stays reachable. A field would keep this metrics, its db and so
	// the db's memtable reachable for good: a closed DB was never
	// collected, its block cache and memtable memory never unmapped.
	memtableMapped                *atomic.Int64
	collectors                    []prometheus.Collector
	applyLatency, tombstonesPerRd prometheus.Histogram
}

func newMetrics(db *DB) *metrics {
	m := &metrics{db: db, memtableMapped: new(atomic.Int64)}
	m.applyLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "eventide_storage_apply_seconds", Help: "Time to make one batch durable and visible (WAL append and memtable insert).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})
	m.tombstonesPerRd = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "eventide_storage_read_tombstones_scanned", Help: "Tombstones scanned per slice read.",
		Buckets: prometheus.ExponentialBuckets(1, 4, 10),
	})
	return m
}

func (m *metrics) applied(b *Batch, took time.Duration) {
	m.batches.Add(1)
	m.mutations.Add(int64(b.Len()))
	m.applyLatency.Observe(took.Seconds())
}

func (m *metrics) walSync(records, bytes int, took time.Duration) {
	m.walSyncs.Add(1)
	m.walSyncedRecords.Add(int64(records))
	m.walSyncedBytes.Add(int64(bytes))
	m.walSyncNanos.Add(int64(took))
}

func (m *metrics) flushed(sstables int, bytes int64, took time.Duration) {
	m.flushes.Add(1)
	m.flushedBytes.Add(bytes)
}

func (m *metrics) compacted(c *compaction, in, out int64, st compactionStats, took time.Duration) {
	m.compactions.Add(1)
	m.compactedIn.Add(in)
	m.compactedOut.Add(out)
	m.purgedTombs.Add(st.purged)
	if c.dropOnly {
		m.droppedSSTables.Add(int64(len(c.inputs)))
	}
}

func (m *metrics) stallStarted(reason string) { m.stalls.Add(1) }

func (m *metrics) stallEnded(took time.Duration) { m.stallNanos.Add(int64(took)) }

func (m *metrics) read(s *ReadStats) {
	m.reads.Add(1)
	m.readTombstones.Add(int64(s.TombstonesScanned))
	m.readLiveCells.Add(int64(s.LiveCells))
	m.readBlocks.Add(int64(s.BlocksRead))
	m.readSSTables.Add(int64(s.SSTablesRead))
	m.readSSTSkips.Add(int64(s.SSTablesSkipped))
	m.tombstonesPerRd.Observe(float64(s.TombstonesScanned))
}

// register adds the engine's collectors to r.
func (m *metrics) register(r prometheus.Registerer) error {
	m.collectors = []prometheus.Collector{&collector{m: m}, m.applyLatency, m.tombstonesPerRd}
	for i, c := range m.collectors {
		if err := r.Register(c); err != nil {
			for _, done := range m.collectors[:i] {
				r.Unregister(done)
			}
			return fmt.Errorf("cannot register storage metrics: %w", err)
		}
	}
	return nil
}

func (m *metrics) unregister(r prometheus.Registerer) {
	for _, c := range m.collectors {
		r.Unregister(c)
	}
}

type counterDesc struct {
	desc  *prometheus.Desc
	value *atomic.Int64
	scale float64
}

// collector exports the atomics at scrape time.
type collector struct{ m *metrics }

func (c *collector) counters() []counterDesc {
	m := c.m
	d := func(name, help string, v *atomic.Int64, scale float64) counterDesc {
		return counterDesc{prometheus.NewDesc(name, help, nil, nil), v, scale}
	}
	return []counterDesc{
		d("eventide_storage_batches_total", "Batches applied.", &m.batches, 1),
		d("eventide_storage_mutations_total", "Mutations applied.", &m.mutations, 1),
		d("eventide_storage_wal_syncs_total", "WAL fsyncs (one per group commit).", &m.walSyncs, 1),
		d("eventide_storage_wal_synced_bytes_total", "Bytes made durable by WAL fsyncs.", &m.walSyncedBytes, 1),
		d("eventide_storage_wal_sync_seconds_total", "Time spent in WAL fsyncs.", &m.walSyncNanos, 1e-9),
		d("eventide_storage_flushes_total", "Memtable flushes.", &m.flushes, 1),
		d("eventide_storage_flushed_bytes_total", "Bytes written by flushes.", &m.flushedBytes, 1),
		d("eventide_storage_compactions_total", "Compactions run (including whole-SSTable expiry drops).", &m.compactions, 1),
		d("eventide_storage_compaction_read_bytes_total", "SSTable bytes consumed by compactions.", &m.compactedIn, 1),
		d("eventide_storage_compaction_written_bytes_total", "SSTable bytes written by compactions.", &m.compactedOut, 1),
		d("eventide_storage_purged_tombstones_total", "Tombstones and expired cells purged after gc_grace.", &m.purgedTombs, 1),
		d("eventide_storage_expired_sstables_dropped_total", "Fully expired SSTables dropped whole.", &m.droppedSSTables, 1),
		d("eventide_storage_compaction_paced_seconds_total", "Time background compactions waited for the compaction throughput limit.", &m.pacedNanos, 1e-9),
		d("eventide_storage_write_stalls_total", "Writes that waited for flushes or compactions.", &m.stalls, 1),
		d("eventide_storage_write_stall_seconds_total", "Time writers spent stalled.", &m.stallNanos, 1e-9),
		d("eventide_storage_reads_total", "Slice reads.", &m.reads, 1),
		d("eventide_storage_read_tombstones_total", "Tombstones scanned by reads.", &m.readTombstones, 1),
		d("eventide_storage_read_blocks_total", "SSTable blocks read by slices.", &m.readBlocks, 1),
		d("eventide_storage_reads_unclosed_total", "Slices their caller never closed, released by the garbage collector (a bug in the caller: until then each kept its SSTables from being deleted and its blocks in memory).", &m.unclosedReads, 1),
		d("eventide_storage_snapshots_unclosed_total", "Snapshots their caller never closed, released by the garbage collector (a bug in the caller: until then each kept its SSTables from being deleted).", &m.unclosedSnapshots, 1),
	}
}

var (
	sstablesDesc = prometheus.NewDesc("eventide_storage_sstables", "Live SSTables per table.", []string{"table"}, nil)
	bytesDesc    = prometheus.NewDesc("eventide_storage_sstable_bytes", "Bytes on disk of live SSTables per table.", []string{"table"}, nil)
	walBytesDesc = prometheus.NewDesc("eventide_storage_wal_bytes", "Bytes on disk of WAL segments (those not yet flushed, the one being written, and those kept for reuse).", nil, nil)
	memDesc      = prometheus.NewDesc("eventide_storage_memtable_bytes", "Estimated bytes held in memtables (mutable and frozen).", nil, nil)
	immDesc      = prometheus.NewDesc("eventide_storage_memtables_frozen", "Frozen memtables waiting for a flush.", nil, nil)
	mappedDesc   = prometheus.NewDesc("eventide_storage_memtable_mapped_bytes", "Memtable arena mapped from the OS, outside the Go heap (flushed memtables until they are unmapped).", nil, nil)
	cacheDesc    = prometheus.NewDesc("eventide_storage_block_cache_bytes", "Decoded blocks and index pages held by the block cache.", nil, nil)
	cacheMapDesc = prometheus.NewDesc("eventide_storage_block_cache_mapped_bytes", "Block buffer arena mapped from the OS, outside the Go heap: cached blocks, blocks iterators still hold, and free buffers.", nil, nil)
	pinnedDesc   = prometheus.NewDesc("eventide_storage_block_cache_pinned_index_bytes", "SSTable index pages pinned when their files opened (Go heap, counted against the block cache's capacity).", nil, nil)
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, cd := range c.counters() {
		ch <- cd.desc
	}
	ch <- sstablesDesc
	ch <- bytesDesc
	ch <- walBytesDesc
	ch <- memDesc
	ch <- immDesc
	ch <- mappedDesc
	ch <- cacheDesc
	ch <- cacheMapDesc
	ch <- pinnedDesc
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	for _, cd := range c.counters() {
		ch <- prometheus.MustNewConstMetric(cd.desc, prometheus.CounterValue, float64(cd.value.Load())*cd.scale)
	}
	snap := c.m.db.Metrics()
	for _, t := range snap.Tables {
		ch <- prometheus.MustNewConstMetric(sstablesDesc, prometheus.GaugeValue, float64(t.SSTables), t.Name)
		ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.GaugeValue, float64(t.Bytes), t.Name)
	}
	ch <- prometheus.MustNewConstMetric(walBytesDesc, prometheus.GaugeValue, float64(snap.WALBytes))
	ch <- prometheus.MustNewConstMetric(memDesc, prometheus.GaugeValue, float64(snap.MemtableBytes))
	ch <- prometheus.MustNewConstMetric(immDesc, prometheus.GaugeValue, float64(snap.FrozenMemtables))
	ch <- prometheus.MustNewConstMetric(mappedDesc, prometheus.GaugeValue, float64(snap.MemtableMappedBytes))
	ch <- prometheus.MustNewConstMetric(cacheDesc, prometheus.GaugeValue, float64(snap.BlockCacheBytes))
	ch <- prometheus.MustNewConstMetric(cacheMapDesc, prometheus.GaugeValue, float64(snap.BlockCacheMappedBytes))
	ch <- prometheus.MustNewConstMetric(pinnedDesc, prometheus.GaugeValue, float64(snap.BlockCachePinnedIndexBytes))
}

// TableMetrics describes one table's SSTables.
type TableMetrics struct {
	Name       string
	Compaction CompactionStrategy
	SSTables   int
	// Bytes is the size on disk of the table's live SSTables.
	Bytes             int64
	Partitions, Cells int64
	Tombstones        int64
	Compacting        int
	// Windows are a TimeWindow table's SSTables by the window of their
	// newest write (the compaction's grouping), newest first; nil for
	// other strategies.
	Windows []WindowMetrics
}

// WindowMetrics is one time window of a TimeWindow table.
type WindowMetrics struct {
	// Start is when the window begins (UTC); it lasts the table's
	// WindowSeconds.
	Start    time.Time
	SSTables int
	Bytes    int64
}

// Metrics is a snapshot of the engine's state and counters.
type Metrics struct {
	Tables []TableMetrics
	// WALBytes is the size on disk of the WAL segments: those holding
	// writes not yet flushed, the one being written, and those kept for
	// reuse (Options.WALRecycleSegments).
	WALBytes int64
	// MemtableBytes is what the memtables (mutable and frozen) hold:
	// the arena bytes their cells use, and an estimate for deletions.
	MemtableBytes   int64
	FrozenMemtables int
	// MemtableSize is the size at which the mutable memtable is frozen
	// and flushed (Options.MemtableSize).
	MemtableSize int64
	// MemtableMappedBytes is the memtable arena mapped from the OS,
	// outside the Go heap: the memtables' slabs whole (a little more than
	// MemtableBytes), and those of flushed memtables until they are
	// unmapped, which happens once no reader holds them and the garbage
	// collector has seen them unreachable. 0 on platforms without mmap,
	// where the arena is on the Go heap (docs/OPERATIONS.md, Memory).
	MemtableMappedBytes int64
	Batches             int64
	WALSyncs            int64
	// WALSyncTime is the time the WAL's fsyncs of records took, in all.
	WALSyncTime time.Duration
	// WALSegmentsReused counts the WAL segments that were kept segments
	// reused (Options.WALRecycleSegments) rather than new sparse files.
	WALSegmentsReused int64
	Flushes           int64
	Compactions       int64
	CompactionRead    int64
	CompactionWritten int64
	PurgedTombstones  int64
	DroppedSSTables   int64
	// CompactionPacedTime is the time background compactions waited for
	// Options.CompactionThroughput, in all (a compaction that waits
	// 100 ms adds 100 ms); CompactionsPaced how many wait now.
	CompactionPacedTime time.Duration
	CompactionsPaced    int
	WriteStalls         int64
	WriteStallTime      time.Duration
	Reads               int64
	TombstonesRead      int64
	// UnclosedReads counts slices whose Rows were dropped neither read
	// to the end nor closed, released when the garbage collector found
	// them unreachable (each is logged as a warning). Until then such a
	// read kept the SSTables it read from being deleted, and its blocks
	// in memory. Anything but 0 is a bug in the caller.
	UnclosedReads int64
	// UnclosedSnapshots counts Snapshots dropped without Close, released
	// when the garbage collector found them unreachable (each is logged
	// as a warning); until then their SSTables could not be deleted.
	// Anything but 0 is a bug in the caller.
	UnclosedSnapshots int64
	// BlockCacheHits and BlockCacheMisses count lookups of decompressed
	// blocks in the block cache (Options.BlockCacheSize; zeros without
	// one); BlockCacheBytes is what it holds (decoded blocks and index
	// pages, at most BlockCacheCapacity).
	BlockCacheHits, BlockCacheMisses, BlockCacheBytes int64
	BlockCacheCapacity                                int64
	// BlockCacheMappedBytes is the arena the data blocks live in, mapped
	// from the OS outside the Go heap (on the heap on platforms without
	// mmap): the cached blocks (index pages stay on the Go heap), the
	// blocks open iterators and compactions still hold after their
	// eviction, and free buffers kept for the next reads. It stays
	// bounded by the cache's capacity plus the blocks pinned at the
	// peak, in each size class (see docs/ARCHITECTURE.md, "The engine's
	// memory"). Unless Options.LazyBlockCacheMemory, it is at least the
	// capacity from Open on: the prefaulted reserve
	// the blocks are cut from, resident whether used yet or not.
	BlockCacheMappedBytes int64
	// BlockCachePinnedIndexBytes is what the open SSTables' index pages
	// pinned at open take (on the Go heap, within a sixteenth of
	// BlockCacheCapacity and counted against it; docs/ARCHITECTURE.md,
	// "The engine's memory").
	BlockCachePinnedIndexBytes int64
}

// Metrics returns a snapshot; its String prints the LSM as a table.
func (db *DB) Metrics() Metrics {
	m := db.metrics
	out := Metrics{
		Batches: m.batches.Load(), WALSyncs: m.walSyncs.Load(), Flushes: m.flushes.Load(),
		Compactions: m.compactions.Load(), CompactionRead: m.compactedIn.Load(), CompactionWritten: m.compactedOut.Load(),
		PurgedTombstones: m.purgedTombs.Load(), DroppedSSTables: m.droppedSSTables.Load(),
		WriteStalls: m.stalls.Load(), WriteStallTime: time.Duration(m.stallNanos.Load()),
		CompactionPacedTime: time.Duration(m.pacedNanos.Load()), CompactionsPaced: int(m.pacedWaiting.Load()),
		Reads: m.reads.Load(), TombstonesRead: m.readTombstones.Load(), UnclosedReads: m.unclosedReads.Load(), UnclosedSnapshots: m.unclosedSnapshots.Load(),
		WALBytes: db.walBytes(), MemtableMappedBytes: m.memtableMapped.Load(), MemtableSize: db.opts.MemtableSize,
		WALSyncTime: time.Duration(m.walSyncNanos.Load()),
	}
	if db.wal != nil {
		out.WALSegmentsReused = db.wal.ReusedSegments()
	}
	cm := db.cache.Metrics()
	out.BlockCacheHits, out.BlockCacheMisses, out.BlockCacheBytes = cm.Hits, cm.Misses, cm.Bytes
	out.BlockCacheCapacity, out.BlockCacheMappedBytes = cm.Capacity, cm.MappedBytes
	out.BlockCachePinnedIndexBytes = cm.PinnedIndexBytes
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.current == nil {
		return out
	}
	out.MemtableBytes, out.FrozenMemtables = db.memtableUsageLocked()
	windowIndex := map[int64]int{}
	for _, t := range db.tables {
		tm := TableMetrics{Name: t.def.Name, Compaction: t.def.Compaction}
		clear(windowIndex)
		for _, h := range db.current.sstables[t.id] {
			tm.SSTables++
			tm.Bytes += h.size
			tm.Partitions += h.props.Partitions
			tm.Cells += h.props.Cells
			tm.Tombstones += h.props.TombstoneCells + h.props.RangeTombstones + h.props.PartitionDeletions
			if db.compacting[h.fileNum] {
				tm.Compacting++
			}
			if t.def.Compaction == TimeWindow && t.def.WindowSeconds > 0 {
				w := timeWindow(h.props.MaxTimestamp, t.def.WindowSeconds)
				i, ok := windowIndex[w]
				if !ok {
					i = len(tm.Windows)
					windowIndex[w] = i
					tm.Windows = append(tm.Windows, WindowMetrics{Start: time.Unix(w*t.def.WindowSeconds, 0).UTC()})
				}
				tm.Windows[i].SSTables++
				tm.Windows[i].Bytes += h.size
			}
		}
		sort.Slice(tm.Windows, func(i, j int) bool { return tm.Windows[i].Start.After(tm.Windows[j].Start) })
		out.Tables = append(out.Tables, tm)
	}
	sort.Slice(out.Tables, func(i, j int) bool { return out.Tables[i].Name < out.Tables[j].Name })
	return out
}

// MemtableUsage returns Metrics' MemtableBytes and FrozenMemtables
// alone: what the memtables hold, and how many are frozen waiting for
// their flush. It costs a lock and a sum, where Metrics also lists the
// WAL directory and every table's SSTables.
func (db *DB) MemtableUsage() (bytes int64, frozen int) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.current == nil {
		return 0, 0
	}
	return db.memtableUsageLocked()
}

// MemtableUsageChange returns MemtableUsage's figures and a channel
// closed at the next event that may have shrunk them or that ends a wait
// for them: a new version (a flush dropped a frozen memtable, a
// compaction ended), a failure (Health), Close; after Close it is closed
// already. Taken under the same lock as the figures, the channel misses
// no such event after them, so a caller waiting for the memtables to
// shrink (the fan-out's wait for flushes) reads the figures again when
// it is closed, instead of polling. It may be closed by events that
// shrank nothing.
func (db *DB) MemtableUsageChange() (bytes int64, frozen int, changed <-chan struct{}) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		// Closed already: no event may come. A channel of its own, as
		// the background work still running broadcasts (and would close
		// db.memtableChanged again).
		closed := make(chan struct{})
		close(closed)
		changed = closed
	} else {
		if db.memtableChanged == nil {
			db.memtableChanged = make(chan struct{})
		}
		changed = db.memtableChanged
	}
	if db.current == nil {
		return 0, 0, changed
	}
	bytes, frozen = db.memtableUsageLocked()
	return bytes, frozen, changed
}

func (db *DB) memtableUsageLocked() (bytes int64, frozen int) {
	for _, mem := range db.current.memtables() {
		bytes += mem.SizeBytes()
	}
	return bytes, len(db.current.imms)
}

// walBytes sums the bytes the files in the WAL directory take: each file's
// size, or what the filesystem allocated to it when that is less, since
// new segments are preallocated sparse (SegmentTargetSize apparent, only the
// written part allocated). A reused segment (WALRecycleSegments) and the
// ones kept for reuse count every block an older generation wrote. A
// segment removed between the listing and its Stat is simply not counted.
func (db *DB) walBytes() int64 {
	names, err := db.opts.FS.List(db.walDir)
	if err != nil {
		return 0
	}
	var n int64
	for _, name := range names {
		if fi, err := db.opts.FS.Stat(filepath.Join(db.walDir, name)); err == nil && !fi.IsDir() {
			size := fi.Size()
			if alloc, ok := vfs.AllocatedSize(fi); ok && alloc < size {
				size = alloc
			}
			n += size
		}
	}
	return n
}

// String prints the snapshot as a table, one line per table, then totals.
func (m Metrics) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-24s %-12s %8s %12s %10s %12s %10s %10s\n", "table", "compaction", "sstables", "bytes", "partitions", "cells", "tombstones", "compacting")
	for _, t := range m.Tables {
		fmt.Fprintf(&b, "%-24s %-12s %8d %12d %10d %12d %10d %10d\n", t.Name, t.Compaction, t.SSTables, t.Bytes, t.Partitions, t.Cells, t.Tombstones, t.Compacting)
	}
	fmt.Fprintf(&b, "wal: %d bytes | memtables: %d bytes (%d mapped), %d frozen | block cache: %d of %d bytes (%d mapped) | batches %d, wal syncs %d (%s), %d segments reused | flushes %d | compactions %d (read %d, wrote %d bytes, purged %d tombstones, dropped %d expired sstables, paced %s) | stalls %d (%s) | reads %d (%d tombstones)\n",
		m.WALBytes, m.MemtableBytes, m.MemtableMappedBytes, m.FrozenMemtables, m.BlockCacheBytes, m.BlockCacheCapacity, m.BlockCacheMappedBytes, m.Batches, m.WALSyncs, m.WALSyncTime.Round(time.Millisecond), m.WALSegmentsReused, m.Flushes, m.Compactions, m.CompactionRead, m.CompactionWritten,
		m.PurgedTombstones, m.DroppedSSTables, m.CompactionPacedTime.Round(time.Millisecond), m.WriteStalls, m.WriteStallTime.Round(time.Millisecond), m.Reads, m.TombstonesRead)
	return b.String()
}
