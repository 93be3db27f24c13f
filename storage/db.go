package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventide/eventide/storage/internal/base"
	"github.com/eventide/eventide/storage/internal/memtable"
	"github.com/eventide/eventide/storage/internal/sstable"
	"github.com/eventide/eventide/storage/internal/wal"
	"github.com/eventide/eventide/storage/vfs"
)

// DB is an open store. All methods are safe for concurrent use.
type DB struct {
	dir     string
	walDir  string
	opts    Options
	log     *slog.Logger
	lock    io.Closer
	wal     *wal.Writer
	cache   *sstable.Cache
	metrics *metrics
	// recovery is what Open replayed and repaired; set before Open returns.
	recovery RecoveryInfo

	// commitMu is held shared by Apply from its WAL append to its
	// memtable insert, and exclusively by memtable rotation, so a batch's
	// WAL segment and memtable always agree.
	commitMu sync.RWMutex
	// memMu serialises memtable inserts (the memtable has one writer).
	memMu sync.Mutex
	// mutable is the memtable Apply writes to; it changes only under
	// commitMu held exclusively (it is also current.mem).
	mutable *memtable.Memtable
	// lastCounterMicros makes counter timestamps strictly increasing.
	lastCounterMicros atomic.Int64
	recordBufs        sync.Pool

	// manifestMu serialises manifest edits (flushes and compactions).
	manifestMu sync.Mutex

	mu          sync.Mutex
	cond        *sync.Cond // broadcast when a flush or compaction ends (broadcastLocked)
	closed      bool
	bgErr       error // a permanent failure: writes stop until restart
	tables      map[string]*tableState
	tablesByID  map[uint32]*tableState
	current     *version
	manifest    manifestData
	compacting  map[uint64]bool
	compactions int // running
	// memtableChanged is MemtableUsageChange's channel, closed and
	// cleared by broadcastLocked (mu); nil while nobody waits on it.
	memtableChanged chan struct{}
	// walReleasing counts flushes that have dropped their memtable from
	// the current version but not yet released its WAL segments
	// (flush): DB.Flush waits for them too, or a segment released after
	// its last DeleteRecycledSegments would stay kept for reuse.
	walReleasing int
	// afterFlushInstall, if set (tests only), runs in flush between
	// dropping the memtable from the current version and releasing its
	// WAL segments.
	afterFlushInstall func()
	// compactionThreadHook, if set (tests only), runs on a background
	// compaction's lowered-priority thread before its merge.
	compactionThreadHook func()

	// Transient failures (lack of space), under mu, reported by Health
	// until the next success of the same kind; walFailing is set with
	// walErr so that Apply clears it cheaply.
	walErr, flushErr, compactErr error
	compactRetries               int // mu: compactions failed in a row for lack of space
	// lastRewriteNanos is when (scheduling clock) the picker last chose
	// a closed window's S2-to-zstd rewrite, or Open's time (mu).
	lastRewriteNanos int64
	// rewriteRecheck is set while a timer is due to run the picker again
	// once the writes have been quiet for rewriteQuietPeriod (mu).
	rewriteRecheck bool
	// lastApplyNanos is when (scheduling clock) the last batch was
	// applied: the idle rewrite waits until writes have been quiet.
	lastApplyNanos atomic.Int64
	walFailing     atomic.Bool

	// pacer limits background compactions' output rate; nil without
	// Options.CompactionThroughput.
	pacer *compactionPacer
	// manualCompactions counts the DB.Compact calls under way: they turn
	// pacing off (compactionsBehind), as they wait for the background
	// compactions of their table.
	manualCompactions atomic.Int32

	flushSignal   chan struct{}
	compactSignal chan struct{}
	closing       chan struct{}
	bg            sync.WaitGroup
}

type tableState struct {
	id    uint32
	def   TableDef
	codec sstable.Compression
}

// ErrClosed is returned by operations on a closed DB.
var ErrClosed = errors.New("eventide/storage: database is closed")

// ErrUnknownTable is returned when a batch or query names a table that was
// never created.
var ErrUnknownTable = errors.New("eventide/storage: unknown table")

