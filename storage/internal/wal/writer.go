package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventide/eventide/storage/vfs"
)

// SyncMode says when Append returns relative to fsync.
type SyncMode uint8

const (
	// SyncAlways: Append returns only after its record is fsynced. The
	// default, and what lets the pipeline acknowledge a batch once Append
	// returns.
	SyncAlways SyncMode = iota
	// SyncPeriodic: Append returns once its record is written to the file
	// (write(2)); a background fsync runs every Options.SyncInterval, so a
	// machine crash may lose the last interval of records (a process crash
	// loses nothing written).
	SyncPeriodic
)

func (m SyncMode) String() string {
	switch m {
	case SyncAlways:
		return "always"
	case SyncPeriodic:
		return "periodic"
	default:
		return fmt.Sprintf("SyncMode(%d)", uint8(m))
	}
}

// Defaults for zero Options fields.
const (
	DefaultSegmentTargetSize = 64 << 20
	DefaultSyncInterval      = 100 * time.Millisecond
)

// Options configure a Writer.
type Options struct {
	// FS is the filesystem; required.
	FS vfs.FS
	// Dir is the WAL directory; required, and it must exist.
	Dir string
	// SegmentTargetSize: each new segment is preallocated to this size
	// (a sparse file of zeros past the header, its size fsynced before any
	// record), and after a write leaves the current segment at or above
	// it, the writer rotates to the next segment. A record is never split,
	// so a segment can exceed it. Default DefaultSegmentTargetSize.
	SegmentTargetSize int64
	// Mode is the sync mode; default SyncAlways.
	Mode SyncMode
	// SyncInterval is the background fsync period in SyncPeriodic mode.
	// Default DefaultSyncInterval.
	SyncInterval time.Duration
	// Logger receives rotation and failure messages; nil discards them.
	Logger *slog.Logger
	// OnSync, if set, is called after each fsync of records with how many
	// records and bytes it made durable and how long it took. In SyncAlways
	// mode it runs before the Appends it covers return. It runs with the
	// writer's I/O lock held: keep it quick and do not call the Writer.
	OnSync func(records int, bytes int, took time.Duration)
	// RecycleSegments is how many segments released by
	// ReleaseSegmentsBefore the Writer keeps, instead of deleting them, to
	// reuse as its next segments (RocksDB's recycle_log_file_num): their
	// blocks are already allocated and written, so a group commit's
	// fdatasync writes data only. Zero keeps none: every segment is a new
	// sparse file. Kept segments are deleted by Close.
	RecycleSegments int

	// format is the segment format version written; zero means
	// formatVersion. Tests set formatVersion2 to write old segments.
	format byte
}

