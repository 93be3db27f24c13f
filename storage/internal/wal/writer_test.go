package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/eventide/eventide/storage/vfs"
)

// testRecord returns a deterministic record of varying length, so framing
// mistakes show up as content mismatches.
func testRecord(i int) []byte {
	n := (i * 37) % 300
	rec := make([]byte, 0, n+16)
	rec = fmt.Appendf(rec, "record-%d:", i)
	for j := range n {
		rec = append(rec, byte('a'+(i+j)%26))
	}
	return rec
}

type replayedRecord struct {
	segment uint64
	offset  int64
	rec     string
}

func replayAll(t *testing.T, dir string, minSegment uint64) ([]replayedRecord, ReplayResult) {
	t.Helper()
	var got []replayedRecord
	res, err := Replay(vfs.Default, dir, minSegment, func(segment uint64, offset int64, rec []byte) error {
		got = append(got, replayedRecord{segment, offset, string(rec)})
		return nil
	})
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if res.Records != len(got) {
		t.Fatalf("ReplayResult.Records = %d, fn saw %d", res.Records, len(got))
	}
	return got, res
}

func openWriter(t *testing.T, opts Options, first uint64) *Writer {
	t.Helper()
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	w, err := Open(opts, first)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// checkFraming asserts what every replay must satisfy: contiguous segments,
// records starting right after the segment header and strictly increasing
// offsets within a segment.
func checkFraming(t *testing.T, got []replayedRecord, res ReplayResult) {
	t.Helper()
	for i := 1; i < len(res.Segments); i++ {
		if res.Segments[i] != res.Segments[i-1]+1 {
			t.Fatalf("segments not contiguous: %v", res.Segments)
		}
	}
	for i, r := range got {
		if i == 0 || got[i-1].segment != r.segment {
			if r.offset != segmentHeaderSize {
				t.Fatalf("first record of segment %d at offset %d, want %d", r.segment, r.offset, segmentHeaderSize)
			}
			continue
		}
		if prev := got[i-1]; r.offset != prev.offset+int64(recordHeaderSizeV3+len(prev.rec)) {
			t.Fatalf("record %d at %d:%d does not follow the previous one at %d:%d (%d bytes)",
				i, r.segment, r.offset, prev.segment, prev.offset, len(prev.rec))
		}
	}
}

func TestRoundTrip(t *testing.T) {
	big := func(n int) []byte { return bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n] }
	many := func(n int) [][]byte {
		recs := make([][]byte, n)
		for i := range recs {
			recs[i] = testRecord(i)
		}
		return recs
	}
	cases := []struct {
		name         string
		mode         SyncMode
		target       int64
		recs         [][]byte
		wantSegments int
	}{
		{"no records", SyncAlways, 0, nil, 1},
		{"one empty record", SyncAlways, 0, [][]byte{{}}, 1},
		{"small records", SyncAlways, 0, many(50), 1},
		{"small records periodic", SyncPeriodic, 0, many(50), 1},
		{"records larger than a read chunk", SyncAlways, 0, [][]byte{big(readChunkSize - 3), big(readChunkSize + 5), []byte("x"), big(3 * readChunkSize)}, 1},
		// A write that reaches the target rotates, so each of these
		// records sits alone in its segment, whole.
		{"records larger than the segment target", SyncAlways, 1 << 10, [][]byte{big(3 << 10), big(5 << 10), big(1)}, 3},
		{"rotation by size", SyncAlways, 2 << 10, many(200), 0},
		{"rotation by size periodic", SyncPeriodic, 2 << 10, many(200), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w := openWriter(t, Options{Dir: dir, Mode: tc.mode, SegmentTargetSize: tc.target}, 1)
			for _, rec := range tc.recs {
				if err := w.Append(rec); err != nil {
					t.Fatal(err)
				}
			}
			cur := w.CurrentSegment()
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got, res := replayAll(t, dir, 1)
			checkFraming(t, got, res)
			if len(got) != len(tc.recs) {
				t.Fatalf("replayed %d records, want %d", len(got), len(tc.recs))
			}
			for i, r := range got {
				if r.rec != string(tc.recs[i]) {
					t.Fatalf("record %d differs: got %d bytes, want %d", i, len(r.rec), len(tc.recs[i]))
				}
			}
			if res.LastSegment != cur || res.Segments[0] != 1 || res.TruncatedBytes != 0 {
				t.Fatalf("result %+v, want segments 1..%d and no truncation", res, cur)
			}
			if tc.wantSegments > 0 && len(res.Segments) != tc.wantSegments {
				t.Fatalf("%d segments, want %d", len(res.Segments), tc.wantSegments)
			}
			if tc.wantSegments == 0 && len(res.Segments) < 5 {
				t.Fatalf("only %d segments: size-based rotation did not happen", len(res.Segments))
			}
		})
	}
}