// Open opens (creating if needed) the store in dir and recovers it: it
// reads the manifest, opens the live SSTables, removes files a crash left
// behind and replays the WAL.
func Open(dir string, opts Options) (*DB, error) {
	opts.fillDefaults()
	fsys := opts.FS
	if err := mkdirAllDurable(fsys, filepath.Join(dir, walDirName)); err != nil {
		return nil, fmt.Errorf("cannot create data directory %s: %w", dir, err)
	}
	lock, err := fsys.Lock(filepath.Join(dir, lockFileName))
	if err != nil {
		return nil, fmt.Errorf("cannot lock %s (is another process using it?): %w", dir, err)
	}
	db := &DB{
		dir:           dir,
		walDir:        filepath.Join(dir, walDirName),
		opts:          opts,
		log:           opts.Logger,
		lock:          lock,
		tables:        map[string]*tableState{},
		tablesByID:    map[uint32]*tableState{},
		compacting:    map[uint64]bool{},
		flushSignal:   make(chan struct{}, 1),
		compactSignal: make(chan struct{}, 1),
		closing:       make(chan struct{}),
	}
	db.cond = sync.NewCond(&db.mu)
	if opts.CompactionThroughput > 0 {
		burst := int64(compactionBurstBytes)
		if opts.compactionBurstBytes != 0 {
			burst = max(opts.compactionBurstBytes, 0)
		}
		db.pacer = newCompactionPacer(opts.CompactionThroughput, burst)
	}
	db.lastRewriteNanos = opts.schedulingClock.Now().UnixNano()
	if opts.BlockCacheSize > 0 {
		db.cache = sstable.NewCache(opts.BlockCacheSize)
		if opts.PoisonReleasedBlocks {
			db.cache.PoisonReleased()
		}
	}
	db.metrics = newMetrics(db)
	if err := db.recover(); err != nil {
		lock.Close()
		return nil, err
	}
	if !opts.LazyBlockCacheMemory {
		db.cache.PrefaultNow() // see Options.LazyBlockCacheMemory
	}
	if opts.Registerer != nil {
		if err := db.metrics.register(opts.Registerer); err != nil {
			db.Close()
			return nil, err
		}
	}
	db.bg.Add(2)
	go db.flushLoop()
	go db.compactionLoop()
	db.maybeScheduleCompaction()
	return db, nil
}

// mkdirAllDurable creates dir and its missing parents and syncs the
// parent of each one it created, so that a power loss after the first
// acknowledged write cannot take the new store's directories (and every
// file in them) away: a created directory is an entry of its parent, as
// durable as any other only after its parent is synced.
func mkdirAllDurable(fsys vfs.FS, dir string) error {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := fsys.Stat(d); err == nil {
			break
		} else if !errors.Is(err, iofs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := fsys.SyncDir(filepath.Dir(missing[i])); err != nil {
			return fmt.Errorf("cannot sync directory %s after creating %s: %w", filepath.Dir(missing[i]), missing[i], err)
		}
	}
	return nil
}

