package storage

import (
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventide/eventide/storage/internal/sstable"
	"github.com/eventide/eventide/storage/vfs"
)

// Clock tells the engine the time; inject a fake one to make TTL and
// gc_grace deterministic in tests.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// SystemClock is the wall clock.
var SystemClock Clock = systemClock{}

// WALSyncMode says when an applied batch is durable.
type WALSyncMode uint8

const (
	// WALSync fsyncs before Apply returns (group commit shares one fsync
	// among concurrent batches). The default.
	WALSync WALSyncMode = iota
	// WALPeriodic returns after the write(2) and fsyncs every
	// WALSyncInterval: a crash may lose the last interval.
	WALPeriodic
)

// Options configure a DB. Start from DefaultOptions.
type Options struct {
	// Logger receives operational messages (flushes, compactions,
	// recovery). Defaults to a discarding logger.
	Logger *slog.Logger
	// Registerer receives the engine's Prometheus metrics; nil registers
	// nothing (Metrics still works).
	Registerer prometheus.Registerer
	// Clock is the source of "now" for TTL expiry, deletion times, counter
	// timestamps and gc_grace. Defaults to SystemClock.
	Clock Clock
	// FS is the filesystem. Defaults to vfs.Default.
	FS vfs.FS

	WALSyncMode WALSyncMode
	// WALSyncInterval is the period of the background fsync in
	// WALPeriodic mode and, in WALSync mode, how long after its write a
	// batch applied with ApplyNoSync waits at most for an fsync when no
	// synced write comes first. Default 100ms.
	WALSyncInterval time.Duration
	// WALSegmentSize is the size at which a WAL segment is rotated.
	WALSegmentSize int64
	// WALRecycleSegments is how many flushed WAL segments are kept, instead
	// of deleted, to be reused as the next segments (RocksDB's
	// recycle_log_file_num): a reused segment's blocks are already
	// allocated and written, so a group commit's fdatasync writes its data
	// and no block allocation. They cost their written size on disk while
	// the store is open; Close deletes them. 0 means 1; negative keeps
	// none.
	WALRecycleSegments int

	// MemtableSize is the estimated size at which the mutable memtable is
	// frozen and queued for flushing. The memtables' arena, mapped
	// outside the Go heap, peaks at about MemtableSize x (1 +
	// MaxImmutableMemtables) while flushes lag behind the writes.
	// Default 16 MiB: 32 MiB ingested no faster in loadtest/peers and
	// cost 24-32 MiB more resident memory under write load
	// (BENCHMARKS.md, session 9 end).
	MemtableSize int64
	// MaxImmutableMemtables is how many frozen memtables may wait for a
	// flush before writers stall.
	MaxImmutableMemtables int
	// StallSSTablesPerTable is how many SSTables one table may have before
	// writers stall until compaction catches up. A TimeWindow table's
	// closed windows' first SSTables, which no compaction merges, do not
	// count (compactionBacklogLocked).
	StallSSTablesPerTable int
	// BlockCacheSize bounds the cache of decompressed SSTable blocks.
	// Decoded range tombstones of partitions with many of them are kept
	// besides, up to a quarter of it.
	BlockCacheSize int64
	// LazyBlockCacheMemory maps and faults in the block cache's memory as
	// blocks fill it, a buffer at a time. By default (false), on Linux,
	// Open maps BlockCacheSize bytes outside the Go heap and faults them
	// in at once (transparent huge pages where the system allows them on
	// request; 2-7 ms per 32 MiB on the loaded 2-core test VM, up to
	// 41 ms when the kernel compacts memory for the huge pages), so that
	// cold reads decode their blocks into resident memory. (Done at the
	// first block instead, as first built, that one read paid it: the
	// first probe reads of a freshly started all-in-one, and a one-read
	// benchmark, took those milliseconds.) Without it, while the cache filled after a restart, each
	// cold read of loadtest/peers' 90%-expired partitions took 3.8 page
	// faults, about 9 of its ~24 µs there, and the phase's p99 was
	// 0.12-0.15x Pebble's, whose cache lives in Go heap memory that
	// ingest left resident; with it, 0.0 faults and a cold p50 of 13-15
	// µs (BENCHMARKS.md, session s13-expired). The cost is resident
	// memory: the cache's full size from Open on instead of as it fills. What no block has used yet is unmapped by Close, and
	// a process holds at most 256 MiB of such memory across its stores
	// (a store opened when that is spent prefaults what is left, or
	// nothing if under 1 MiB; a cache under 1 MiB is never prefaulted).
	// Set it for stores whose cache stays mostly empty (write-
	// only nodes, tests that open many stores) or whose BlockCacheSize
	// is far above the memory the process should hold before its reads
	// need it.
	LazyBlockCacheMemory bool
	// BlockSize is the target uncompressed size of an SSTable data block;
	// 0 means 32 KiB, or 16 KiB with SSTableDictionary.
	BlockSize int
	// SSTableDictionary compresses the data blocks of every zstd SSTable
	// against a dictionary cut from the file's first 32 KiB of blocks
	// (format version 5; storage/FORMAT.md "Dictionary"), in 16 KiB blocks
	// unless BlockSize says otherwise. A cold read of a few rows then
	// decodes less: on loadtest/peers' 500,000 events the 10% window
	// slice's p50 went from 44 to 33 µs. It costs density: 39.0 against
	// 34.0 bytes/event there, 38.2 against 32.9 at 2,000,000 events, where
	// the window slice gained nothing measurable (BENCHMARKS.md, session
	// 8). Off by default. Files written either way open either way.
	SSTableDictionary bool
	// CompactionConcurrency bounds how many compactions run at once.
	CompactionConcurrency int
	// CompactionThroughput limits the bytes per second that background
	// compactions write, all together (Cassandra's compaction_throughput):
	// a compaction waits between two 256 KiB chunks of its output, holding
	// no lock, so a large merge is spread over time instead of taking a
	// whole core while the writer and the reads need it. 2 MiB pass at
	// once after an idle time, so small merges are not slowed; a table
	// holding half of StallSSTablesPerTable SSTables or more turns pacing
	// off until compactions have caught up; Close cuts a wait short;
	// DB.Compact and CompactAll are never paced. 0 (the default) means
	// unlimited. See compaction_pacer.go and BENCHMARKS.md (s12-throttle).
	CompactionThroughput int64
	// CompactionNice, on Linux, runs each background compaction's merge on
	// an OS thread of its own whose nice value is raised by this much (at
	// most to 19), so that the kernel serves the process's foreground work
	// (writes, reads, an embedded NATS server) first and the compaction
	// with what they leave. The outputs are still installed at normal
	// priority. 0 (the default) leaves compactions at the process's
	// priority; elsewhere than Linux it has no effect. A process using it
	// should have a spare P (GOMAXPROCS above its CPUs): a Go P held by a
	// thread the kernel has set aside is lost to the other goroutines
	// meanwhile. See compaction_priority.go.
	CompactionNice int
	// DisableAutoCompaction stops compactions from starting by themselves;
	// DB.Compact and DB.CompactAll still work. For tests and benchmarks.
	DisableAutoCompaction bool
	// PoisonReleasedBlocks overwrites (with 0xdb bytes) every cached
	// SSTable block whose last reader lets go, before the block's buffers
	// are reused. A row's bytes are valid until the iterator's next Next or
	// Close; a caller that keeps them longer silently reads whatever the
	// next block read puts there, usually the right bytes by chance. With
	// this on it reads garbage at once, so tests catch it. It costs a
	// memset per released block: for tests and debugging, not production.
	PoisonReleasedBlocks bool

	// dictionarySampleSize is the SSTable writer's DictionarySampleSize
	// (0: its default, 32 KiB), for tests whose files are too small for
	// a dictionary (the metamorphic test).
	dictionarySampleSize int
	// compactionBurstBytes replaces compactionBurstBytes (the bytes a
	// paced compaction writes at once after an idle time) when above 0,
	// and makes it 0 when negative, for tests.
	compactionBurstBytes int64
	// schedulingClock times background work that is about the machine,
	// not the data: how long writes have been quiet, how often a busy
	// engine may rewrite a window (compaction_rewrite.go). It is the
	// wall clock (SystemClock) but in tests; Clock, the data's time, may
	// run far ahead of it (a replay, a benchmark's clock).
	schedulingClock Clock
}

