package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/eventide/eventide/storage/internal/base"
	"github.com/eventide/eventide/storage/vfs"
)

// recycledLog is a version 3 log whose segment 3 is segment 1's file
// reused: segment 1 held 150 records, segment 2 one, and segment 3 holds
// three short new records followed by what is left of segment 1's
// records. unsealed is segment 3 as a crash leaves it, stale segment 1's
// bytes before the reuse.
type recycledLog struct {
	dir             string
	seg2, unsealed  []byte
	stale           []byte
	want            []string // records of segments 2 and 3, in order
	newRecordOffset []int64  // offsets of segment 3's records
}

const recycleTarget = 64 << 10

func writeRecycledLog(t *testing.T) recycledLog {
	t.Helper()
	dir := t.TempDir()
	w := openWriter(t, Options{Dir: dir, SegmentTargetSize: recycleTarget, RecycleSegments: 1}, 1)
	for i := range 150 {
		if err := w.Append(testRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Rotate(); err != nil {
		t.Fatal(err)
	}
	l := recycledLog{dir: dir, want: []string{"segment 2's record"}}
	if err := w.Append([]byte(l.want[0])); err != nil {
		t.Fatal(err)
	}
	if deleted, err := w.ReleaseSegmentsBefore(2); err != nil || deleted != 0 || w.RecycledSegments() != 1 {
		t.Fatalf("ReleaseSegmentsBefore(2) = %d, %v with %d kept; want segment 1 kept, none deleted", deleted, err, w.RecycledSegments())
	}
	var err error
	if l.stale, err = os.ReadFile(segmentPath(dir, 1)); err != nil {
		t.Fatal(err)
	}
	if seg, err := w.Rotate(); err != nil || seg != 3 {
		t.Fatalf("Rotate = %d, %v", seg, err)
	}
	if _, err := os.Stat(segmentPath(dir, 1)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("segment 1 still exists after its file was reused: %v", err)
	}
	off := int64(segmentHeaderSize)
	for i := range 3 {
		rec := []byte{'n', 'e', 'w', byte('0' + i)}
		if err := w.Append(rec); err != nil {
			t.Fatal(err)
		}
		l.want = append(l.want, string(rec))
		l.newRecordOffset = append(l.newRecordOffset, off)
		off += int64(recordHeaderSizeV3 + len(rec))
	}
	if l.unsealed, err = os.ReadFile(segmentPath(dir, 3)); err != nil {
		t.Fatal(err)
	}
	if l.seg2, err = os.ReadFile(segmentPath(dir, 2)); err != nil {
		t.Fatal(err)
	}
	if len(l.unsealed) != len(l.stale) {
		t.Fatalf("reused segment is %d bytes, segment 1 was %d", len(l.unsealed), len(l.stale))
	}
	// The point of the test: the bytes after the new records are segment
	// 1's records, not zeros.
	if !bytes.Equal(l.unsealed[off:off+4096], l.stale[off:off+4096]) || allZero(l.unsealed[off:off+4096]) {
		t.Fatal("the reused segment does not hold segment 1's records after the new ones")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return l
}

// install writes segment 2 and the given segment 3 into a new directory.
func (l recycledLog) install(t *testing.T, seg3 []byte) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(segmentPath(dir, 2), l.seg2, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(segmentPath(dir, 3), seg3, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func recordStrings(got []replayedRecord) []string {
	var out []string
	for _, r := range got {
		out = append(out, r.rec)
	}
	return out
}

// TestRecycledSegmentReplaysOnlyNewRecords: a segment written into a reused
// file, with an older generation's records after its own, replays exactly
// its own records, after a crash (not sealed) and after a clean Close.
func TestRecycledSegmentReplaysOnlyNewRecords(t *testing.T) {
	l := writeRecycledLog(t)
	for _, tc := range []struct {
		name string
		dir  string
	}{
		{"crash", l.install(t, l.unsealed)},
		{"clean close", l.dir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 2 { // the second replay sees what the first left
				got, res := replayAll(t, tc.dir, 2)
				checkFraming(t, got, res)
				if !slicesEqual(recordStrings(got), l.want) || res.TruncatedBytes != 0 {
					t.Fatalf("replayed %q (cut %d bytes), want %q", recordStrings(got), res.TruncatedBytes, l.want)
				}
			}
		})
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRecycledSegmentDamage: in a reused segment after a crash, a torn
// final record (its header written, the rest of its bytes still the old
// generation's) is cut and reported, a final record never written ends the
// log cleanly, and damage to an earlier record is corruption, never the end
// of the log.
func TestRecycledSegmentDamage(t *testing.T) {
	l := writeRecycledLog(t)
	last, mid := l.newRecordOffset[2], l.newRecordOffset[1]
	lastEnd := last + recordHeaderSizeV3 + 4
	withStale := func(from, to int64) []byte {
		b := bytes.Clone(l.unsealed)
		copy(b[from:to], l.stale[from:to])
		return b
	}
	flip := func(at int64) []byte {
		b := bytes.Clone(l.unsealed)
		b[at] ^= 0x40
		return b
	}
	for _, tc := range []struct {
		name    string
		seg3    []byte
		records int   // replayed records of l.want; -1: corruption
		cut     int64 // bytes reported cut
	}{
		{"torn final record", withStale(last+recordHeaderSizeV3, lastEnd), 3, lastEnd - last},
		{"final record never written", withStale(last, lastEnd), 3, 0},
		{"middle record payload", flip(mid + recordHeaderSizeV3 + 1), -1, 0},
		{"middle record segment number", flip(mid + recordSegmentOffset), -1, 0},
		{"middle record replaced by stale bytes", withStale(mid, mid+recordHeaderSizeV3+4), -1, 0},
		{"final record segment number", flip(last + recordSegmentOffset), -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := l.install(t, tc.seg3)
			if tc.records < 0 {
				_, err := Replay(vfs.Default, dir, 2, func(uint64, int64, []byte) error { return nil })
				if !errors.Is(err, base.ErrCorruption) || !bytes.Contains([]byte(err.Error()), []byte(filepath.Base(segmentPath(dir, 3)))) {
					t.Fatalf("replay: %v, want corruption naming segment 3", err)
				}
				return
			}
			got, res := replayAll(t, dir, 2)
			if !slicesEqual(recordStrings(got), l.want[:tc.records]) || res.TruncatedBytes != tc.cut {
				t.Fatalf("replayed %q, cut %d bytes; want %q, cut %d", recordStrings(got), res.TruncatedBytes, l.want[:tc.records], tc.cut)
			}
			again, res := replayAll(t, dir, 2)
			if !slicesEqual(recordStrings(again), l.want[:tc.records]) || res.TruncatedBytes != 0 {
				t.Fatalf("second replay: %q, cut %d bytes", recordStrings(again), res.TruncatedBytes)
			}
		})
	}
}

// TestRecycledSegmentAlignedStaleRecords: when the live records end exactly
// where an older generation's record starts, that record is intact under
// its own segment number and must still not be replayed, after a crash or
// a clean close.
func TestRecycledSegmentAlignedStaleRecords(t *testing.T) {
	const size = 4 << 10
	seg := appendSegmentHeader(nil, 5, size)
	seg = appendRecordV3(seg, []byte("live 1"), 5)
	seg = appendRecordV3(seg, []byte("live 2"), 5)
	end := len(seg)
	// The old generation's segment 2 wrote longer records from the same
	// offset: the one starting at end survives whole.
	old := appendRecordV3(nil, bytes.Repeat([]byte("o"), end-segmentHeaderSize-recordHeaderSizeV3), 2)
	old = appendRecordV3(old, []byte("stale record of segment 2"), 2)
	old = appendRecordV3(old, []byte("another stale record"), 2)
	seg = append(seg, old[end-segmentHeaderSize:]...)
	seg = append(seg, make([]byte, size-len(seg))...)
	sealed := bytes.Clone(seg)
	binary.LittleEndian.PutUint64(sealed[segmentSealedOffset:], uint64(end))
	for name, data := range map[string][]byte{"crash": seg, "clean close": sealed} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(segmentPath(dir, 5), data, 0o644); err != nil {
				t.Fatal(err)
			}
			got, res := replayAll(t, dir, 1)
			if !slicesEqual(recordStrings(got), []string{"live 1", "live 2"}) || res.TruncatedBytes != 0 {
				t.Fatalf("replayed %q, cut %d bytes; want the two live records", recordStrings(got), res.TruncatedBytes)
			}
		})
	}
}