func (db *DB) recover() error {
	start := time.Now()
	m, err := readManifest(db.opts.FS, db.dir)
	if err != nil {
		return err
	}
	if m == nil {
		if err := db.checkNewStore(); err != nil {
			return err
		}
		// The manifest is written before anything else, so from now on a
		// directory with data files and no manifest is always damage.
		m = &manifestData{NextFileNum: 1, MinUnflushedWAL: 1, NextTableID: 1}
		if err := writeManifest(db.opts.FS, db.dir, m); err != nil {
			return fmt.Errorf("cannot create store %s: %w", db.dir, err)
		}
	}
	db.manifest = *m
	for _, t := range m.Tables {
		def, codec, err := t.Def.withDefaults()
		if err != nil {
			return base.CorruptionErrorf("manifest table %d: %v", t.ID, err)
		}
		ts := &tableState{id: t.ID, def: def, codec: codec}
		db.tables[def.Name] = ts
		db.tablesByID[t.ID] = ts
	}
	live := map[uint64]bool{}
	ssts := map[uint32][]*sstHandle{}
	for _, s := range m.SSTables {
		if db.tablesByID[s.TableID] == nil {
			return base.CorruptionErrorf("manifest lists sstable %d of unknown table %d", s.FileNum, s.TableID)
		}
		h, err := db.openSSTable(s.FileNum, s.TableID)
		if err != nil {
			return err
		}
		live[s.FileNum] = true
		ssts[s.TableID] = append(ssts[s.TableID], h)
	}
	if err := db.removeOrphans(live); err != nil {
		return err
	}

	// Replay the WAL into a fresh memtable. Records are final (resolved
	// before they were logged) so replay reproduces the same cells.
	mem := memtable.NewAccounted(db.metrics.memtableMapped)
	res, err := wal.Replay(db.opts.FS, db.walDir, m.MinUnflushedWAL, func(segment uint64, offset int64, rec []byte) error {
		muts, err := decodeRecord(rec)
		if err != nil {
			return fmt.Errorf("wal segment %d offset %d: %w", segment, offset, err)
		}
		for i := range muts {
			if db.tablesByID[muts[i].tableID] == nil {
				return base.CorruptionErrorf("wal segment %d offset %d: mutation of unknown table %d", segment, offset, muts[i].tableID)
			}
			db.applyToMemtable(mem, &muts[i])
			if muts[i].op == opCell && muts[i].cell.Kind == base.KindCounter && muts[i].cell.Timestamp > db.lastCounterMicros.Load() {
				db.lastCounterMicros.Store(muts[i].cell.Timestamp)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cannot recover %s: %w", db.dir, err)
	}
	db.recovery = RecoveryInfo{WALRecords: res.Records, CutSegment: res.TruncatedSegment,
		CutOffset: res.TruncatedOffset, CutBytes: res.TruncatedBytes, CutReason: res.TruncatedReason}
	if res.TruncatedBytes > 0 {
		db.log.Warn("cut the torn tail of the last WAL segment: the end of the last group commit before a crash; "+
			"if it was acknowledged, it is lost (check the writer's checkpoint against its source)",
			"segment", res.TruncatedSegment, "offset", res.TruncatedOffset, "bytes", res.TruncatedBytes, "reason", res.TruncatedReason)
	}
	if res.Records == 0 && res.TruncatedBytes == 0 {
		db.removeEmptyWALSegments(res.Segments)
	}
	next := max(m.MinUnflushedWAL, res.LastSegment+1)
	w, err := wal.Open(db.walOptions(), next)
	if err != nil {
		return fmt.Errorf("cannot open wal: %w", err)
	}
	db.wal = w
	db.mutable = mem
	db.current = newVersion(mem, nil, ssts)
	db.log.Info("storage opened", "dir", db.dir, "tables", len(db.tables), "sstables", len(m.SSTables),
		"wal_records_replayed", res.Records, "took", time.Since(start))
	return nil
}

// removeEmptyWALSegments removes the replayed WAL segments when replay
// found no record in any of them: each Open starts a new segment, and
// without it every open and close without a write in between (a restart
// loop, a shard's store reopened at a handover) left one more empty
// segment, preallocated to WALSegmentSize, until the next flush. Nothing
// in them is needed. They go in ascending order, so a crash in between
// leaves the rest contiguous, as replay requires. A failure only leaves
// them for the next flush to release, and is logged.
func (db *DB) removeEmptyWALSegments(segments []uint64) {
	for _, num := range segments {
		path := filepath.Join(db.walDir, wal.SegmentFileName(num))
		if err := db.opts.FS.Remove(path); err != nil {
			db.log.Warn("cannot remove an empty wal segment", "segment", path, "err", err)
			return
		}
	}
	if len(segments) > 0 {
		if err := db.opts.FS.SyncDir(db.walDir); err != nil {
			db.log.Warn("cannot sync the wal directory after removing empty segments", "dir", db.walDir, "err", err)
		}
	}
}

func (db *DB) walOptions() wal.Options {
	mode := wal.SyncAlways
	if db.opts.WALSyncMode == WALPeriodic {
		mode = wal.SyncPeriodic
	}
	return wal.Options{
		FS: db.opts.FS, Dir: db.walDir, SegmentTargetSize: db.opts.WALSegmentSize,
		Mode: mode, SyncInterval: db.opts.WALSyncInterval, Logger: db.log,
		RecycleSegments: db.opts.WALRecycleSegments,
		OnSync:          func(records, bytes int, took time.Duration) { db.metrics.walSync(records, bytes, took) },
	}
}

// checkNewStore returns an error wrapping ErrMissingManifest when a
// directory without a manifest holds data: an SSTable, or a WAL segment
// that may hold records.
func (db *DB) checkNewStore() error {
	var found []string
	names, err := db.opts.FS.List(db.dir)
	if err != nil {
		return fmt.Errorf("cannot list %s: %w", db.dir, err)
	}
	for _, name := range names {
		if _, isSST := parseSSTableFileName(strings.TrimSuffix(name, tmpSuffix)); isSST {
			found = append(found, name)
		}
	}
	segs, err := wal.ListSegments(db.opts.FS, db.walDir)
	if err != nil {
		return err
	}
	for _, num := range segs {
		path := filepath.Join(db.walDir, wal.SegmentFileName(num))
		st, err := db.opts.FS.Stat(path)
		if err != nil {
			return fmt.Errorf("cannot stat wal segment %s: %w", path, err)
		}
		// Stores created before the manifest was written first may hold
		// an empty version 1 segment and no manifest.
		if st.Size() > wal.V1EmptySegmentSize {
			found = append(found, filepath.Join(walDirName, wal.SegmentFileName(num)))
		}
	}
	if len(found) == 0 {
		return nil
	}
	const shown = 10
	list := strings.Join(found[:min(len(found), shown)], ", ")
	if len(found) > shown {
		list += fmt.Sprintf(", ... (%d more)", len(found)-shown)
	}
	return fmt.Errorf("cannot open %s: %w: found %d data files (%s); refusing to open it as a new store, which would delete them",
		db.dir, ErrMissingManifest, len(found), list)
}

// removeOrphans deletes SSTables the manifest does not list (written by a
// flush or compaction that crashed before its manifest edit) and temporary
// files. It runs only with a manifest read from disk (recover refuses a
// directory whose manifest is missing), so it removes only files a manifest
// proves unreferenced.
func (db *DB) removeOrphans(live map[uint64]bool) error {
	names, err := db.opts.FS.List(db.dir)
	if err != nil {
		return fmt.Errorf("cannot list %s: %w", db.dir, err)
	}
	for _, name := range names {
		num, isSST := parseSSTableFileName(name)
		if (isSST && !live[num]) || strings.HasSuffix(name, tmpSuffix) {
			db.log.Info("removing orphan file", "file", name)
			if err := db.opts.FS.Remove(filepath.Join(db.dir, name)); err != nil {
				return fmt.Errorf("cannot remove orphan %s: %w", name, err)
			}
		}
	}
	return nil
}

func (db *DB) openSSTable(fileNum uint64, tableID uint32) (*sstHandle, error) {
	path := sstablePath(db.dir, fileNum)
	f, err := db.opts.FS.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open sstable %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot stat sstable %s: %w", path, err)
	}
	r, err := sstable.Open(f, path, fileNum, db.cache)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot open sstable %s: %w", path, err)
	}
	return &sstHandle{db: db, fileNum: fileNum, tableID: tableID, path: path, size: st.Size(), reader: r, props: r.Properties()}, nil
}

func (db *DB) releaseSSTable(h *sstHandle) {
	if err := h.reader.Close(); err != nil {
		db.log.Warn("cannot close sstable", "file", h.path, "err", err)
	}
	if h.obsolete.Load() {
		if err := db.opts.FS.Remove(h.path); err != nil {
			db.log.Warn("cannot remove obsolete sstable", "file", h.path, "err", err)
		}
	}
}

// CreateTable defines a table, or updates the definition of an existing
// one (options only: the name is the identity). It is durable when it
// returns.
func (db *DB) CreateTable(def TableDef) error {
	def, codec, err := def.withDefaults()
	if err != nil {
		return fmt.Errorf("cannot create table: %w", err)
	}
	db.manifestMu.Lock()
	defer db.manifestMu.Unlock()
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return ErrClosed
	}
	m := db.manifest
	m.Tables = append([]manifestTable(nil), m.Tables...)
	existing := db.tables[def.Name]
	var id uint32
	if existing != nil {
		id = existing.id
		for i := range m.Tables {
			if m.Tables[i].ID == id {
				m.Tables[i].Def = def
			}
		}
	} else {
		id = m.NextTableID
		m.NextTableID++
		m.Tables = append(m.Tables, manifestTable{ID: id, Def: def})
	}
	db.mu.Unlock()
	if err := writeManifest(db.opts.FS, db.dir, &m); err != nil {
		return fmt.Errorf("cannot create table %q: %w", def.Name, err)
	}
	db.mu.Lock()
	db.manifest.NextTableID = m.NextTableID
	db.manifest.Tables = m.Tables
	ts := &tableState{id: id, def: def, codec: codec}
	db.tables[def.Name] = ts
	db.tablesByID[id] = ts
	db.mu.Unlock()
	return nil
}

