package wal

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"

	"github.com/eventide/eventide/storage/vfs"
)

// testLogV2 is a version 2 log written by a real Writer with a small
// preallocation: segment 1 holds records 0..2, segment 2 (the last)
// records 3..6. unsealed is segment 2 as a crash leaves it (read before
// Close), sealed as a clean Close leaves it.
type testLogV2 struct {
	seg1, unsealed, sealed []byte
	records                []replayedRecord
}

const testPrealloc = 4 << 10

func writeTestLogV2(t *testing.T) testLogV2 {
	t.Helper()
	dir := t.TempDir()
	w := openWriter(t, Options{Dir: dir, SegmentTargetSize: testPrealloc, format: formatVersion2}, 1)
	var l testLogV2
	for i := range 7 {
		if i == 3 {
			if _, err := w.Rotate(); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Append(testRecord(i + 40)); err != nil {
			t.Fatal(err)
		}
	}
	read := func(num uint64) []byte {
		b, err := os.ReadFile(segmentPath(dir, num))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	l.unsealed = read(2)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	l.seg1, l.sealed = read(1), read(2)
	l.records, _ = replayAll(t, dir, 1)
	if len(l.records) != 7 || len(l.unsealed) != testPrealloc || len(l.sealed) != testPrealloc {
		t.Fatalf("test log: %d records, segment sizes %d and %d, want 7 and %d", len(l.records), len(l.unsealed), len(l.sealed), testPrealloc)
	}
	if !bytes.Equal(l.sealed[segmentSealedOffset+8:], l.unsealed[segmentSealedOffset+8:]) || bytes.Equal(l.sealed, l.unsealed) {
		t.Fatal("Close changed more than the seal, or did not seal")
	}
	return l
}

func (l testLogV2) install(t *testing.T, last []byte) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(segmentPath(dir, 1), l.seg1, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(segmentPath(dir, 2), last, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestTruncationIsCorruption cuts the last segment at every offset: before
// version 2 each cut was taken for a torn tail and the records after it were
// silently dropped. Now only a cut inside the header, or right after it (a
// creation interrupted before its first fsync), is repaired; every other
// cut is reported as corruption and the file is left as it was.
func TestTruncationIsCorruption(t *testing.T) {
	l := writeTestLogV2(t)
	for _, last := range [][]byte{l.unsealed, l.sealed} {
		sealed := !bytes.Equal(last, l.unsealed)
		finalEnd := l.records[len(l.records)-1].offset + int64(recordHeaderSize+len(l.records[len(l.records)-1].rec))
		for cut := 0; cut < len(last); cut++ {
			if cut > int(finalEnd)+16 && cut%61 != 0 {
				continue // past the records, a sample of the zeros will do
			}
			data := last[:cut]
			dir := l.install(t, data)
			// A cut into the seal shows the file was complete once.
			if cut <= segmentSealedOffset || cut <= segmentHeaderSize && !sealed {
				got, res := replayAll(t, dir, 1)
				if len(got) != 3 || res.TruncatedBytes != 0 && cut == segmentHeaderSize {
					t.Fatalf("cut at %d: %d records, %+v", cut, len(got), res)
				}
				continue
			}
			if err := checkCorruption(dir, SegmentFileName(2), -1); err != nil {
				t.Fatalf("cut at %d of %d: %v", cut, len(last), err)
			}
		}
	}
}

func TestTornTailV2(t *testing.T) {
	l := writeTestLogV2(t)
	final := l.records[len(l.records)-1]
	finalOff := int(final.offset)
	finalEnd := finalOff + recordHeaderSize + len(final.rec)
	middle := l.records[4]
	edit := func(base []byte, f func(b []byte)) []byte {
		b := bytes.Clone(base)
		f(b)
		return b
	}
	flip := func(i int) func([]byte) { return func(b []byte) { b[i] ^= 0x5a } }
	all, allButFinal := len(l.records), len(l.records)-1
	cases := []struct {
		name        string
		data        []byte
		wantRecords int // -1: corruption
		wantCut     int64
	}{
		{"clean, unsealed", l.unsealed, all, 0},
		{"clean, sealed", l.sealed, all, 0},
		// A torn write leaves a prefix of the final record, then zeros.
		{"final record torn", edit(l.unsealed, func(b []byte) { clear(b[finalOff+13 : finalEnd]) }), allButFinal, 13},
		// Only the written (non-zero) bytes are cut: here the length's
		// low byte.
		{"final record header torn", edit(l.unsealed, func(b []byte) { clear(b[finalOff+3 : finalEnd]) }), allButFinal, 1},
		// Indistinguishable from a torn write in a segment that was not
		// closed: cut, and reported.
		{"final record flipped, unsealed", edit(l.unsealed, flip(finalEnd-1)), allButFinal, int64(finalEnd - finalOff)},
		// After a clean close nothing may be cut.
		{"final record flipped, sealed", edit(l.sealed, flip(finalEnd-1)), -1, 0},
		{"final record torn, sealed", edit(l.sealed, func(b []byte) { clear(b[finalOff+13 : finalEnd]) }), -1, 0},
		{"final record zeroed, sealed", edit(l.sealed, func(b []byte) { clear(b[finalOff:finalEnd]) }), -1, 0},
		// The cut is bounded to one record followed by zeros.
		{"non-zero byte after the damaged final record", edit(l.unsealed, func(b []byte) { b[finalEnd-1] ^= 0x5a; b[finalEnd+100] = 1 }), -1, 0},
		{"non-zero byte in the preallocation", edit(l.unsealed, func(b []byte) { b[len(b)-1] = 1 }), -1, 0},
		{"final record length runs into the preallocation", edit(l.unsealed, func(b []byte) {
			binary.LittleEndian.PutUint32(b[finalOff:], uint32(testPrealloc))
		}), allButFinal, int64(finalEnd - finalOff)},
		{"final record absurd length", edit(l.unsealed, func(b []byte) {
			binary.LittleEndian.PutUint32(b[finalOff:], MaxRecordSize+1)
		}), -1, 0},
		{"middle record flipped", edit(l.unsealed, flip(int(middle.offset)+recordHeaderSize+2)), -1, 0},
		{"middle record zeroed", edit(l.unsealed, func(b []byte) { clear(b[middle.offset : int(middle.offset)+recordHeaderSize+len(middle.rec)]) }), -1, 0},
		{"preallocated size flipped", edit(l.unsealed, flip(segmentPreallocOffset+1)), -1, 0},
		{"seal flipped", edit(l.sealed, flip(segmentSealedOffset)), -1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := l.install(t, tc.data)
			if tc.wantRecords < 0 {
				if err := checkCorruption(dir, SegmentFileName(2), -1); err != nil {
					t.Fatal(err)
				}
				return
			}
			got, res := replayAll(t, dir, 1)
			if len(got) != tc.wantRecords || res.TruncatedBytes != tc.wantCut {
				t.Fatalf("%d records, cut %d bytes; want %d records, cut %d", len(got), res.TruncatedBytes, tc.wantRecords, tc.wantCut)
			}
			for i, r := range got {
				if r != l.records[i] {
					t.Fatalf("record %d is %v, want %v", i, r, l.records[i])
				}
			}
			if tc.wantCut > 0 && (res.TruncatedSegment != 2 || res.TruncatedOffset != int64(finalOff) || res.TruncatedReason == "") {
				t.Fatalf("cut reported as %+v, want segment 2 at offset %d with a reason", res, finalOff)
			}
			if size := fileSize(t, segmentPath(dir, 2)); size != testPrealloc {
				t.Fatalf("segment is %d bytes after replay, want its preallocated %d", size, testPrealloc)
			}
			// The repair is durable and complete: a second replay, with
			// segment 2 no longer the last, is clean.
			if err := os.WriteFile(segmentPath(dir, 3), appendSegmentHeaderV1(nil, 3), 0o644); err != nil {
				t.Fatal(err)
			}
			if again, res := replayAll(t, dir, 1); len(again) != tc.wantRecords || res.TruncatedBytes != 0 {
				t.Fatalf("second replay: %d records, cut %d", len(again), res.TruncatedBytes)
			}
		})
	}
}

// TestInterruptedCreation: a crash between writing a new segment's header
// and syncing its preallocated size leaves a short file with nothing past
// the header. Replay restores the size, so the segment replays cleanly once
// it is no longer the last.
func TestInterruptedCreation(t *testing.T) {
	l := writeTestLogV2(t)
	dir := l.install(t, l.unsealed[:segmentHeaderSize+10])
	clear(l.unsealed[segmentHeaderSize : segmentHeaderSize+10]) // not written
	if err := os.WriteFile(segmentPath(dir, 2), append(bytes.Clone(l.unsealed[:segmentHeaderSize]), make([]byte, 10)...), 0o644); err != nil {
		t.Fatal(err)
	}
	got, _ := replayAll(t, dir, 1)
	if len(got) != 3 {
		t.Fatalf("%d records, want the 3 of segment 1", len(got))
	}
	if size := fileSize(t, segmentPath(dir, 2)); size != testPrealloc {
		t.Fatalf("segment is %d bytes after replay, want %d", size, testPrealloc)
	}
	if err := os.WriteFile(segmentPath(dir, 3), appendSegmentHeaderV1(nil, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	if again, _ := replayAll(t, dir, 1); len(again) != 3 {
		t.Fatalf("second replay: %d records", len(again))
	}
}

// TestTornTailRepairIsSynced: every repair Replay makes to the last segment
// (truncating a version 1 torn tail, zeroing a version 2 one, restoring the
// size of an interrupted creation) is fsynced before Replay returns, or a
// power loss right after recovery could bring the torn bytes back behind
// records appended later. The sync-counting faultFS sees files opened by
// Open and OpenReadWrite, not only Create.
func TestTornTailRepairIsSynced(t *testing.T) {
	v1 := writeTestLog(t)
	v2 := writeTestLogV2(t)
	final := v2.records[len(v2.records)-1]
	finalOff := int(final.offset)
	cases := []struct {
		name    string
		install func(t *testing.T) string
	}{
		{"version 1 truncation", func(t *testing.T) string {
			last := v1.segs[2]
			return v1.install(t, 2, last[:len(last)-3])
		}},
		{"version 2 zeroing", func(t *testing.T) string {
			b := bytes.Clone(v2.unsealed)
			clear(b[finalOff+13:])
			return v2.install(t, b)
		}},
		{"version 2 interrupted creation", func(t *testing.T) string {
			return v2.install(t, bytes.Clone(v2.unsealed[:segmentHeaderSize]))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.install(t)
			fs := &faultFS{FS: vfs.Default}
			var n int
			res, err := Replay(fs, dir, 1, func(uint64, int64, []byte) error { n++; return nil })
			if err != nil {
				t.Fatal(err)
			}
			if res.TruncatedBytes == 0 && fileSize(t, segmentPath(dir, 2)) != testPrealloc {
				t.Fatalf("nothing was repaired: %+v", res)
			}
			if got := fs.syncCount(segmentPath(dir, 2)); got == 0 {
				t.Fatalf("the repair of %s was not fsynced (%d records, %+v)", SegmentFileName(2), n, res)
			}
		})
	}
}