// concurrentRecord encodes (goroutine, seq) plus a filler whose length and
// bytes derive from them, so replay can check identity and integrity.
func concurrentRecord(g, seq int) []byte {
	rec := binary.LittleEndian.AppendUint32(nil, uint32(g))
	rec = binary.LittleEndian.AppendUint32(rec, uint32(seq))
	for i := range (g*31 + seq*17) % 200 {
		rec = append(rec, byte(g^seq^i))
	}
	return rec
}

func TestConcurrentAppend(t *testing.T) {
	const goroutines, perGoroutine = 16, 100
	for _, mode := range []SyncMode{SyncAlways, SyncPeriodic} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			// A small target makes rotations race with appends.
			w := openWriter(t, Options{Dir: dir, Mode: mode, SegmentTargetSize: 8 << 10}, 1)
			var wg sync.WaitGroup
			errs := make(chan error, goroutines)
			for g := range goroutines {
				wg.Go(func() {
					for seq := range perGoroutine {
						if err := w.Append(concurrentRecord(g, seq)); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got, res := replayAll(t, dir, 1)
			checkFraming(t, got, res)
			if len(got) != goroutines*perGoroutine {
				t.Fatalf("replayed %d records, want %d", len(got), goroutines*perGoroutine)
			}
			next := make([]int, goroutines) // each goroutine's records appear in its order
			for _, r := range got {
				g := int(binary.LittleEndian.Uint32([]byte(r.rec)))
				seq := int(binary.LittleEndian.Uint32([]byte(r.rec[4:])))
				if g >= goroutines || seq != next[g] {
					t.Fatalf("record (goroutine %d, seq %d) out of order or duplicated, want seq %d", g, seq, next[g])
				}
				if r.rec != string(concurrentRecord(g, seq)) {
					t.Fatalf("record (goroutine %d, seq %d) damaged", g, seq)
				}
				next[g]++
			}
			if len(res.Segments) < 3 {
				t.Fatalf("only %d segments: rotation did not race with appends", len(res.Segments))
			}
		})
	}
}

// TestGroupCommitBatches counts fsyncs through OnSync: concurrent appenders
// must share them.
func TestGroupCommitBatches(t *testing.T) {
	cases := []struct {
		goroutines, perGoroutine int
	}{
		{64, 50},
		{1000, 1},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%dx%d", tc.goroutines, tc.perGoroutine), func(t *testing.T) {
			var syncs, synced, syncedBytes atomic.Int64
			w := openWriter(t, Options{Dir: t.TempDir(), OnSync: func(records, bytes int, took time.Duration) {
				syncs.Add(1)
				synced.Add(int64(records))
				syncedBytes.Add(int64(bytes))
			}}, 1)
			start := make(chan struct{})
			var wg sync.WaitGroup
			var failed, returned, unsynced atomic.Int64
			for range tc.goroutines {
				wg.Go(func() {
					<-start
					for range tc.perGoroutine {
						if err := w.Append([]byte("a small record")); err != nil {
							failed.Add(1)
						}
						// SyncAlways: OnSync counted a record before its
						// Append returned, so fsynced >= returned always.
						if n := returned.Add(1); synced.Load() < n {
							unsynced.Add(1)
						}
					}
				})
			}
			close(start)
			wg.Wait()
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			appends := int64(tc.goroutines * tc.perGoroutine)
			if failed.Load() != 0 {
				t.Fatalf("%d appends failed", failed.Load())
			}
			if unsynced.Load() != 0 {
				t.Fatalf("%d appends returned before their record was fsynced", unsynced.Load())
			}
			if synced.Load() != appends || syncedBytes.Load() != appends*int64(recordHeaderSizeV3+len("a small record")) {
				t.Fatalf("OnSync reported %d records / %d bytes, want %d records", synced.Load(), syncedBytes.Load(), appends)
			}
			t.Logf("%d appends, %d fsyncs (%.1f records per fsync)", appends, syncs.Load(), float64(appends)/float64(syncs.Load()))
			if syncs.Load() >= appends/2 {
				t.Fatalf("%d fsyncs for %d concurrent appends: group commit is not batching", syncs.Load(), appends)
			}
		})
	}
}