// DefaultOptions returns the defaults.
func DefaultOptions() Options {
	return Options{
		Clock:                 SystemClock,
		FS:                    vfs.Default,
		WALSyncMode:           WALSync,
		WALSyncInterval:       100 * time.Millisecond,
		WALSegmentSize:        64 << 20,
		WALRecycleSegments:    1,
		MemtableSize:          16 << 20,
		MaxImmutableMemtables: 2,
		StallSSTablesPerTable: 48,
		BlockCacheSize:        32 << 20,
		CompactionConcurrency: 1,
	}
}

func (o *Options) fillDefaults() {
	d := DefaultOptions()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = d.Clock
	}
	if o.FS == nil {
		o.FS = d.FS
	}
	if o.schedulingClock == nil {
		o.schedulingClock = SystemClock
	}
	if o.WALSyncInterval <= 0 {
		o.WALSyncInterval = d.WALSyncInterval
	}
	if o.WALSegmentSize <= 0 {
		o.WALSegmentSize = d.WALSegmentSize
	}
	if o.WALRecycleSegments == 0 {
		o.WALRecycleSegments = d.WALRecycleSegments
	} else if o.WALRecycleSegments < 0 {
		o.WALRecycleSegments = 0
	}
	if o.MemtableSize <= 0 {
		o.MemtableSize = d.MemtableSize
	}
	if o.MaxImmutableMemtables <= 0 {
		o.MaxImmutableMemtables = d.MaxImmutableMemtables
	}
	if o.StallSSTablesPerTable <= 0 {
		o.StallSSTablesPerTable = d.StallSSTablesPerTable
	}
	if o.BlockCacheSize < 0 {
		o.BlockCacheSize = 0
	} else if o.BlockCacheSize == 0 {
		o.BlockCacheSize = d.BlockCacheSize
	}
	if o.CompactionConcurrency <= 0 {
		o.CompactionConcurrency = d.CompactionConcurrency
	}
}