// Table returns a table's definition.
func (db *DB) Table(name string) (TableDef, bool) {
	db.mu.Lock()
	defer db.mu.Unlock()
	t, ok := db.tables[name]
	if !ok {
		return TableDef{}, false
	}
	return t.def, true
}

func (db *DB) lookupTableLocked(name string) (*tableState, error) {
	t, ok := db.tables[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownTable, name)
	}
	return t, nil
}

// NowMicros is the engine clock in microseconds, the timestamp to give a
// write that means "now".
func (db *DB) NowMicros() int64 { return db.opts.Clock.Now().UnixMicro() }

// Apply writes the batch atomically and durably (per the WAL sync mode).
// It stalls while flushes or compactions are too far behind; ctx bounds
// that wait: when ctx is done before the batch reaches the WAL (a stalled
// Apply returns as soon as it is), Apply writes nothing and returns an
// error wrapping ctx.Err(). A batch that reached the WAL is not
// interrupted (its write and fsync take no longer than any other).
// Readers may see the batch once its WAL record is written, while its
// fsync runs; when that fsync fails, Apply returns the error and the
// engine refuses every later write (Health: permanent) until a restart.
func (db *DB) Apply(ctx context.Context, b *Batch) error { return db.apply(ctx, b, true) }

// ApplyNoSync writes the batch like Apply, atomically and in order, but
// returns once its WAL record is written (write(2)), without waiting for
// an fsync, whatever the WAL sync mode; its cells are readable when it
// returns. The guarantee:
//   - Atomic: a crash loses the whole batch or nothing of it.
//   - Ordered: the batch is in the WAL after every batch whose Apply or
//     ApplyNoSync returned before it was called, and before every batch
//     applied after it returns, so a crash loses only a suffix of
//     unsynced batches, never this one while keeping a later one.
//   - Durable: once any Apply called after it returns (in WALSync mode),
//     or Flush or Close returns, or a memtable rotation starts a new WAL
//     segment; otherwise at the latest WALSyncInterval after its write,
//     when the WAL's flusher fsyncs what is left unsynced. Until then a
//     machine crash may lose it; a process crash does not.
//
// Use it only for writes that can be redone after a crash from state that
// is durable, such as a fan-out chunk whose cursor is in the same batch:
// never for a write that an acknowledgement (a stream ack, an HTTP
// response) depends on.
func (db *DB) ApplyNoSync(ctx context.Context, b *Batch) error { return db.apply(ctx, b, false) }