func TestRotate(t *testing.T) {
	dir := t.TempDir()
	w := openWriter(t, Options{Dir: dir}, 7)
	steps := []struct {
		append string // appended before the rotation, if not empty
		want   uint64 // segment Rotate must return
	}{
		{"a", 8},
		{"b", 9},
		{"", 10}, // rotating an empty segment is allowed and keeps numbers contiguous
		{"c", 11},
	}
	for _, s := range steps {
		if s.append != "" {
			if err := w.Append([]byte(s.append)); err != nil {
				t.Fatal(err)
			}
		}
		got, err := w.Rotate()
		if err != nil {
			t.Fatal(err)
		}
		if got != s.want || w.CurrentSegment() != s.want {
			t.Fatalf("Rotate() = %d, CurrentSegment() = %d, want %d", got, w.CurrentSegment(), s.want)
		}
	}
	if err := w.Append([]byte("d")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, res := replayAll(t, dir, 0)
	want := []replayedRecord{{7, segmentHeaderSize, "a"}, {8, segmentHeaderSize, "b"}, {10, segmentHeaderSize, "c"}, {11, segmentHeaderSize, "d"}}
	if !slices.Equal(got, want) || !slices.Equal(res.Segments, []uint64{7, 8, 9, 10, 11}) || res.LastSegment != 11 {
		t.Fatalf("replayed %v in %v, want %v in 7..11", got, res.Segments, want)
	}
	// minSegment skips older segments.
	got, _ = replayAll(t, dir, 10)
	if !slices.Equal(got, want[2:]) {
		t.Fatalf("replay from 10: %v, want %v", got, want[2:])
	}
}

// TestRotateConcurrent checks Rotate's promise while appends race with it:
// records whose Append returned before Rotate was called are in older
// segments, records whose Append started after it returned are in the new
// one or later.
func TestRotateConcurrent(t *testing.T) {
	// Each goroutine keeps appending until it has made afterRotate appends
	// that started after Rotate returned, so the test always covers both
	// sides of the rotation.
	const goroutines, rotateAfter, afterRotate = 8, 200, 20
	dir := t.TempDir()
	w := openWriter(t, Options{Dir: dir}, 1)
	var (
		mu        sync.Mutex
		completed []string              // ids whose Append returned
		minSeg    = map[string]uint64{} // ids whose Append started after Rotate returned
		rotated   atomic.Uint64         // the segment Rotate returned, once it did
		reached   = make(chan struct{})
		once      sync.Once
	)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i, post := 0, 0; post < afterRotate; i++ {
				id := fmt.Sprintf("%d/%d", g, i)
				after := rotated.Load()
				if err := w.Append([]byte(id)); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				completed = append(completed, id)
				if after != 0 {
					minSeg[id] = after
					post++
				}
				if len(completed) == rotateAfter {
					once.Do(func() { close(reached) })
				}
				mu.Unlock()
			}
		})
	}
	<-reached
	mu.Lock()
	before := slices.Clone(completed)
	mu.Unlock()
	seg, err := w.Rotate()
	if err != nil {
		t.Fatal(err)
	}
	rotated.Store(seg)
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, res := replayAll(t, dir, 1)
	checkFraming(t, got, res)
	where := map[string]uint64{}
	for _, r := range got {
		where[r.rec] = r.segment
	}
	if len(where) != len(completed) || len(got) != len(where) {
		t.Fatalf("replayed %d records (%d distinct), want %d", len(got), len(where), len(completed))
	}
	for _, id := range before {
		if where[id] >= seg {
			t.Fatalf("record %s returned before Rotate but is in segment %d >= %d", id, where[id], seg)
		}
	}
	for id, min := range minSeg {
		if where[id] < min {
			t.Fatalf("record %s started after Rotate returned %d but is in segment %d", id, min, where[id])
		}
	}
}

