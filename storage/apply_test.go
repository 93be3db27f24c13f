package storage

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventide/eventide/storage/vfs"
)

// TestApplyStalledHonoursContext: a write stalled behind compaction returns
// once its context is cancelled, with an error wrapping context.Canceled,
// having written nothing; a stalled write with no deadline returns when
// the DB closes, so neither delays shutdown.
func TestApplyStalledHonoursContext(t *testing.T) {
	opts := DefaultOptions()
	opts.StallSSTablesPerTable = 2
	opts.DisableAutoCompaction = true
	db, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateTable(TableDef{Name: "t"}); err != nil {
		t.Fatal(err)
	}
	for _, ck := range []string{"a", "b"} {
		if err := db.Apply(context.Background(), putRow(ck)); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// Two SSTables, compaction off: every write now stalls.
	waitStalls := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for db.Metrics().WriteStalls < n {
			if time.Now().After(deadline) {
				t.Fatalf("no write stalled (%d stalls)", db.Metrics().WriteStalls)
			}
			time.Sleep(time.Millisecond)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- db.Apply(ctx, putRow("c")) }()
	waitStalls(1)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled stalled Apply returned %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stalled Apply did not return after its context was cancelled")
	}
	if rows, _ := readAll(t, db, SliceQuery{Table: "t", Partition: []byte("p")}); len(rows) != 2 {
		t.Fatalf("after the cancelled write the partition has %d rows, want 2:\n%s", len(rows), rowsString(rows))
	}

	// An expired deadline before any wait also fails at once.
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	if err := db.Apply(expired, putRow("d")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Apply with an expired deadline: %v, want context.DeadlineExceeded", err)
	}

	go func() { done <- db.Apply(context.Background(), putRow("e")) }()
	waitStalls(2)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("stalled Apply during Close returned %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stalled Apply did not return when the DB closed")
	}
}

// walSyncFS holds or fails the fsyncs of WAL segments on demand (the
// other files sync normally).
type walSyncFS struct {
	vfs.FS
	// gate, when set, holds every WAL fsync until a value is received
	// from it.
	gate     atomic.Pointer[chan struct{}]
	failSync atomic.Bool
}

var errInjectedSync = errors.New("injected wal fsync failure")

func (fs *walSyncFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || filepath.Base(filepath.Dir(name)) != walDirName {
		return f, err
	}
	return &walSyncFile{File: f, fs: fs}, nil
}

func (fs *walSyncFS) Create(name string) (vfs.File, error) {
	f, err := fs.FS.Create(name)
	return fs.wrap(name, f, err)
}

func (fs *walSyncFS) OpenReadWrite(name string) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name)
	return fs.wrap(name, f, err)
}

type walSyncFile struct {
	vfs.File
	fs *walSyncFS
}

func (f *walSyncFile) sync(do func() error) error {
	if gate := f.fs.gate.Load(); gate != nil {
		<-*gate
	}
	if f.fs.failSync.Load() {
		return errInjectedSync
	}
	return do()
}

func (f *walSyncFile) Sync() error     { return f.sync(f.File.Sync) }
func (f *walSyncFile) SyncData() error { return f.sync(func() error { return vfs.SyncData(f.File) }) }

func (f *walSyncFile) WriteAt(p []byte, off int64) (int, error) {
	return f.File.(io.WriterAt).WriteAt(p, off)
}

func (f *walSyncFile) Seek(off int64, whence int) (int64, error) {
	return f.File.(io.Seeker).Seek(off, whence)
}

// TestApplyInsertsWhileWALSyncs: Apply puts a batch into the memtable
// once its WAL record is written, while the record's fsync runs, and
// returns only after the fsync; for one writer the memtable insert then
// costs no time of its own (it was half of loadtest/peers' ingest loop
// besides the fsync wait). A batch whose fsync fails fails Apply, stops
// the engine for good (Health, later writes, Flush), and its memtable is
// never flushed; it is durable after a restart only if the WAL on disk
// holds it, as with any failed fsync.
func TestApplyInsertsWhileWALSyncs(t *testing.T) {
	fsys := &walSyncFS{FS: vfs.Default}
	db := openTestDBIn(t, t.TempDir(), &fakeClock{now: time.Now()}, func(o *Options) { o.FS = fsys }, TableDef{Name: "t"})
	rowsOf := func() int {
		rows, _ := readAll(t, db, SliceQuery{Table: "t", Partition: []byte("p")})
		return len(rows)
	}

	gate := make(chan struct{})
	fsys.gate.Store(&gate)
	var releaseOnce sync.Once
	release := func() {
		releaseOnce.Do(func() {
			fsys.gate.Store(nil)
			close(gate)
		})
	}
	// Before db.Close on a failure, which would wait for the held fsync.
	defer release()
	applied := make(chan error, 1)
	go func() { applied <- db.Apply(context.Background(), putRow("a")) }()
	deadline := time.Now().Add(10 * time.Second)
	for rowsOf() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the batch never reached the memtable while its WAL fsync was held")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-applied:
		t.Fatalf("Apply returned (%v) before its WAL fsync", err)
	default:
	}
	release()
	if err := <-applied; err != nil {
		t.Fatal(err)
	}

	fsys.failSync.Store(true)
	if err := db.Apply(context.Background(), putRow("b")); !errors.Is(err, errInjectedSync) {
		t.Fatalf("Apply with a failing WAL fsync: %v, want the injected failure", err)
	}
	fsys.failSync.Store(false)
	if h := db.Health(); h.Err == nil || !h.Permanent {
		t.Fatalf("after a failed WAL fsync: health %+v, want a permanent failure", h)
	}
	if err := db.Apply(context.Background(), putRow("c")); err == nil {
		t.Fatal("a write after a failed WAL fsync succeeded")
	}
	if err := db.Flush(); err == nil {
		t.Fatal("Flush after a failed WAL fsync succeeded: it would write a batch that was never durable")
	}
	db.mu.Lock()
	ssts := len(db.current.sstables[db.tables["t"].id])
	db.mu.Unlock()
	if ssts != 0 {
		t.Fatalf("%d SSTables after a failed WAL fsync, want none", ssts)
	}
}

// putRow is a batch of one cell in row ck of partition "p" of table "t".
func putRow(ck string) *Batch {
	var b Batch
	b.Put("t", []byte("p"), []byte(ck), []byte("x"), []byte("v"), 1)
	return &b
}
