package vfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"slices"
	"testing"
)

func memWrite(t *testing.T, m *MemFS, name string, data []byte, sync bool) {
	t.Helper()
	f, err := m.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func memRead(t *testing.T, m *MemFS, name string) ([]byte, bool) {
	t.Helper()
	f, err := m.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b, true
}

// TestMemFiles is TestDefaultFiles on a MemFS: the engine's WAL needs
// the same of its files on either filesystem.
func TestMemFiles(t *testing.T) {
	m := NewCrashableMem()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := m.Create("/d/f")
	if err != nil {
		t.Fatal(err)
	}
	wa, ok1 := f.(io.WriterAt)
	sk, ok2 := f.(io.Seeker)
	if _, ok3 := f.(DataSyncer); !ok1 || !ok2 || !ok3 {
		t.Fatalf("%T cannot write at an offset, seek or SyncData", f)
	}
	if _, err := f.Write([]byte("hello, world")); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64); err != nil {
		t.Fatal(err)
	}
	if _, err := wa.WriteAt([]byte("HELLO"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := sk.Seek(7, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("WORLD")); err != nil {
		t.Fatal(err)
	}
	// Zeros written past the end of what the file holds read back too.
	if _, err := wa.WriteAt(make([]byte, 100), 30); err != nil {
		t.Fatal(err)
	}
	if err := SyncData(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	want := append([]byte("HELLO, WORLD"), make([]byte, 118)...)
	if got, _ := memRead(t, m, "/d/f"); !bytes.Equal(got, want) {
		t.Fatalf("file holds %q, want %q", got, want)
	}
	if fi, err := m.Stat("/d/f"); err != nil || fi.Size() != 130 || fi.IsDir() {
		t.Fatalf("stat: %v %v", fi, err)
	}
	if _, err := m.Open("/d/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open of a missing file: %v, want not-exist", err)
	}
	if err := m.Rename("/d/f", "/d/g"); err != nil {
		t.Fatal(err)
	}
	if names, _ := m.List("/d"); !slices.Equal(names, []string{"g"}) {
		t.Fatalf("List = %v, want [g]", names)
	}
	l, err := m.Lock("/d/LOCK")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Lock("/d/LOCK"); err == nil {
		t.Fatal("a held lock was taken twice")
	}
	l.Close()
	if l2, err := m.Lock("/d/LOCK"); err != nil {
		t.Fatalf("lock after release: %v", err)
	} else {
		l2.Close()
	}
}

// TestMemCrashDropsWhatWasNotSynced: after CrashClone(nil), only synced
// bytes under synced directory entries remain.
func TestMemCrashDropsWhatWasNotSynced(t *testing.T) {
	m := NewCrashableMem()
	if err := m.MkdirAll("/db/wal", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/db"); err != nil {
		t.Fatal(err)
	}
	memWrite(t, m, "/db/synced", []byte("durable"), true)
	memWrite(t, m, "/db/unsynced", []byte("lost"), false)
	if err := m.SyncDir("/db"); err != nil {
		t.Fatal(err)
	}
	// Synced data under a name the directory never synced.
	memWrite(t, m, "/db/wal/orphan", []byte("synced data, unsynced name"), true)
	// Appended after the sync: lost.
	f, err := m.OpenReadWrite("/db/synced")
	if err != nil {
		t.Fatal(err)
	}
	f.(io.Seeker).Seek(0, io.SeekEnd)
	f.Write([]byte(" and more"))
	// A rename without SyncDir: the old name survives.
	memWrite(t, m, "/db/tmp", []byte("manifest"), true)
	if err := m.SyncDir("/db"); err != nil {
		t.Fatal(err)
	}
	if err := m.Rename("/db/tmp", "/db/MANIFEST"); err != nil {
		t.Fatal(err)
	}
	// A directory made but never synced into its parent: gone, files and all.
	if err := m.MkdirAll("/db/sst", 0o755); err != nil {
		t.Fatal(err)
	}
	memWrite(t, m, "/db/sst/1.sst", []byte("x"), true)
	if err := m.SyncDir("/db/sst"); err != nil {
		t.Fatal(err)
	}

	c := m.CrashClone(nil)
	if got, ok := memRead(t, c, "/db/synced"); !ok || string(got) != "durable" {
		t.Fatalf("synced file after crash: %q %v, want %q", got, ok, "durable")
	}
	if got, ok := memRead(t, c, "/db/unsynced"); !ok || len(got) != 0 {
		t.Fatalf("unsynced file after crash: %q %v, want it empty (its name was synced, its data never)", got, ok)
	}
	for _, gone := range []string{"/db/wal/orphan", "/db/MANIFEST", "/db/sst/1.sst", "/db/sst"} {
		if _, err := c.Stat(gone); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after crash: %v, want not-exist", gone, err)
		}
	}
	if got, ok := memRead(t, c, "/db/tmp"); !ok || string(got) != "manifest" {
		t.Fatalf("un-synced rename's old name after crash: %q %v", got, ok)
	}
	// The original keeps what was written, and the clone is independent.
	if got, _ := memRead(t, m, "/db/synced"); string(got) != "durable and more" {
		t.Fatalf("original after the clone: %q", got)
	}
	memWrite(t, c, "/db/synced", []byte("clone"), true)
	if got, _ := memRead(t, m, "/db/synced"); string(got) != "durable and more" {
		t.Fatalf("writing the clone changed the original: %q", got)
	}

	// Once synced, all of it survives.
	if err := m.SyncDir("/db"); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/db/wal"); err != nil {
		t.Fatal(err)
	}
	c = m.CrashClone(nil)
	if _, err := c.Stat("/db/MANIFEST"); err != nil {
		t.Fatalf("synced rename: %v", err)
	}
	if _, err := c.Stat("/db/wal/orphan"); err != nil {
		t.Fatalf("synced entry: %v", err)
	}
	if got, _ := memRead(t, c, "/db/synced"); string(got) != "durable" {
		t.Fatalf("unsynced append survived: %q", got)
	}
}

// TestMemCrashPartialWriteback: with an rng, a crash keeps the synced
// bytes and a prefix of the unsynced writes, never anything else, and
// over many crashes both extremes occur.
func TestMemCrashPartialWriteback(t *testing.T) {
	m := NewCrashableMem()
	f, err := m.Create("/wal")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	synced := bytes.Repeat([]byte("s"), 100)
	f.Write(synced)
	f.Truncate(1000) // preallocated
	f.Sync()
	unsynced := bytes.Repeat([]byte("u"), 200)
	f.(io.WriterAt).WriteAt(unsynced, 100)
	full := append(append(append([]byte(nil), synced...), unsynced...), make([]byte, 700)...)
	rng := rand.New(rand.NewPCG(1, 2))
	sawNone, sawAll := false, false
	for i := 0; i < 200; i++ {
		got, ok := memRead(t, m.CrashClone(rng), "/wal")
		if !ok || len(got) != 1000 {
			t.Fatalf("crash %d: %d bytes, want the synced 1000", i, len(got))
		}
		kept := 0
		for kept < len(unsynced) && got[100+kept] == 'u' {
			kept++
		}
		want := append([]byte(nil), full...)
		for j := 100 + kept; j < 300; j++ {
			want[j] = 0
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("crash %d: content is not the synced bytes plus a prefix of the unsynced ones", i)
		}
		sawNone = sawNone || kept == 0
		sawAll = sawAll || kept == len(unsynced)
	}
	if !sawNone || !sawAll {
		t.Fatalf("over 200 crashes: lost all unsynced bytes %v, kept all %v; want both", sawNone, sawAll)
	}
}