func TestPeriodicSync(t *testing.T) {
	dir := t.TempDir()
	type syncCall struct{ records, bytes int }
	var calls []syncCall // OnSync runs under the writer's I/O lock; Sync returns after it
	var mu sync.Mutex
	// The interval is far beyond the test, so only Sync and Close fsync.
	w := openWriter(t, Options{Dir: dir, Mode: SyncPeriodic, SyncInterval: time.Hour,
		OnSync: func(records, bytes int, _ time.Duration) {
			mu.Lock()
			calls = append(calls, syncCall{records, bytes})
			mu.Unlock()
		}}, 1)
	wantBytes := 0
	for i := range 10 {
		if err := w.Append(testRecord(i)); err != nil {
			t.Fatal(err)
		}
		wantBytes += recordHeaderSizeV3 + len(testRecord(i))
	}
	mu.Lock()
	if len(calls) != 0 {
		t.Fatalf("periodic Append fsynced: %v", calls)
	}
	mu.Unlock()
	// Append returned after write(2): the records are in the file already.
	if got, _ := replayAll(t, dir, 1); len(got) != 10 {
		t.Fatalf("replayed %d written records, want 10", len(got))
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil { // nothing new: no fsync
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if want := []syncCall{{10, wantBytes}}; !slices.Equal(calls, want) {
		t.Fatalf("fsyncs %v, want %v", calls, want)
	}
}

func TestPeriodicBackgroundSync(t *testing.T) {
	synced := make(chan int, 16)
	w := openWriter(t, Options{Dir: t.TempDir(), Mode: SyncPeriodic, SyncInterval: time.Millisecond,
		OnSync: func(records, _ int, _ time.Duration) { synced <- records }}, 1)
	defer w.Close()
	if err := w.Append([]byte("x")); err != nil {
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
}

// faultFS injects failures into the real filesystem and counts successful
// fsyncs per file. It wraps every operation that returns a File, so a
// repair done through Open or OpenReadWrite is seen too.
type faultFS struct {
	vfs.FS
	err                                          error
	failWrite, failWriteAt, failSync, failCreate atomic.Bool
	// syncGate, when set, holds every Sync until a value is received
	// from it (or it is closed).
	syncGate atomic.Pointer[chan struct{}]
	// writeHook, when set, is called before every Write.
	writeHook atomic.Pointer[func()]
	mu        sync.Mutex
	syncs     map[string]int // mu: path -> successful fsyncs
}

func (fs *faultFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &faultFile{File: f, fs: fs, name: name}, nil
}

func (fs *faultFS) Create(name string) (vfs.File, error) {
	if fs.failCreate.Load() {
		return nil, fs.err
	}
	f, err := fs.FS.Create(name)
	return fs.wrap(name, f, err)
}

func (fs *faultFS) Open(name string) (vfs.File, error) {
	f, err := fs.FS.Open(name)
	return fs.wrap(name, f, err)
}

func (fs *faultFS) OpenReadWrite(name string) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name)
	return fs.wrap(name, f, err)
}

func (fs *faultFS) syncCount(name string) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.syncs[name]
}

type faultFile struct {
	vfs.File
	fs   *faultFS
	name string
}