func (o Options) withDefaults() (Options, error) {
	if o.FS == nil {
		return o, errors.New("cannot open wal: Options.FS is nil")
	}
	if o.Dir == "" {
		return o, errors.New("cannot open wal: Options.Dir is empty")
	}
	if o.Mode != SyncAlways && o.Mode != SyncPeriodic {
		return o, fmt.Errorf("cannot open wal: unknown sync mode %v", o.Mode)
	}
	if o.SegmentTargetSize <= 0 {
		o.SegmentTargetSize = DefaultSegmentTargetSize
	}
	if o.SyncInterval <= 0 {
		o.SyncInterval = DefaultSyncInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.RecycleSegments < 0 {
		o.RecycleSegments = 0
	}
	switch o.format {
	case 0:
		o.format = formatVersion
	case formatVersion2:
		o.RecycleSegments = 0 // stale bytes after the records are corruption in version 2
	case formatVersion3:
	default:
		return o, fmt.Errorf("cannot open wal: cannot write format version %d", o.format)
	}
	return o, nil
}

// ErrClosed is returned by Writer methods called after Close.
var ErrClosed = errors.New("wal: writer is closed")

// maxRetainedBufferSize bounds the batch buffer kept for reuse, so one huge
// record does not pin its memory for the life of the writer.
const maxRetainedBufferSize = 4 << 20

// batch is the group of records that one write (and, in SyncAlways mode, one
// fsync) makes durable together.
type batch struct {
	buf     []byte // encoded records
	records int
	// syncWaiters counts the records appended by Append (not
	// AppendNoSync): in SyncAlways mode the batch is fsynced only if it
	// is not zero.
	syncWaiters int
	written     chan struct{} // closed once writeErr is set and the batch is written
	writeErr    error
	done        chan struct{} // closed once err is set and the batch is written (and synced)
	err         error
}

func newBatch(buf []byte) *batch {
	return &batch{buf: buf, written: make(chan struct{}), done: make(chan struct{})}
}

// Writer appends records to the WAL with group commit. All methods are safe
// for concurrent use.
//
// Appends copy their record into the pending batch and wait. One flusher
// goroutine takes the whole pending batch, writes it with one write and, in
// SyncAlways mode, one fsync, then wakes every waiter of that batch; records
// that arrive meanwhile form the next batch. AppendStaged (SyncAlways mode),
// when its record is alone and no fsync runs, writes it itself and leaves
// only the fsync to the flusher. Rotate, Sync and Close do their I/O under the same
// lock as the flusher, so file operations never interleave.
type Writer struct {
	opts Options
	log  *slog.Logger

	// wake holds at most one signal. An Append sends it (without blocking)
	// after adding to the pending batch, and the flusher receives it before
	// taking the batch, so a record added after the flusher took a batch
	// always leaves a signal behind.
	wake        chan struct{}
	quit        chan struct{}
	flusherDone chan struct{}

	// segment mirrors seg so CurrentSegment needs no lock.
	segment atomic.Uint64

	mu      sync.Mutex
	pending *batch // mu: records waiting for the flusher
	spare   []byte // mu: the previous batch's buffer, for reuse
	failed  error  // mu: the first write, sync or rotation error; sticky
	closed  bool   // mu

	ioMu            sync.Mutex
	f               vfs.File // ioMu: current segment; nil after Close
	seg             uint64   // ioMu
	segKey          uint32   // ioMu: segmentKey(seg), for version 3 records
	segSize         int64    // ioMu
	unsyncedRecords int      // ioMu: written since the last fsync
	unsyncedBytes   int      // ioMu
	// awaitingSync are the written batches whose Appends wait for the
	// next fsync (SyncAlways mode); syncLocked releases them.
	awaitingSync []*batch // ioMu
	// syncing is set while an fsync of records runs.
	syncing atomic.Bool

	// recycleMu guards recycle, the numbers of released segments kept
	// under their old names for reuse, oldest first. Rotation takes it
	// inside ioMu; ReleaseSegmentsBefore holds it while it decides, so a
	// segment is never both reused and deleted.
	recycleMu sync.Mutex
	recycle   []uint64
	reused    atomic.Int64 // segments created by reusing a kept one
}

// Open creates segment firstSegment, which must not exist, syncs it and the
// directory, and returns a Writer appending to it. Segment numbers start at
// 1. Replay the existing log before opening, and open a number above every
// existing segment, so that records stay in order across segments.
func Open(opts Options, firstSegment uint64) (*Writer, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if firstSegment == 0 {
		return nil, errors.New("cannot open wal: segment numbers start at 1")
	}
	w := &Writer{
		opts:        opts,
		log:         opts.Logger,
		wake:        make(chan struct{}, 1),
		quit:        make(chan struct{}),
		flusherDone: make(chan struct{}),
		pending:     newBatch(nil),
	}
	f, _, err := w.createSegment(firstSegment)
	if err != nil {
		return nil, fmt.Errorf("cannot open wal: %w", err)
	}
	w.setSegmentLocked(f, firstSegment)
	go w.flushLoop()
	return w, nil
}

// createSegment creates segment num with its header, preallocated to the
// target size, durably: the file (with its size) is synced before the
// directory so that a segment name never survives a crash without its
// header, except when the crash hits before the first sync, which Replay
// handles as an interrupted creation (nothing past the header). On error
// the file is removed again, so that a later attempt can create it; the
// error is permanent when that removal, or an fsync, failed.
func (w *Writer) createSegment(num uint64) (f vfs.File, permanent bool, err error) {
	fs, path := w.opts.FS, segmentPath(w.opts.Dir, num)
	if _, err := fs.Stat(path); err == nil {
		return nil, true, fmt.Errorf("cannot create wal segment %s: it already exists", path)
	} else if !errors.Is(err, iofs.ErrNotExist) {
		return nil, false, fmt.Errorf("cannot create wal segment %s: %w", path, err)
	}
	f, err = fs.Create(path)
	if err != nil {
		return nil, false, fmt.Errorf("cannot create wal segment %s: %w", path, err)
	}
	prealloc := min(max(w.opts.SegmentTargetSize, segmentHeaderSize), maxPreallocSize)
	fail := func(permanent bool, err error) (vfs.File, bool, error) {
		f.Close()
		if rerr := fs.Remove(path); rerr != nil {
			return nil, true, errors.Join(err, fmt.Errorf("cannot remove incomplete wal segment %s: %w", path, rerr))
		}
		return nil, permanent, err
	}
	if _, err := f.Write(appendSegmentHeaderVersion(nil, w.opts.format, num, prealloc)); err != nil {
		return fail(false, fmt.Errorf("cannot write header of wal segment %s: %w", path, err))
	}
	if err := f.Truncate(prealloc); err != nil {
		return fail(false, fmt.Errorf("cannot preallocate wal segment %s to %d bytes: %w", path, prealloc, err))
	}
	if err := f.Sync(); err != nil {
		return fail(true, fmt.Errorf("cannot sync wal segment %s: %w", path, err))
	}
	if err := fs.SyncDir(w.opts.Dir); err != nil {
		return fail(true, fmt.Errorf("cannot sync wal directory %s: %w", w.opts.Dir, err))
	}
	return f, false, nil
}

// sealLocked records in the header that the segment's records end at
// segSize, after they are synced, so that Replay cuts nothing from a
// cleanly closed segment (or, in version 3, one the writer rotated away
// from). A file that cannot write at an offset (a test wrapper) stays
// unsealed, which only makes Replay more lenient.
func (w *Writer) sealLocked() error {
	wa, ok := w.f.(io.WriterAt)
	if !ok {
		return nil
	}
	var end [8]byte
	binary.LittleEndian.PutUint64(end[:], uint64(w.segSize))
	if _, err := wa.WriteAt(end[:], segmentSealedOffset); err != nil {
		return fmt.Errorf("cannot seal wal segment %s: %w", w.path(), err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("cannot sync wal segment %s after sealing it: %w", w.path(), err)
	}
	return nil
}

// Append adds rec to the log as one record and returns when it is durable
// (SyncAlways) or written (SyncPeriodic). rec may be reused once Append
// returns.
//
// Errors: see appendRecord.
func (w *Writer) Append(rec []byte) error { return w.appendRecord(rec, true) }

// AppendNoSync adds rec to the log as one record, like Append, but returns
// once the record is written to the segment file (write(2)), without
// waiting for an fsync, in either mode. rec may be reused once it returns.
//
// Guarantee: the record is in the log in the order of its Append or
// AppendNoSync among all others (the group commit never reorders), so it
// is durable as soon as any record appended after it is: when a later
// Append returns nil in SyncAlways mode, or after a Sync, a Rotate or
// Close. When no such call comes, the flusher fsyncs it within
// Options.SyncInterval of its write (in both modes). A process crash
// after AppendNoSync returned loses nothing (the write is in the page
// cache); a machine crash before the fsync may lose it, whole (a record is
// checksummed: Replay never returns part of one), and then also every
// record appended after it that was not synced either: never an earlier
// one without the later ones.
//
// A failed write is reported like Append's (the write is undone, later
// appends retry); it never waits for another caller's fsync, except for
// the one the flusher may be doing when the record arrives.
func (w *Writer) AppendNoSync(rec []byte) error { return w.appendRecord(rec, false) }

// AppendStaged adds rec to the log as one record, like Append, in two
// steps: it returns once the record is written to the segment file (as
// AppendNoSync does, with the same write errors), and the function it
// returns waits until the record is durable, as Append would have
// (SyncAlways: the fsync of its group commit; SyncPeriodic: nothing more)
// and returns that error. Call it exactly once. In between, the caller
// may do work that needs the write to have succeeded but not the fsync
// (DB.Apply inserts the batch into its memtable there, while the fsync
// runs). rec may be reused once AppendStaged returns.
//
// In SyncAlways mode, when its record is the only one pending and no
// fsync is running (a single writer), AppendStaged writes it itself, on
// the calling goroutine, and leaves only the fsync to the flusher
// goroutine, which it then lets start before it returns (it yields once).
// Handing the write to the flusher instead would leave the caller
// runnable on the processor (P) of the flusher, which goes straight on
// into its fsync: the caller could run again only when the Go scheduler
// took that processor back from the system call, or when the fsync ended,
// so on two processors the caller's work and the fsync hardly overlapped.
// Concurrent writers keep the flusher's group commit: records that arrive
// while an fsync runs are written and fsynced together after it (writing
// each at once and fsyncing at once cut BenchmarkAppendStaged's records
// per fsync from 8 to 1.1 with 16 appenders).
func (w *Writer) AppendStaged(rec []byte) (waitDurable func() error, err error) {
	b, alone, err := w.enqueue(rec, true)
	if err != nil {
		return nil, err
	}
	if alone && w.opts.Mode == SyncAlways && !w.syncing.Load() {
		w.writeDirect()
	} else {
		w.wakeFlusher()
	}
	<-b.written
	if b.writeErr != nil {
		// done is closed with the same error: nothing is left to wait for.
		return nil, b.writeErr
	}
	return func() error {
		<-b.done
		return b.err
	}, nil
}

// appendRecord is Append (waitSync) or AppendNoSync.
//
// A failed write (a full disk: ENOSPC) fails the Appends of its group
// commit, and the segment is restored to its last good length (the partly
// written bytes are overwritten with zeros), so later Appends retry and
// succeed once there is space. When the segment cannot be restored, and
// after any failed fsync (the kernel may have dropped the dirty pages, so a
// retried fsync could falsely succeed), the Writer is failed for good: every
// later call returns that error, also reported by Err.
func (w *Writer) appendRecord(rec []byte, waitSync bool) error {
	b, _, err := w.enqueue(rec, waitSync)
	if err != nil {
		return err
	}
	w.wakeFlusher()
	if !waitSync {
		<-b.written
		return b.writeErr
	}
	<-b.done
	return b.err
}

// enqueue adds rec to the pending batch (counting a sync waiter if
// waitSync) and returns the batch, and whether rec is its only record.
// The caller wakes the flusher (or writes the batch itself).
func (w *Writer) enqueue(rec []byte, waitSync bool) (b *batch, alone bool, err error) {
	if len(rec) > MaxRecordSize {
		return nil, false, fmt.Errorf("cannot append wal record of %d bytes: above the %d byte limit", len(rec), MaxRecordSize)
	}
	var hdr [recordHeaderSizeV3]byte
	hdrLen := recordHeaderSize
	if w.opts.format >= formatVersion3 {
		hdr, hdrLen = recordHeaderV3(rec), recordHeaderSizeV3
	} else {
		v2 := recordHeader(rec)
		copy(hdr[:], v2[:])
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil, false, ErrClosed
	}
	if w.failed != nil {
		err := w.failed
		w.mu.Unlock()
		return nil, false, err
	}
	b = w.pending
	b.buf = append(b.buf, hdr[:hdrLen]...)
	b.buf = append(b.buf, rec...)
	b.records++
	if waitSync {
		b.syncWaiters++
	}
	alone = b.records == 1
	w.mu.Unlock()
	return b, alone, nil
}

func (w *Writer) wakeFlusher() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// writeDirect is AppendStaged's write on the caller's goroutine, after
// its enqueue: it takes the I/O lock (waiting for a write or fsync in
// progress, as it would have waited for the flusher), writes the pending
// batch, unless the flusher already took it (the caller's record, and any
// that joined it), wakes
// the flusher to fsync it, and yields once, so that the flusher enters
// its fsync (and the scheduler can take its processor back from the
// system call) while the caller goes on.
func (w *Writer) writeDirect() {
	w.ioMu.Lock()
	if w.f != nil {
		// The error is the batch's: its waiters see it.
		_ = w.writePendingLocked()
	}
	needSync := len(w.awaitingSync) > 0
	w.ioMu.Unlock()
	if needSync {
		w.wakeFlusher()
		runtime.Gosched()
	}
}

// Err returns the error that failed the Writer for good, or nil while it
// accepts appends (a failed write that was undone does not count).
func (w *Writer) Err() error { return w.failure() }

// CurrentSegment returns the number of the segment records are appended to.
func (w *Writer) CurrentSegment() uint64 { return w.segment.Load() }

// Rotate writes and syncs the pending records, closes the current segment and
// creates segment CurrentSegment()+1, which it returns. Records whose Append
// returned before Rotate was called are in an older segment; records appended
// after Rotate returns go to the new one or a later one.
func (w *Writer) Rotate() (newSegment uint64, err error) {
	w.ioMu.Lock()
	defer w.ioMu.Unlock()
	if err := w.usable(); err != nil {
		return 0, err
	}
	if err := w.flushLocked(); err != nil {
		return 0, err
	}
	if err := w.rotateLocked(); err != nil {
		return 0, err
	}
	return w.seg, nil
}

// Sync writes the pending records and fsyncs the current segment now. In
// SyncPeriodic mode it makes every record whose Append returned durable.
func (w *Writer) Sync() error {
	w.ioMu.Lock()
	defer w.ioMu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	if err := w.flushLocked(); err != nil {
		return err
	}
	return w.syncLocked()
}

// Close writes and syncs the pending records, stops the flusher and closes
// the segment. It returns the Writer's failure, if any. Later calls to any
// method return ErrClosed.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	w.closed = true
	w.mu.Unlock()
	close(w.quit)
	<-w.flusherDone

	w.ioMu.Lock()
	defer w.ioMu.Unlock()
	// Appends that got in before closed was set still wait for their batch.
	err := w.flushLocked()
	if err == nil {
		err = w.syncLocked()
	}
	if err == nil {
		err = w.sealLocked()
	}
	if cerr := w.f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("cannot close wal segment %s: %w", w.path(), cerr)
	}
	w.f = nil
	if rerr := w.deleteRecycled(); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// flushLoop writes the pending batches as they come. In SyncPeriodic mode
// it fsyncs every SyncInterval; in SyncAlways mode, a write that left
// records unsynced (a batch of AppendNoSync records only) arms a timer that
// fsyncs them SyncInterval later, unless a synced batch, Sync or Rotate
// did it first (the fsync is then a no-op).
func (w *Writer) flushLoop() {
	defer close(w.flusherDone)
	var tick <-chan time.Time
	if w.opts.Mode == SyncPeriodic {
		t := time.NewTicker(w.opts.SyncInterval)
		defer t.Stop()
		tick = t.C
	}
	var syncTimer *time.Timer
	var syncDue <-chan time.Time // non-nil while syncTimer is armed
	defer func() {
		if syncTimer != nil {
			syncTimer.Stop()
		}
	}()
	for {
		// Errors are sticky in w.failed; waiters and later calls see them.
		select {
		case <-w.quit:
			return
		case <-w.wake:
			w.ioMu.Lock()
			_ = w.flushLocked()
			unsynced := w.unsyncedBytes > 0
			w.ioMu.Unlock()
			if unsynced && tick == nil && syncDue == nil {
				if syncTimer == nil {
					syncTimer = time.NewTimer(w.opts.SyncInterval)
				} else {
					syncTimer.Reset(w.opts.SyncInterval)
				}
				syncDue = syncTimer.C
			}
		case <-tick:
			w.ioMu.Lock()
			_ = w.syncLocked()
			w.ioMu.Unlock()
		case <-syncDue:
			syncDue = nil
			w.ioMu.Lock()
			_ = w.syncLocked()
			w.ioMu.Unlock()
		}
	}
}

// flushLocked writes the pending batch, fsyncs it and every written batch
// that waits for an fsync (SyncAlways mode), wakes their waiters and
// rotates if the segment reached its target size.
func (w *Writer) flushLocked() error {
	err := w.writePendingLocked()
	if len(w.awaitingSync) > 0 {
		if serr := w.syncLocked(); err == nil {
			err = serr
		}
	}

	// Rotating after waking the waiters keeps file creation off their
	// latency; the next batch waits for it under ioMu instead.
	if err == nil && w.segSize >= w.opts.SegmentTargetSize {
		if rerr := w.rotateLocked(); rerr != nil {
			if ferr := w.failure(); ferr != nil {
				return ferr
			}
			// Not fatal: the segment grows past its target and the next
			// write tries again.
			w.log.Warn("cannot rotate wal segment; appending to the current one", "err", rerr)
		}
	}
	return err
}

// writePendingLocked writes the pending batch, if it holds records, and
// wakes its waiters for the write; its Appends that wait for an fsync
// (SyncAlways mode) are left in awaitingSync, the others are done. It
// returns the write's error, or the Writer's failure.
func (w *Writer) writePendingLocked() error {
	w.mu.Lock()
	b := w.pending
	if b.records == 0 {
		err := w.failed
		w.mu.Unlock()
		return err
	}
	w.pending = newBatch(w.spare)
	w.spare = nil
	err := w.failed
	w.mu.Unlock()

	if err == nil {
		err = w.writeLocked(b)
	}
	b.writeErr = err
	close(b.written)
	if err == nil && w.opts.Mode == SyncAlways && b.syncWaiters > 0 {
		w.awaitingSync = append(w.awaitingSync, b)
	} else {
		b.err = err
		close(b.done)
	}

	w.mu.Lock()
	if cap(b.buf) <= maxRetainedBufferSize {
		w.spare = b.buf[:0]
	}
	w.mu.Unlock()
	return err
}

// restorable is what a segment file needs for a failed write to be undone.
type restorable interface {
	io.WriterAt
	io.Seeker
}

// restoreLocked undoes a write that failed after writing written bytes at
// segSize: they are overwritten with zeros (the preallocated content, so no
// new space is needed) and the file offset is moved back to segSize. The
// zeros need no fsync: until the next group's fsync, the partly written
// group is an unsynced torn tail, which Replay cuts.
func (w *Writer) restoreLocked(written int) error {
	rf, ok := w.f.(restorable)
	if !ok {
		return fmt.Errorf("cannot restore wal segment %s after a failed write: the file cannot write at an offset", w.path())
	}
	if written > 0 {
		if _, err := rf.WriteAt(make([]byte, written), w.segSize); err != nil {
			return fmt.Errorf("cannot clear %d bytes of a failed write to wal segment %s at offset %d: %w", written, w.path(), w.segSize, err)
		}
	}
	if _, err := rf.Seek(w.segSize, io.SeekStart); err != nil {
		return fmt.Errorf("cannot seek wal segment %s back to offset %d after a failed write: %w", w.path(), w.segSize, err)
	}
	return nil
}

func (w *Writer) writeLocked(b *batch) error {
	if w.f == nil {
		panic("BUG: wal batch written after Close")
	}
	if w.opts.format >= formatVersion3 {
		stampRecords(b.buf, w.seg, w.segKey)
	}
	if n, err := w.f.Write(b.buf); err != nil {
		// The file may now hold part of the batch. Writing more after it
		// would put damage in the middle of the log, so the part is
		// cleared first; if it cannot be, the writer stops here and
		// recovery treats the partial batch as a torn tail.
		werr := fmt.Errorf("cannot write %d wal records (%d bytes) to %s: %w", b.records, len(b.buf), w.path(), err)
		if rerr := w.restoreLocked(n); rerr != nil {
			return w.fail(errors.Join(werr, rerr))
		}
		w.log.Warn("wal write failed; the segment is restored and later appends retry", "err", werr)
		return werr
	}
	w.segSize += int64(len(b.buf))
	w.unsyncedRecords += b.records
	w.unsyncedBytes += len(b.buf)
	return nil
}

// syncLocked fsyncs the current segment if anything written to it is
// unsynced, and releases the batches awaiting an fsync with its result.
func (w *Writer) syncLocked() error {
	err := w.syncDataLocked()
	for i, b := range w.awaitingSync {
		b.err = err
		close(b.done)
		w.awaitingSync[i] = nil
	}
	w.awaitingSync = w.awaitingSync[:0]
	return err
}

func (w *Writer) syncDataLocked() error {
	if err := w.failure(); err != nil {
		return err
	}
	if w.unsyncedBytes == 0 || w.f == nil {
		return nil
	}
	start := time.Now()
	// The segment's size was synced when it was preallocated, so the data
	// needs no metadata sync unless a record ran past the preallocation
	// (fdatasync then syncs the new size too).
	w.syncing.Store(true)
	err := vfs.SyncData(w.f)
	w.syncing.Store(false)
	if err != nil {
		// After a failed fsync the kernel may have dropped the dirty pages
		// and a retry could falsely succeed, so the failure is permanent.
		return w.fail(fmt.Errorf("cannot sync wal segment %s: %w", w.path(), err))
	}
	took := time.Since(start)
	records, bytes := w.unsyncedRecords, w.unsyncedBytes
	w.unsyncedRecords, w.unsyncedBytes = 0, 0
	if w.opts.OnSync != nil {
		w.opts.OnSync(records, bytes, took)
	}
	return nil
}

// rotateLocked syncs the current segment and only then creates the next, so
// that every segment but the newest is complete on disk and Replay may treat
// damage there as corruption rather than a torn tail.
//
// The successor is a kept released segment when there is one
// (Options.RecycleSegments). A version 3 segment is sealed once its
// successor exists: sealing it earlier would make a failed creation, after
// which appends continue in it, leave records past its seal.
func (w *Writer) rotateLocked() error {
	if err := w.syncLocked(); err != nil {
		return err
	}
	next := w.seg + 1
	f, permanent, err := w.reuseSegment(next)
	if err == nil && f == nil {
		f, permanent, err = w.createSegment(next)
	}
	if err != nil {
		if permanent {
			return w.fail(err)
		}
		return err
	}
	if w.opts.format >= formatVersion3 {
		if err := w.sealLocked(); err != nil {
			f.Close()
			// A failed fsync is permanent; the new segment holds only its
			// header, which Replay reads as an empty last segment.
			return w.fail(err)
		}
	}
	old, oldPath := w.f, w.path()
	w.setSegmentLocked(f, next)
	if err := old.Close(); err != nil {
		// The old segment is synced, so its records are durable whatever
		// close says.
		w.log.Warn("cannot close wal segment", "path", oldPath, "err", err)
	}
	w.log.Debug("wal segment rotated", "segment", next, "path", w.path())
	return nil
}

// fail records err as the Writer's permanent failure, unless one is already
// recorded, and returns the recorded one.
func (w *Writer) fail(err error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed == nil {
		w.failed = err
		w.log.Error("wal writer failed; every later append fails", "err", err)
	}
	return w.failed
}

func (w *Writer) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

// usable returns ErrClosed or the failure that makes the Writer unusable.
func (w *Writer) usable() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	return w.failed
}