// CompactionStrategy chooses how a table's SSTables are merged.
type CompactionStrategy string

const (
	// SizeTiered merges SSTables of similar size (Cassandra's STCS).
	SizeTiered CompactionStrategy = "size_tiered"
	// TimeWindow groups SSTables into windows of their newest write time,
	// size-tiered inside the active window, one SSTable per closed window,
	// and drops fully expired SSTables whole (Cassandra's TWCS). For TTL'd
	// time series. Deletions are reclaimed by tombstone compactions that
	// take the older windows' SSTables in and write one SSTable per
	// window, so windows are never merged.
	TimeWindow CompactionStrategy = "time_window"
)

// DefaultGCGraceSeconds is Cassandra's default gc_grace_seconds: 10 days.
const DefaultGCGraceSeconds = 10 * 24 * 3600

// TableDef describes a table to the engine.
type TableDef struct {
	// Name: 1..64 of [a-z0-9_]; names starting with "_" are reserved for
	// the engine and Eventide's own bookkeeping.
	Name       string             `json:"name"`
	Compaction CompactionStrategy `json:"compaction"`
	// WindowSeconds is the TimeWindow window (default 3600).
	WindowSeconds int64 `json:"window_seconds,omitempty"`
	// DefaultTTLSeconds makes every Put expire after it; 0 means none.
	DefaultTTLSeconds int32 `json:"default_ttl_seconds,omitempty"`
	// GCGraceSeconds is how long tombstones are kept before compaction
	// may purge them. Nil means DefaultGCGraceSeconds; 0 is allowed.
	GCGraceSeconds *int64 `json:"gc_grace_seconds,omitempty"`
	// Compression is "zstd" (default), "s2" or "none". A zstd table's
	// short-lived SSTables (flushes, compactions inside a time window's
	// active window) are written with s2, which costs far less CPU; every
	// other compaction writes zstd (see sstableLife in flush.go); a closed
	// time window left with one S2 SSTable is rewritten as zstd when the
	// engine is idle, or rate-limited when it never is
	// (compaction_rewrite.go).
	Compression string `json:"compression,omitempty"`
	// Counters makes a counter table: cells are AddCounter deltas.
	Counters bool `json:"counters,omitempty"`
	// MinThreshold and MaxThreshold bound how many similar-size SSTables
	// a size-tiered compaction merges (defaults 4 and 32).
	MinThreshold int `json:"min_threshold,omitempty"`
	MaxThreshold int `json:"max_threshold,omitempty"`
	// TombstoneGC is when a tombstone may be purged (ScyllaDB's
	// tombstone_gc modes): TombstoneGCTimeout (the default) once older
	// than gc_grace; TombstoneGCImmediate as soon as compaction holds
	// every SSTable that may hold older data for its partition, for
	// tables whose write timestamps follow the stream order (see
	// TombstoneGCImmediate). Either way only when nothing older outside
	// the compaction, nor in a memtable, may hold the partition.
	TombstoneGC TombstoneGCMode `json:"tombstone_gc,omitempty"`
	// TombstoneThreshold is the estimated share of an SSTable's cells and
	// deletions that a compaction could purge (droppable tombstones and
	// expired cells) from which the SSTable is compacted on its own with
	// the SSTables that overlap it (Cassandra's tombstone_threshold);
	// default 0.2, negative turns such compactions off.
	TombstoneThreshold float64 `json:"tombstone_threshold,omitempty"`
	// TombstoneCompactionIntervalSeconds is how old an SSTable must be
	// before a tombstone compaction may pick it (Cassandra's
	// tombstone_compaction_interval), so that a file whose tombstones
	// could not be purged after all (something older still overlaps) is
	// not rewritten over and over. Nil means 86400 (a day); 0 is allowed.
	TombstoneCompactionIntervalSeconds *int64 `json:"tombstone_compaction_interval_seconds,omitempty"`
}

