package wal

import (
	"errors"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/eventide/eventide/storage/vfs"
)

// TestAppendStagedWritesOnCaller: in SyncAlways mode AppendStaged writes
// its record on the calling goroutine (here locked to its OS thread, so
// a write on any other goroutine shows another thread id) and leaves only
// the fsync to the flusher, which must still finish before waitDurable
// returns. Handing the write to the flusher made the caller wait for the
// flusher's fsync to be scheduled around (see writeDirect).
func TestAppendStagedWritesOnCaller(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dir := t.TempDir()
	fs := &faultFS{FS: vfs.Default, err: errors.New("injected fault")}
	w := openWriter(t, Options{FS: fs, Dir: dir}, 1)
	var writerTid atomic.Int64
	hook := func() { writerTid.Store(int64(syscall.Gettid())) }
	fs.writeHook.Store(&hook)
	gate := make(chan struct{})
	fs.syncGate.Store(&gate)
	for i := range 3 {
		writerTid.Store(0)
		wait, err := w.AppendStaged(testRecord(i))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := writerTid.Load(), int64(syscall.Gettid()); got != want {
			t.Fatalf("record %d was written on thread %d, not on the caller's %d", i, got, want)
		}
		durable := make(chan error, 1)
		go func() { durable <- wait() }()
		select {
		case err := <-durable:
			t.Fatalf("record %d was reported durable (%v) while its fsync was held", i, err)
		default:
		}
		gate <- struct{}{}
		if err := <-durable; err != nil {
			t.Fatalf("record %d after its fsync: %v", i, err)
		}
	}
	fs.syncGate.Store(nil)
	fs.writeHook.Store(nil)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := replayAll(t, dir, 1)
	if len(got) != 3 {
		t.Fatalf("replayed %d records, want 3", len(got))
	}
	if n := fs.syncCount(segmentPath(dir, 1)); n < 3 {
		t.Fatalf("%d fsyncs of the segment, want one per record at least", n)
	}
}

// TestAppendStagedDuringSyncLeavesTheWriteToTheFlusher: a record
// appended while an fsync runs is not written by its caller (which would
// then fsync it at once, alone) but by the flusher after that fsync,
// together with whatever else arrived meanwhile: group commit for
// concurrent writers. Writing every record on its caller cut
// BenchmarkAppendStaged's records per fsync from 8 to 1.1 with 16
// appenders.
func TestAppendStagedDuringSyncLeavesTheWriteToTheFlusher(t *testing.T) {
	dir := t.TempDir()
	fs := &faultFS{FS: vfs.Default, err: errors.New("injected fault")}
	w := openWriter(t, Options{FS: fs, Dir: dir}, 1)
	gate := make(chan struct{})
	fs.syncGate.Store(&gate)
	first, err := w.AppendStaged(testRecord(0))
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the flusher is in the fsync of record 0 (held at the gate).
	deadline := time.Now().Add(10 * time.Second)
	for !w.syncing.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the flusher never started the fsync of record 0")
		}
		runtime.Gosched()
	}
	var writerTid atomic.Int64
	hook := func() { writerTid.Store(int64(syscall.Gettid())) }
	fs.writeHook.Store(&hook)
	type staged struct {
		tid  int64
		wait func() error
		err  error
	}
	done := make(chan staged, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		wait, err := w.AppendStaged(testRecord(1))
		done <- staged{int64(syscall.Gettid()), wait, err}
	}()
	// The second record waits in the pending batch until the flusher's
	// fsync is let go.
	for {
		w.mu.Lock()
		n := w.pending.records
		w.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("record 1 never reached the pending batch")
		}
		runtime.Gosched()
	}
	close(gate)
	s := <-done
	if s.err != nil {
		t.Fatal(s.err)
	}
	if got := writerTid.Load(); got == s.tid {
		t.Fatalf("record 1, appended during an fsync, was written on its caller's thread %d, not by the flusher", got)
	}
	if err := s.wait(); err != nil {
		t.Fatal(err)
	}
	if err := first(); err != nil {
		t.Fatal(err)
	}
	fs.syncGate.Store(nil)
	fs.writeHook.Store(nil)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := replayAll(t, dir, 1); len(got) != 2 {
		t.Fatalf("replayed %d records, want 2", len(got))
	}
}