func (w *Writer) path() string { return segmentPath(w.opts.Dir, w.seg) }

// setSegmentLocked makes f, a new empty segment num, the current one.
func (w *Writer) setSegmentLocked(f vfs.File, num uint64) {
	w.f, w.seg, w.segKey, w.segSize = f, num, segmentKey(num), segmentHeaderSize
	w.segment.Store(num)
}

// reuseSegment makes a kept released segment segment num: its header is
// rewritten for num (version 3, preallocated to its current size, not
// sealed) and synced, and only then is the file renamed and the directory
// synced, so that a file named num never holds another number's header. A
// crash before the rename leaves a file under its old name, which is below
// every segment Replay reads and is deleted with them. Its old records
// stay after the header: they name older segments, so Replay ends the new
// segment's records before them (record.go). It returns a nil file when
// no kept segment is usable; a kept segment that cannot be reused is
// deleted.
func (w *Writer) reuseSegment(num uint64) (f vfs.File, permanent bool, err error) {
	for {
		w.recycleMu.Lock()
		if len(w.recycle) == 0 {
			w.recycleMu.Unlock()
			return nil, false, nil
		}
		old := w.recycle[0]
		w.recycle = w.recycle[1:]
		w.recycleMu.Unlock()
		f, permanent, err := w.reuseOne(old, num)
		if f != nil || err != nil {
			return f, permanent, err
		}
	}
}