func (db *DB) apply(ctx context.Context, b *Batch, sync bool) error {
	if b.Len() == 0 {
		return nil
	}
	if err := db.waitForRoom(ctx); err != nil {
		return err
	}
	now := db.opts.Clock.Now()
	counterMicros := db.nextCounterMicros(now.UnixMicro())

	db.mu.Lock()
	err := b.resolve(db.lookupTableLocked, now.Unix(), counterMicros)
	db.mu.Unlock()
	if err != nil {
		return err
	}

	buf, _ := db.recordBufs.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	*buf = appendRecord((*buf)[:0], b.mutations)
	start := time.Now()

	// The batch goes into the memtable once its WAL record is written,
	// while the record's fsync runs (the group commit's flusher does it;
	// a single writer's write is done on this goroutine, see
	// wal.Writer.AppendStaged), and Apply returns when both are done: for
	// a single writer the memtable insert costs no time of its own (as in
	// Pebble's commit pipeline, readers may see a batch up to one fsync
	// before Apply returns). A failed write leaves nothing in the memtable
	// and may be retried; a failed fsync fails the WAL for good, and the
	// memtable holding the batch can then never be flushed (see below).
	db.commitMu.RLock()
	var waitDurable func() error
	if sync {
		waitDurable, err = db.wal.AppendStaged(*buf)
	} else {
		err = db.wal.AppendNoSync(*buf)
	}
	if err == nil {
		db.memMu.Lock()
		mem := db.mutable
		for i := range b.mutations {
			db.applyToMemtable(mem, &b.mutations[i])
		}
		db.memMu.Unlock()
		if waitDurable != nil {
			err = waitDurable()
		}
	}
	full := db.mutable.SizeBytes() >= db.opts.MemtableSize
	if err != nil {
		// Under commitMu: the background error is set before any
		// rotation could freeze a memtable holding a batch whose fsync
		// failed (a rotation needs the WAL, failed for good, anyway).
		db.walError("append", err)
	}
	db.commitMu.RUnlock()
	db.recordBufs.Put(buf)
	if err != nil {
		return fmt.Errorf("cannot apply batch: %w", err)
	}
	if db.walFailing.Load() && db.walFailing.CompareAndSwap(true, false) {
		db.clearTransientError(&db.walErr)
	}
	db.metrics.applied(b, time.Since(start))
	db.lastApplyNanos.Store(db.opts.schedulingClock.Now().UnixNano())
	if full {
		db.rotateMemtable(false)
	}
	return nil
}