// TombstoneGCMode says when a table's tombstones may be purged.
type TombstoneGCMode string

const (
	// TombstoneGCTimeout purges a tombstone once it is older than the
	// table's gc_grace: a write with an older timestamp may arrive until
	// then (in Cassandra, from a replica that missed the delete; here, a
	// producer's clock or a replay), and the tombstone must still be
	// there to shadow it.
	TombstoneGCTimeout TombstoneGCMode = "timeout"
	// TombstoneGCImmediate purges a tombstone as soon as the compaction
	// that meets it holds every SSTable that may hold older data for its
	// partition. It is right only for a table whose write timestamps
	// follow a total order that every later write respects (such as a
	// stream's sequence), so that no write older than a deletion can
	// arrive after it: then nothing the purged tombstone shadowed can come
	// back. docs/ARCHITECTURE.md says which tables qualify.
	TombstoneGCImmediate TombstoneGCMode = "immediate"
)

// Defaults of the tombstone compaction settings (Cassandra's).
const (
	DefaultTombstoneThreshold                 = 0.2
	DefaultTombstoneCompactionIntervalSeconds = 24 * 3600
)

var tableNamePattern = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

// gcGraceSeconds returns the effective gc_grace.
func (d *TableDef) gcGraceSeconds() int64 {
	if d.GCGraceSeconds == nil {
		return DefaultGCGraceSeconds
	}
	return *d.GCGraceSeconds
}