// reuseOne is reuseSegment with segment old. It returns a nil file and no
// error when old is not usable (and deleted).
func (w *Writer) reuseOne(old, num uint64) (vfs.File, bool, error) {
	fs, oldPath, path := w.opts.FS, segmentPath(w.opts.Dir, old), segmentPath(w.opts.Dir, num)
	discard := func(why string, err error) (vfs.File, bool, error) {
		w.log.Warn("cannot reuse wal segment; deleting it", "path", oldPath, "why", why, "err", err)
		if rerr := fs.Remove(oldPath); rerr != nil && !errors.Is(rerr, iofs.ErrNotExist) {
			w.log.Warn("cannot delete released wal segment", "path", oldPath, "err", rerr)
		}
		return nil, false, nil
	}
	if _, err := fs.Stat(path); err == nil {
		return nil, true, fmt.Errorf("cannot create wal segment %s: it already exists", path)
	} else if !errors.Is(err, iofs.ErrNotExist) {
		return nil, false, fmt.Errorf("cannot create wal segment %s: %w", path, err)
	}
	f, err := fs.OpenReadWrite(oldPath)
	if err != nil {
		return discard("open", err)
	}
	rf, ok := f.(restorable)
	if !ok {
		f.Close()
		return discard("the file cannot write at an offset", nil)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return discard("stat", err)
	}
	size := st.Size()
	if size < max(w.opts.SegmentTargetSize, segmentHeaderSize) || size > maxPreallocSize {
		f.Close()
		return discard(fmt.Sprintf("size %d outside [%d, %d]", size, max(w.opts.SegmentTargetSize, segmentHeaderSize), int64(maxPreallocSize)), nil)
	}
	if _, err := rf.WriteAt(appendSegmentHeaderVersion(nil, formatVersion3, num, size), 0); err != nil {
		f.Close()
		return discard("write header", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		// The file is below every replayed segment: its header does not
		// matter, but a failed fsync fails the writer as everywhere else.
		return nil, true, fmt.Errorf("cannot sync wal segment %s rewritten as %s: %w", oldPath, path, err)
	}
	if _, err := rf.Seek(segmentHeaderSize, io.SeekStart); err != nil {
		f.Close()
		return discard("seek", err)
	}
	if err := fs.Rename(oldPath, path); err != nil {
		f.Close()
		return discard("rename", err)
	}
	if err := fs.SyncDir(w.opts.Dir); err != nil {
		f.Close()
		if rerr := fs.Remove(path); rerr != nil {
			return nil, true, errors.Join(fmt.Errorf("cannot sync wal directory %s: %w", w.opts.Dir, err),
				fmt.Errorf("cannot remove incomplete wal segment %s: %w", path, rerr))
		}
		return nil, true, fmt.Errorf("cannot sync wal directory %s: %w", w.opts.Dir, err)
	}
	w.log.Debug("wal segment reused", "from", oldPath, "as", path)
	w.reused.Add(1)
	return f, false, nil
}

// ReleaseSegmentsBefore is DeleteSegmentsBefore for the Writer's own
// directory, except that it keeps up to Options.RecycleSegments of the
// released segments (the newest, whose blocks cover the most) for the
// Writer to reuse at its next rotations, and deletes the others. The
// caller guarantees, as for DeleteSegmentsBefore, that their records are
// no longer needed; num must not be above CurrentSegment. It returns how
// many segments it deleted.
func (w *Writer) ReleaseSegmentsBefore(num uint64) (deleted int, err error) {
	if cur := w.CurrentSegment(); num > cur {
		return 0, fmt.Errorf("cannot release wal segments before %d: the writer appends to segment %d", num, cur)
	}
	if w.opts.RecycleSegments == 0 {
		return DeleteSegmentsBefore(w.opts.FS, w.opts.Dir, num)
	}
	// Close sets closed before it deletes the kept segments under
	// recycleMu, so a segment kept here is deleted by Close or not kept.
	w.recycleMu.Lock()
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed {
		w.recycleMu.Unlock()
		return DeleteSegmentsBefore(w.opts.FS, w.opts.Dir, num)
	}
	nums, err := ListSegments(w.opts.FS, w.opts.Dir)
	if err != nil {
		w.recycleMu.Unlock()
		return 0, err
	}
	kept := map[uint64]bool{}
	for _, n := range w.recycle {
		kept[n] = true
	}
	var released []uint64
	for _, n := range nums {
		if n < num && !kept[n] {
			released = append(released, n)
		}
	}
	var remove []uint64
	for i := len(released) - 1; i >= 0; i-- {
		if len(w.recycle) < w.opts.RecycleSegments {
			w.recycle = append(w.recycle, released[i])
		} else {
			remove = append(remove, released[i])
		}
	}
	slices.Sort(w.recycle)
	w.recycleMu.Unlock()
	for _, n := range remove {
		if err := w.opts.FS.Remove(segmentPath(w.opts.Dir, n)); err != nil {
			return deleted, fmt.Errorf("cannot remove wal segment %s: %w", segmentPath(w.opts.Dir, n), err)
		}
		deleted++
	}
	if deleted > 0 {
		if err := w.opts.FS.SyncDir(w.opts.Dir); err != nil {
			return deleted, fmt.Errorf("cannot sync wal directory %s: %w", w.opts.Dir, err)
		}
	}
	return deleted, nil
}

// ReusedSegments returns how many of the Writer's segments were kept
// segments reused.
func (w *Writer) ReusedSegments() int64 { return w.reused.Load() }

// RecycledSegments returns how many released segments the Writer keeps
// for reuse.
func (w *Writer) RecycledSegments() int {
	w.recycleMu.Lock()
	defer w.recycleMu.Unlock()
	return len(w.recycle)
}

// DeleteRecycledSegments deletes the released segments kept for reuse, so
// that the next rotation creates a new sparse segment and the log takes no
// more space than its live records (DB.Flush calls it: an explicit flush
// empties the log).
func (w *Writer) DeleteRecycledSegments() error { return w.deleteRecycled() }

// deleteRecycled deletes the kept segments.
func (w *Writer) deleteRecycled() error {
	w.recycleMu.Lock()
	nums := w.recycle
	w.recycle = nil
	w.recycleMu.Unlock()
	var errs []error
	for _, n := range nums {
		if err := w.opts.FS.Remove(segmentPath(w.opts.Dir, n)); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("cannot remove kept wal segment %s: %w", segmentPath(w.opts.Dir, n), err))
		}
	}
	if len(nums) > 0 {
		if err := w.opts.FS.SyncDir(w.opts.Dir); err != nil {
			errs = append(errs, fmt.Errorf("cannot sync wal directory %s: %w", w.opts.Dir, err))
		}
	}
	return errors.Join(errs...)
}