func (db *DB) nextCounterMicros(now int64) int64 {
	for {
		last := db.lastCounterMicros.Load()
		next := max(now, last+1)
		if db.lastCounterMicros.CompareAndSwap(last, next) {
			return next
		}
	}
}

func (db *DB) applyToMemtable(mem *memtable.Memtable, m *mutation) {
	switch m.op {
	case opCell:
		mem.ApplyCell(m.tableID, m.partition, &m.cell)
	case opRangeTombstone:
		mem.ApplyRangeTombstone(m.tableID, m.partition, m.rangeTomb)
	case opPartitionDeletion:
		mem.ApplyPartitionDeletion(m.tableID, m.partition, m.deletion)
	}
}

// waitForRoom stalls a writer while too many memtables wait for a flush
// or a table has too many SSTables, so memory and read amplification stay
// bounded; the stall is counted and timed in the metrics. It gives up
// when ctx is done.
func (db *DB) waitForRoom(ctx context.Context) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	var stalledAt time.Time
	var stopWake func() bool
	defer func() {
		if stopWake != nil {
			stopWake()
		}
	}()
	for {
		if db.closed {
			return ErrClosed
		}
		if err := ctx.Err(); err != nil {
			if !stalledAt.IsZero() {
				db.metrics.stallEnded(time.Since(stalledAt))
			}
			return fmt.Errorf("cannot write: gave up waiting for room (%s): %w", db.stallReasonLocked(), err)
		}
		if db.bgErr != nil {
			return fmt.Errorf("cannot write: storage failed earlier: %w", db.bgErr)
		}
		reason := db.stallReasonLocked()
		if reason == "" {
			break
		}
		// Waiting could last until an operator frees space: fail now, so
		// the caller retries and Health says why.
		if reason == "memtable" && db.flushErr != nil {
			return fmt.Errorf("cannot write: memtables wait for a flush that is failing: %w", db.flushErr)
		}
		if reason == "sstables" && db.compactErr != nil {
			return fmt.Errorf("cannot write: sstables wait for a compaction that is failing: %w", db.compactErr)
		}
		if stalledAt.IsZero() {
			stalledAt = time.Now()
			db.metrics.stallStarted(reason)
			db.log.Debug("write stall", "reason", reason)
			// The wait is on a sync.Cond: wake it when ctx is done.
			stopWake = context.AfterFunc(ctx, func() {
				db.mu.Lock()
				db.broadcastLocked()
				db.mu.Unlock()
			})
		}
		db.cond.Wait()
	}
	if !stalledAt.IsZero() {
		db.metrics.stallEnded(time.Since(stalledAt))
	}
	return nil
}

func (db *DB) stallReasonLocked() string {
	if len(db.current.imms) >= db.opts.MaxImmutableMemtables {
		return "memtable"
	}
	if db.compactionBacklogLocked(db.opts.StallSSTablesPerTable) {
		return "sstables"
	}
	return ""
}

