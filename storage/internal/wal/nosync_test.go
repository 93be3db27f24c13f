package wal

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/eventide/eventide/storage/vfs"
)

// replayMem returns the records a crash-cloned MemFS holds, in order.
func replayMem(t *testing.T, fs vfs.FS, dir string) []string {
	t.Helper()
	var got []string
	if _, err := Replay(fs, dir, 1, func(_ uint64, _ int64, rec []byte) error {
		got = append(got, string(rec))
		return nil
	}); err != nil {
		t.Fatalf("replay after the crash: %v", err)
	}
	return got
}

func openMemWriter(t *testing.T, opts Options) (*vfs.MemFS, *Writer) {
	t.Helper()
	m := vfs.NewCrashableMem()
	if err := m.MkdirAll("/wal", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/"); err != nil { // the directory itself survives a crash
		t.Fatal(err)
	}
	opts.FS, opts.Dir = m, "/wal"
	w, err := Open(opts, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return m, w
}

// TestAppendNoSyncCrash: below the page cache, a record appended with
// AppendNoSync is not durable on its own (no fsync), becomes durable with
// the next synced Append, and a crash leaves an in-order prefix of whole
// records: never part of one, never a later record without an earlier one.
func TestAppendNoSyncCrash(t *testing.T) {
	// The interval is far beyond the test: only synced Appends fsync.
	m, w := openMemWriter(t, Options{Mode: SyncAlways, SyncInterval: time.Hour})
	if err := w.AppendNoSync([]byte("nosync-1")); err != nil {
		t.Fatal(err)
	}
	if got := replayMem(t, m.CrashClone(nil), "/wal"); len(got) != 0 {
		t.Fatalf("AppendNoSync fsynced: a crash kept %q", got)
	}
	if err := w.Append([]byte("synced-2")); err != nil {
		t.Fatal(err)
	}
	want := []string{"nosync-1", "synced-2"}
	if got := replayMem(t, m.CrashClone(nil), "/wal"); !slices.Equal(got, want) {
		t.Fatalf("after a synced Append a crash kept %q, want %q", got, want)
	}
	// Unsynced records of different sizes (a torn one would show).
	var tail []string
	for i := range 6 {
		rec := testRecord(100 + i)
		if err := w.AppendNoSync(rec); err != nil {
			t.Fatal(err)
		}
		tail = append(tail, string(rec))
	}
	all := append(append([]string(nil), want...), tail...)
	for seed := range uint64(200) {
		got := replayMem(t, m.CrashClone(rand.New(rand.NewPCG(seed, 1))), "/wal")
		if len(got) < len(want) || !slices.Equal(got, all[:len(got)]) {
			t.Fatalf("seed %d: a crash kept %d records %q, want a prefix of %q at least %d long", seed, len(got), got, all, len(want))
		}
	}
	if err := w.Append([]byte("synced-3")); err != nil {
		t.Fatal(err)
	}
	all = append(all, "synced-3")
	if got := replayMem(t, m.CrashClone(nil), "/wal"); !slices.Equal(got, all) {
		t.Fatalf("after a synced Append a crash kept %q, want %q", got, all)
	}
}

// TestAppendNoSyncBackgroundSync: with no other write coming, the flusher
// fsyncs a record appended with AppendNoSync on its own (within
// SyncInterval) in SyncAlways mode.
func TestAppendNoSyncBackgroundSync(t *testing.T) {
	synced := make(chan int, 16)
	m, w := openMemWriter(t, Options{Mode: SyncAlways, SyncInterval: time.Millisecond,
		OnSync: func(records, _ int, _ time.Duration) { synced <- records }})
	if err := w.AppendNoSync([]byte("x")); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-synced:
		if n != 1 {
			t.Fatalf("background fsync covered %d records, want 1", n)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no background fsync within 30s at a 1ms interval")
	}
	if got := replayMem(t, m.CrashClone(nil), "/wal"); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("after the background fsync a crash kept %q, want [x]", got)
	}
	// A second one arms the timer again.
	if err := w.AppendNoSync([]byte("y")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-synced:
	case <-time.After(30 * time.Second):
		t.Fatal("no second background fsync within 30s at a 1ms interval")
	}
	if got := replayMem(t, m.CrashClone(nil), "/wal"); !slices.Equal(got, []string{"x", "y"}) {
		t.Fatalf("after the background fsync a crash kept %q, want [x y]", got)
	}
}