// gcBefore is the unix second before which a tombstone (or an expired
// cell's write time) must lie to be purged at nowSeconds. In immediate
// mode it is nowSeconds + 1: every tombstone written up to now qualifies,
// and an expiring cell qualifies once expired (its expiry <= now, as
// IsLive says), which keeps "MaxLocalDeletionTime < gcBefore" meaning
// "everything in the file is dead" for the fully expired check.
func (d *TableDef) gcBefore(nowSeconds int64) int64 {
	if d.TombstoneGC == TombstoneGCImmediate {
		return nowSeconds + 1
	}
	return nowSeconds - d.gcGraceSeconds()
}

func (d *TableDef) tombstoneThreshold() float64 {
	if d.TombstoneThreshold == 0 {
		return DefaultTombstoneThreshold
	}
	return d.TombstoneThreshold
}

func (d *TableDef) tombstoneCompactionIntervalSeconds() int64 {
	if d.TombstoneCompactionIntervalSeconds == nil {
		return DefaultTombstoneCompactionIntervalSeconds
	}
	return *d.TombstoneCompactionIntervalSeconds
}

// withDefaults validates d and fills its defaults.
func (d TableDef) withDefaults() (TableDef, sstable.Compression, error) {
	if !tableNamePattern.MatchString(d.Name) {
		return d, 0, fmt.Errorf("invalid table name %q: use 1 to 64 of a-z, 0-9 and _", d.Name)
	}
	if d.Compaction == "" {
		d.Compaction = SizeTiered
	}
	if d.Compaction != SizeTiered && d.Compaction != TimeWindow {
		return d, 0, fmt.Errorf("table %q: unknown compaction strategy %q (use %q or %q)", d.Name, d.Compaction, SizeTiered, TimeWindow)
	}
	if d.WindowSeconds == 0 {
		d.WindowSeconds = 3600
	}
	if d.WindowSeconds < 0 {
		return d, 0, fmt.Errorf("table %q: negative window_seconds %d", d.Name, d.WindowSeconds)
	}
	if d.DefaultTTLSeconds < 0 {
		return d, 0, fmt.Errorf("table %q: negative default TTL %d", d.Name, d.DefaultTTLSeconds)
	}
	if d.GCGraceSeconds != nil && *d.GCGraceSeconds < 0 {
		return d, 0, fmt.Errorf("table %q: negative gc_grace_seconds %d", d.Name, *d.GCGraceSeconds)
	}
	if d.Compression == "" {
		d.Compression = "zstd"
	}
	codec, err := sstable.ParseCompression(d.Compression)
	if err != nil {
		return d, 0, fmt.Errorf("table %q: %w", d.Name, err)
	}
	if d.MinThreshold == 0 {
		d.MinThreshold = 4
	}
	if d.MaxThreshold == 0 {
		d.MaxThreshold = 32
	}
	if d.MinThreshold < 2 || d.MaxThreshold < d.MinThreshold {
		return d, 0, fmt.Errorf("table %q: thresholds min %d max %d: want 2 <= min <= max", d.Name, d.MinThreshold, d.MaxThreshold)
	}
	if d.TombstoneGC == "" {
		d.TombstoneGC = TombstoneGCTimeout
	}
	if d.TombstoneGC != TombstoneGCTimeout && d.TombstoneGC != TombstoneGCImmediate {
		return d, 0, fmt.Errorf("table %q: unknown tombstone_gc %q (use %q or %q)", d.Name, d.TombstoneGC, TombstoneGCTimeout, TombstoneGCImmediate)
	}
	if d.TombstoneThreshold > 1 {
		return d, 0, fmt.Errorf("table %q: tombstone_threshold %v: want at most 1 (negative turns tombstone compactions off)", d.Name, d.TombstoneThreshold)
	}
	if d.TombstoneCompactionIntervalSeconds != nil && *d.TombstoneCompactionIntervalSeconds < 0 {
		return d, 0, fmt.Errorf("table %q: negative tombstone_compaction_interval_seconds %d", d.Name, *d.TombstoneCompactionIntervalSeconds)
	}
	return d, codec, nil
}
