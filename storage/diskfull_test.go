package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eventide/eventide/storage/vfs"
)

// quotaFS is a small filesystem: the real one, with a byte quota on newly
// written data. A write past the quota writes what fits and fails with
// syscall.ENOSPC, as a full disk does. Only bytes beyond what a file held
// count (overwriting written bytes needs no new space), and removing files
// frees nothing: raise the quota to "free space".
type quotaFS struct {
	vfs.FS
	mu    sync.Mutex
	quota int64 // bytes that may still be written; < 0: unlimited
	used  int64
	high  map[string]int64 // per file: the end of its written data
}

func newQuotaFS() *quotaFS { return &quotaFS{FS: vfs.Default, quota: -1, high: map[string]int64{}} }

// setFree leaves n more bytes of space (n < 0: unlimited).
func (q *quotaFS) setFree(n int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if n < 0 {
		q.quota = -1
		return
	}
	q.quota = q.used + n
}

// reserve grants up to n new bytes of file name written at [off, off+n)
// and returns how many of the n bytes may be written.
func (q *quotaFS) reserve(name string, off, n int64) int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	grow := max(0, off+n-max(off, q.high[name]))
	if q.quota >= 0 && q.used+grow > q.quota {
		allowed := max(0, q.quota-q.used)
		fit := max(0, min(n, q.high[name]-off+allowed))
		grow = max(0, off+fit-max(off, q.high[name]))
		n = fit
	}
	q.used += grow
	q.high[name] = max(q.high[name], off+n)
	return n
}

func (q *quotaFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &quotaFile{File: f, fs: q, name: name}, nil
}

func (q *quotaFS) Create(name string) (vfs.File, error) {
	q.mu.Lock()
	delete(q.high, name)
	q.mu.Unlock()
	f, err := q.FS.Create(name)
	return q.wrap(name, f, err)
}

func (q *quotaFS) Open(name string) (vfs.File, error) {
	f, err := q.FS.Open(name)
	return q.wrap(name, f, err)
}

func (q *quotaFS) OpenReadWrite(name string) (vfs.File, error) {
	f, err := q.FS.OpenReadWrite(name)
	return q.wrap(name, f, err)
}

func (q *quotaFS) Rename(oldname, newname string) error {
	if err := q.FS.Rename(oldname, newname); err != nil {
		return err
	}
	q.mu.Lock()
	q.high[newname] = q.high[oldname]
	delete(q.high, oldname)
	q.mu.Unlock()
	return nil
}

type quotaFile struct {
	vfs.File
	fs   *quotaFS
	name string
	off  int64
}

func (f *quotaFile) write(p []byte, off int64, at bool) (int, error) {
	allowed := f.fs.reserve(f.name, off, int64(len(p)))
	var n int
	var err error
	if at {
		n, err = f.File.(io.WriterAt).WriteAt(p[:allowed], off)
	} else {
		n, err = f.File.Write(p[:allowed])
	}
	if err == nil && allowed < int64(len(p)) {
		err = &os.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
	}
	return n, err
}

func (f *quotaFile) Write(p []byte) (int, error) {
	n, err := f.write(p, f.off, false)
	f.off += int64(n)
	return n, err
}

func (f *quotaFile) WriteAt(p []byte, off int64) (int, error) { return f.write(p, off, true) }

func (f *quotaFile) Seek(offset int64, whence int) (int64, error) {
	n, err := f.File.(io.Seeker).Seek(offset, whence)
	if err == nil {
		f.off = n
	}
	return n, err
}

func (f *quotaFile) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	f.off += int64(n)
	return n, err
}