// rotateMemtable freezes the mutable memtable (if it is full, or if force
// and it is not empty), starts a new WAL segment for the new one and
// queues the frozen one for flushing.
func (db *DB) rotateMemtable(force bool) error {
	db.commitMu.Lock()
	defer db.commitMu.Unlock()
	mem := db.mutable
	if mem.Empty() || (!force && mem.SizeBytes() < db.opts.MemtableSize) {
		return nil
	}
	seg, err := db.wal.Rotate()
	if err != nil {
		// Transient unless the WAL failed for good: the memtable stays
		// mutable and the next Apply or Flush tries again.
		db.walError("rotate", err)
		return fmt.Errorf("cannot rotate wal: %w", err)
	}
	db.mutable = memtable.NewAccounted(db.metrics.memtableMapped)
	db.mu.Lock()
	old := db.current
	imms := append(append([]*immMemtable(nil), old.imms...), &immMemtable{mem: mem, walSegmentAfter: seg})
	replaced := db.installVersionLocked(newVersion(db.mutable, imms, old.cloneSSTables()))
	db.mu.Unlock()
	replaced.unref()
	select {
	case db.flushSignal <- struct{}{}:
	default:
	}
	return nil
}

// installVersionLocked makes v current and returns the version it
// replaced, whose reference the caller must drop with unref once it has
// unlocked db.mu. Dropping the last reference closes, and for compaction
// inputs deletes, the SSTables only that version held: file I/O that,
// done under db.mu, stalled every read (Slice) and write (Apply) queued
// on it, with a convoy of waiters behind it (issue 12).
func (db *DB) installVersionLocked(v *version) (replaced *version) {
	old := db.current
	db.current = v
	db.broadcastLocked()
	return old
}

// acquireVersion returns the current version with a reference the caller
// must drop with unref.
func (db *DB) acquireVersion() *version {
	db.mu.Lock()
	defer db.mu.Unlock()
	v := db.current
	v.ref()
	return v
}

// broadcastLocked wakes every waiter on db.cond and on the channel
// MemtableUsageChange handed out. db.mu must be held.
func (db *DB) broadcastLocked() {
	db.cond.Broadcast()
	if db.memtableChanged != nil {
		close(db.memtableChanged)
		db.memtableChanged = nil
	}
}

func (db *DB) setBackgroundError(err error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.bgErr == nil {
		db.bgErr = err
		db.log.Error("storage failed; writes are refused until restart", "err", err)
	}
	db.broadcastLocked()
}

// Flush freezes the mutable memtable and waits until every frozen memtable
// is written to SSTables.
//
// It also empties the WAL of space: the flushed segments kept for reuse
// (Options.WALRecycleSegments) are deleted before the memtable's rotation,
// which then starts a new sparse segment instead of reusing one, and again
// once the flushes have released theirs. Reuse serves sustained writes,
// whose memtables the automatic flushes rotate; after an explicit Flush (a
// snapshot, a shutdown) the store takes the space of its SSTables and a
// near-empty segment.
func (db *DB) Flush() error {
	if err := db.wal.DeleteRecycledSegments(); err != nil {
		db.log.Warn("cannot delete kept wal segments", "err", err)
	}
	if err := db.rotateMemtable(true); err != nil {
		return err
	}
	db.mu.Lock()
	for (len(db.current.imms) > 0 || db.walReleasing > 0) && db.bgErr == nil && db.flushErr == nil && !db.closed {
		db.cond.Wait()
	}
	err := db.bgErr
	switch {
	case err != nil:
	case db.flushErr != nil:
		err = fmt.Errorf("cannot flush (retrying in the background): %w", db.flushErr)
	case db.closed:
		err = ErrClosed
	}
	db.mu.Unlock()
	if err != nil {
		return err
	}
	if err := db.wal.DeleteRecycledSegments(); err != nil {
		db.log.Warn("cannot delete kept wal segments", "err", err)
	}
	return nil
}

// Close flushes nothing (the WAL makes unflushed writes durable), waits for
// background work, syncs the WAL and closes every file.
func (db *DB) Close() error {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return ErrClosed
	}
	db.closed = true
	db.broadcastLocked()
	db.mu.Unlock()
	close(db.closing)
	db.bg.Wait()

	var errs []error
	db.commitMu.Lock()
	if db.wal != nil {
		if err := db.wal.Close(); err != nil {
			errs = append(errs, fmt.Errorf("cannot close wal: %w", err))
		}
	}
	db.commitMu.Unlock()
	db.mu.Lock()
	if db.current != nil {
		db.current.unref()
		db.current = nil
	}
	db.mu.Unlock()
	// The block cache's prefaulted memory no block took goes back now,
	// not when a collection finds the cache unreachable.
	db.cache.ReleaseReserve()
	if db.opts.Registerer != nil {
		db.metrics.unregister(db.opts.Registerer)
	}
	if err := db.lock.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
