package wal

import (
	"errors"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"

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