// Write fails after writing half the bytes, as a full disk would.
func (f *faultFile) Write(p []byte) (int, error) {
	if hook := f.fs.writeHook.Load(); hook != nil {
		(*hook)()
	}
	if f.fs.failWrite.Load() {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, f.fs.err
	}
	return f.File.Write(p)
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if f.fs.failWriteAt.Load() {
		return 0, f.fs.err
	}
	return f.File.(io.WriterAt).WriteAt(p, off)
}

func (f *faultFile) Seek(off int64, whence int) (int64, error) {
	return f.File.(io.Seeker).Seek(off, whence)
}

func (f *faultFile) Sync() error {
	if gate := f.fs.syncGate.Load(); gate != nil {
		<-*gate
	}
	if f.fs.failSync.Load() {
		return f.fs.err
	}
	if err := f.File.Sync(); err != nil {
		return err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.fs.syncs == nil {
		f.fs.syncs = map[string]int{}
	}
	f.fs.syncs[f.name]++
	return nil
}

// TestWriteFailureIsUndone: a write that fails part way (a full disk)
// fails its Append, but the segment is restored and later Appends succeed,
// in the same segment, with nothing of the failed record replayed. Only
// when the restore itself fails does the failure stick.
func TestWriteFailureIsUndone(t *testing.T) {
	dir := t.TempDir()
	fs := &faultFS{FS: vfs.Default, err: syscall.ENOSPC}
	w := openWriter(t, Options{FS: fs, Dir: dir, SegmentTargetSize: 64 << 10}, 1)
	for i := range 5 {
		if err := w.Append(testRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
	fs.failWrite.Store(true)
	if err := w.Append([]byte("this record never makes it")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append on a full disk: %v, want ENOSPC", err)
	}
	if err := w.Err(); err != nil {
		t.Fatalf("writer failed for good after an undone write: %v", err)
	}
	fs.failWrite.Store(false)
	for i := 5; i < 10; i++ {
		if err := w.Append(testRecord(i)); err != nil {
			t.Fatalf("Append after space came back: %v", err)
		}
	}
	// A failure whose partial write cannot be cleared sticks.
	fs.failWrite.Store(true)
	fs.failWriteAt.Store(true)
	if err := w.Append([]byte("partial")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append: %v, want ENOSPC", err)
	}
	fs.failWrite.Store(false)
	fs.failWriteAt.Store(false)
	if err := w.Err(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Err after an unrestorable write: %v, want it failed for good", err)
	}
	if err := w.Append([]byte("later")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append after an unrestorable write: %v, want the sticky failure", err)
	}
	w.Close()
	got, res := replayAll(t, dir, 1)
	checkFraming(t, got, res)
	if len(got) != 10 {
		t.Fatalf("replayed %d records, want the 10 acknowledged ones", len(got))
	}
	for i, r := range got {
		if r.rec != string(testRecord(i)) {
			t.Fatalf("record %d is %q", i, r.rec)
		}
	}
	if res.TruncatedBytes == 0 {
		t.Fatalf("the unrestorable partial write was not cut as a torn tail: %+v", res)
	}
}

// TestAppendStaged: AppendStaged returns once its record is written,
// while the fsync is still running (held here), and the function it
// returns waits for that fsync; a failed write is its own error (nothing
// to wait for), a failed fsync the waiting function's.
func TestAppendStaged(t *testing.T) {
	dir := t.TempDir()
	fs := &faultFS{FS: vfs.Default, err: errors.New("injected fault")}
	w := openWriter(t, Options{FS: fs, Dir: dir}, 1)
	gate := make(chan struct{})
	fs.syncGate.Store(&gate)
	wait, err := w.AppendStaged(testRecord(0))
	if err != nil {
		t.Fatal(err)
	}
	durable := make(chan error, 1)
	go func() { durable <- wait() }()
	select {
	case err := <-durable:
		t.Fatalf("the record was reported durable (%v) while its fsync was held", err)
	default:
	}
	// The record is written: a reader of the file sees it before the fsync.
	data, err := os.ReadFile(segmentPath(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, testRecord(0)) {
		t.Fatal("AppendStaged returned before its record was written")
	}
	gate <- struct{}{}
	if err := <-durable; err != nil {
		t.Fatalf("after the fsync: %v", err)
	}
	fs.syncGate.Store(nil)

	fs.failWrite.Store(true)
	if wait, err := w.AppendStaged(testRecord(1)); !errors.Is(err, fs.err) || wait != nil {
		t.Fatalf("a failed write: %v (wait %v), want the injected fault and nothing to wait for", err, wait != nil)
	}
	fs.failWrite.Store(false)
	fs.failSync.Store(true)
	wait, err = w.AppendStaged(testRecord(2))
	if err != nil {
		t.Fatalf("the write of a record whose fsync fails: %v", err)
	}
	if err := wait(); !errors.Is(err, fs.err) {
		t.Fatalf("a failed fsync: %v, want the injected fault", err)
	}
	w.Close()
	got, _ := replayAll(t, dir, 1)
	if len(got) < 1 || got[0].rec != string(testRecord(0)) {
		t.Fatalf("replayed %d records, want the durable one first", len(got))
	}
	for _, r := range got {
		if r.rec == string(testRecord(1)) {
			t.Fatal("the record whose write failed was replayed")
		}
	}
}

// TestRotationFailureIsTransient: a segment that cannot be created (no
// space) fails Rotate but not the writer, and leaves no file behind, so a
// later Rotate creates it.
func TestRotationFailureIsTransient(t *testing.T) {
	dir := t.TempDir()
	fs := &faultFS{FS: vfs.Default, err: syscall.ENOSPC}
	w := openWriter(t, Options{FS: fs, Dir: dir}, 1)
	defer w.Close()
	if err := w.Append([]byte("a")); err != nil {
		t.Fatal(err)
	}
	fs.failWrite.Store(true) // the header write fails
	if _, err := w.Rotate(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Rotate on a full disk: %v, want ENOSPC", err)
	}
	fs.failWrite.Store(false)
	if err := w.Err(); err != nil {
		t.Fatalf("writer failed for good: %v", err)
	}
	if _, err := os.Stat(segmentPath(dir, 2)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed rotation left segment 2 behind: %v", err)
	}
	if err := w.Append([]byte("b")); err != nil {
		t.Fatal(err)
	}
	if seg, err := w.Rotate(); err != nil || seg != 2 {
		t.Fatalf("Rotate after space came back: %d, %v", seg, err)
	}
}

func TestWriterFailure(t *testing.T) {
	cases := []struct {
		name string
		arm  func(fs *faultFS)
		// fail is the operation that hits the fault.
		fail func(w *Writer) error
	}{
		// A failed write that cannot be undone; TestWriteFailureIsUndone
		// covers the one that can.
		{"write", func(fs *faultFS) { fs.failWrite.Store(true); fs.failWriteAt.Store(true) }, func(w *Writer) error { return w.Append(testRecord(99)) }},
		{"fsync", func(fs *faultFS) { fs.failSync.Store(true) }, func(w *Writer) error { return w.Append(testRecord(99)) }},
		// A rotation whose new segment cannot be synced.
		{"rotation", func(fs *faultFS) { fs.failSync.Store(true) }, func(w *Writer) error { _, err := w.Rotate(); return err }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fs := &faultFS{FS: vfs.Default, err: errors.New("injected fault")}
			w := openWriter(t, Options{FS: fs, Dir: dir}, 1)
			for i := range 5 {
				if err := w.Append(testRecord(i)); err != nil {
					t.Fatal(err)
				}
			}
			tc.arm(fs)
			err := tc.fail(w)
			if !errors.Is(err, fs.err) {
				t.Fatalf("error %v does not wrap the injected fault", err)
			}
			// The fault is gone, but the writer stays failed.
			fs.failWrite.Store(false)
			fs.failWriteAt.Store(false)
			fs.failSync.Store(false)
			fs.failCreate.Store(false)
			if err := w.Append([]byte("later")); !errors.Is(err, fs.err) {
				t.Fatalf("Append after failure: %v, want the injected fault", err)
			}
			if _, err := w.Rotate(); !errors.Is(err, fs.err) {
				t.Fatalf("Rotate after failure: %v, want the injected fault", err)
			}
			if err := w.Sync(); !errors.Is(err, fs.err) {
				t.Fatalf("Sync after failure: %v, want the injected fault", err)
			}
			if err := w.Close(); !errors.Is(err, fs.err) {
				t.Fatalf("Close after failure: %v, want the injected fault", err)
			}
			// Acknowledged records survive; a half-written batch is a
			// torn tail, not corruption.
			got, res := replayAll(t, dir, 1)
			if len(got) < 5 {
				t.Fatalf("replayed %d records, want the 5 acknowledged ones", len(got))
			}
			for i := range 5 {
				if got[i].rec != string(testRecord(i)) {
					t.Fatalf("record %d damaged", i)
				}
			}
			t.Logf("replay after %s failure: %d records, truncated %d bytes", tc.name, len(got), res.TruncatedBytes)
		})
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, SegmentFileName(3)), []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		opts  Options
		first uint64
	}{
		{"segment exists", Options{FS: vfs.Default, Dir: dir}, 3},
		{"segment zero", Options{FS: vfs.Default, Dir: dir}, 0},
		{"no filesystem", Options{Dir: dir}, 1},
		{"no directory", Options{FS: vfs.Default}, 1},
		{"missing directory", Options{FS: vfs.Default, Dir: filepath.Join(dir, "missing")}, 1},
		{"unknown mode", Options{FS: vfs.Default, Dir: dir, Mode: 7}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, err := Open(tc.opts, tc.first)
			if err == nil {
				w.Close()
				t.Fatal("Open succeeded")
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(dir, SegmentFileName(3))); string(b) != "keep me" {
		t.Fatalf("Open overwrote an existing segment: %q", b)
	}
}

func TestClosedWriter(t *testing.T) {
	w := openWriter(t, Options{Dir: t.TempDir()}, 1)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Append([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Append: %v", err)
	}
	if _, err := w.Rotate(); !errors.Is(err, ErrClosed) {
		t.Errorf("Rotate: %v", err)
	}
	if err := w.Sync(); !errors.Is(err, ErrClosed) {
		t.Errorf("Sync: %v", err)
	}
	if err := w.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("Close: %v", err)
	}
}

func TestDeleteSegmentsBefore(t *testing.T) {
	dir := t.TempDir()
	w := openWriter(t, Options{Dir: dir}, 1)
	for i := range 5 {
		if err := w.Append(testRecord(i)); err != nil {
			t.Fatal(err)
		}
		if i < 4 {
			if _, err := w.Rotate(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "000001.wal.tmp")
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		before      uint64
		wantDeleted int
		wantLeft    []uint64
	}{
		{1, 0, []uint64{1, 2, 3, 4, 5}},
		{3, 2, []uint64{3, 4, 5}},
		{3, 0, []uint64{3, 4, 5}},
		{5, 2, []uint64{5}},
		{100, 1, nil},
	}
	for _, s := range steps {
		n, err := DeleteSegmentsBefore(vfs.Default, dir, s.before)
		if err != nil {
			t.Fatal(err)
		}
		left, err := ListSegments(vfs.Default, dir)
		if err != nil {
			t.Fatal(err)
		}
		if n != s.wantDeleted || !slices.Equal(left, s.wantLeft) {
			t.Fatalf("DeleteSegmentsBefore(%d) deleted %d leaving %v, want %d leaving %v", s.before, n, left, s.wantDeleted, s.wantLeft)
		}
		if s.before == 3 {
			if got, _ := replayAll(t, dir, 3); len(got) != 3 || got[0].rec != string(testRecord(2)) {
				t.Fatalf("replay after deleting 1 and 2: %v", got)
			}
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("a file that is not a segment was touched: %v", err)
	}
}