// diskFullRun applies batches into a store on fsys while space runs out,
// checks that writes fail with ENOSPC and Health says so without being
// permanent, makes space (free), checks writes resume without reopening,
// and that every batch whose Apply returned nil is there after a reopen.
func diskFullRun(t *testing.T, dir string, fsys vfs.FS, exhaust, free func()) {
	opts := DefaultOptions()
	opts.FS = fsys
	opts.MemtableSize = 32 << 10
	opts.WALSegmentSize = 64 << 10
	opts.MaxImmutableMemtables = 2
	// No kept WAL segments: Flush deletes them first, which frees space
	// and can let the flush on the "full" disk below succeed.
	opts.WALRecycleSegments = -1
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if db != nil {
			db.Close()
		}
	}()
	def := TableDef{Name: "t", Compaction: SizeTiered, MinThreshold: 2}
	if err := db.CreateTable(def); err != nil {
		t.Fatal(err)
	}
	acked := map[int]bool{}
	i := 0
	put := func() error {
		var b Batch
		b.Put("t", []byte(fmt.Sprintf("p%d", i%5)), []byte(fmt.Sprintf("%08d", i)), []byte("v"),
			[]byte(fmt.Sprintf("value %d %0200d", i, i)), int64(i+1))
		err := db.Apply(context.Background(), &b)
		if err == nil {
			acked[i] = true
		}
		i++
		return err
	}
	for range 300 {
		if err := put(); err != nil {
			t.Fatal(err)
		}
	}
	exhaust()
	// Writes (and the flushes and compactions they cause) run into the
	// full disk.
	var failures int
	for range 2000 {
		err := put()
		if err == nil {
			continue
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("Apply on a full disk: %v, want an error wrapping ENOSPC", err)
		}
		failures++
		if failures >= 20 {
			break
		}
	}
	if failures == 0 {
		t.Fatal("no Apply failed: the disk never filled")
	}
	// A flush on the full disk fails (WAL rotation or SSTable write)
	// instead of hanging or stopping the store.
	if err := db.Flush(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Flush on a full disk: %v, want an error wrapping ENOSPC", err)
	}
	h := db.Health()
	if h.Err == nil || h.Permanent || !errors.Is(h.Err, syscall.ENOSPC) {
		t.Fatalf("Health on a full disk: %+v, want a transient ENOSPC error", h)
	}
	t.Logf("full disk: %d applied, %d failed; health: %v", len(acked), failures, h.Err)

	free()
	// Writes resume without reopening, once the background retries have
	// flushed what waited (a poll with a deadline; no timing assertion).
	deadline := time.Now().Add(30 * time.Second)
	resumed := 0
	for resumed < 500 {
		if err := put(); err != nil {
			if time.Now().After(deadline) {
				t.Fatalf("writes did not resume after space was freed: %v (health %+v)", err, db.Health())
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		resumed++
	}
	if err := db.Flush(); err != nil {
		t.Fatalf("flush after space was freed: %v", err)
	}
	for db.Health().Err != nil {
		if time.Now().After(deadline) {
			t.Fatalf("health still failing after space was freed: %+v", db.Health())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = nil

	db2, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	present := map[int]bool{}
	for p := range 5 {
		rows, _ := readAll(t, db2, SliceQuery{Table: "t", Partition: []byte(fmt.Sprintf("p%d", p))})
		for _, r := range rows {
			var n int
			fmt.Sscanf(string(r.Clustering), "%d", &n)
			present[n] = true
		}
	}
	for n := range acked {
		if !present[n] {
			t.Fatalf("batch %d was acknowledged but is missing after reopening", n)
		}
	}
	if err := db2.Check(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d acknowledged batches all present after reopening", len(acked))
}

// TestDiskFull runs the store into a byte quota (the quotaFS "small
// filesystem") and raises it again.
func TestDiskFull(t *testing.T) {
	q := newQuotaFS()
	diskFullRun(t, t.TempDir(), q, func() { q.setFree(20 << 10) }, func() { q.setFree(-1) })
}

// TestDiskFullTmpfs does the same on a real tiny tmpfs. It needs root and a
// working mount(8); the quota test above always runs.
func TestDiskFullTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs; TestDiskFull covers the same with a byte quota")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s); TestDiskFull covers the same with a byte quota", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	dir := filepath.Join(mnt, "db")
	filler := filepath.Join(mnt, "filler")
	diskFullRun(t, dir, vfs.Default, func() {
		// Fill what is left, leaving a little for the store.
		f, err := os.Create(filler)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		chunk := make([]byte, 4096)
		for i := range chunk {
			chunk[i] = 1
		}
		for {
			if _, err := f.Write(chunk); err != nil {
				break
			}
		}
		var st syscall.Statfs_t
		if err := syscall.Statfs(mnt, &st); err == nil {
			t.Logf("tmpfs filled: %d bytes free", st.Bavail*uint64(st.Bsize))
		}
	}, func() {
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
	})
}

// TestDiskFullFlushAndCompaction fills the quota so that only SSTable
// writes fail (the WAL has what it needs): a flush and a compaction fail
// with ENOSPC, the store stays writable in principle (Health is transient),
// and once space is back the background flush retry and a new compaction
// succeed without reopening; nothing is lost.
func TestDiskFullFlushAndCompaction(t *testing.T) {
	q := newQuotaFS()
	dir := t.TempDir()
	opts := DefaultOptions()
	opts.FS = q
	opts.DisableAutoCompaction = true
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.CreateTable(TableDef{Name: "t"}); err != nil {
		t.Fatal(err)
	}
	n := 0
	fill := func(count int) {
		for range count {
			apply(t, db, func(b *Batch) {
				b.Put("t", []byte("p"), []byte(fmt.Sprintf("%08d", n)), []byte("v"), []byte(fmt.Sprintf("value %0300d", n)), int64(n+1))
			})
			n++
		}
	}
	fill(200)
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	fill(200)

	q.setFree(200) // room for a WAL segment header, not for an SSTable
	err = db.Flush()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Flush into a full disk: %v, want ENOSPC", err)
	}
	if h := db.Health(); h.Err == nil || h.Permanent || !errors.Is(h.Err, syscall.ENOSPC) {
		t.Fatalf("Health after a failed flush: %+v, want a transient ENOSPC error", h)
	}
	q.setFree(-1)
	deadline := time.Now().Add(30 * time.Second)
	for db.Health().Err != nil { // the background retry
		if time.Now().After(deadline) {
			t.Fatalf("flush did not resume: %+v", db.Health())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	fill(200)
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}

	q.setFree(200)
	if err := db.Compact("t"); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Compact into a full disk: %v, want ENOSPC", err)
	}
	if h := db.Health(); h.Err == nil || h.Permanent {
		t.Fatalf("Health after a failed compaction: %+v, want a transient error", h)
	}
	q.setFree(-1)
	if err := db.Compact("t"); err != nil {
		t.Fatalf("Compact after space was freed: %v", err)
	}
	if h := db.Health(); h.Err != nil {
		t.Fatalf("Health after a successful compaction: %+v", h)
	}
	fill(10)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := readAll(t, db, SliceQuery{Table: "t", Partition: []byte("p")})
	if len(rows) != n {
		t.Fatalf("%d rows after reopening, want %d", len(rows), n)
	}
	if err := db.Check(); err != nil {
		t.Fatal(err)
	}
}
