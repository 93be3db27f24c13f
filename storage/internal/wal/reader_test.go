package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eventide/eventide/storage/internal/base"
	"github.com/eventide/eventide/storage/vfs"
)

// testLog is a small version 1 log: written by a real Writer (segment 1
// holds records 0..2 and segment 2, the last, records 3..6), then rewritten
// with version 1 headers and without the preallocated zeros, so these tests
// keep checking that old segments replay under their old rules. Its bytes
// are kept so each case can start from a pristine copy.
type testLog struct {
	segs    map[uint64][]byte
	records []replayedRecord // as replayed from the pristine log
}

func writeTestLog(t *testing.T) testLog {
	t.Helper()
	dir := t.TempDir()
	w := openWriter(t, Options{Dir: dir, SegmentTargetSize: 4 << 10, format: formatVersion2}, 1)
	for i := range 7 {
		if i == 3 {
			if _, err := w.Rotate(); err != nil {
				t.Fatal(err)
			}
		}
		// Short records keep the every-offset tests fast.
		rec := fmt.Appendf(nil, "record %d ", i)
		for len(rec) < 20+6*i {
			rec = append(rec, byte('a'+len(rec)%26))
		}
		if err := w.Append(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	l := testLog{segs: map[uint64][]byte{}}
	v1dir := t.TempDir()
	for _, num := range []uint64{1, 2} {
		b, err := os.ReadFile(segmentPath(dir, num))
		if err != nil {
			t.Fatal(err)
		}
		v1 := appendSegmentHeaderV1(nil, num)
		for off := segmentHeaderSize; ; {
			_, n, err := decodeRecord(b[off:])
			if err != nil {
				break
			}
			v1 = append(v1, b[off:off+n]...)
			off += n
		}
		l.segs[num] = v1
		if err := os.WriteFile(segmentPath(v1dir, num), v1, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l.records, _ = replayAll(t, v1dir, 1)
	return l
}

// install writes the log into a fresh directory, with segment num replaced
// by data, and returns the directory.
func (l testLog) install(t *testing.T, num uint64, data []byte) string {
	t.Helper()
	dir := t.TempDir()
	l.installInto(t, dir, num, data)
	return dir
}

func (l testLog) installInto(t *testing.T, dir string, num uint64, data []byte) {
	t.Helper()
	for n, b := range l.segs {
		if n == num {
			b = data
		}
		if err := os.WriteFile(segmentPath(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// recordsIn returns the replayed records of segment num.
func (l testLog) recordsIn(num uint64) []replayedRecord {
	var out []replayedRecord
	for _, r := range l.records {
		if r.segment == num {
			out = append(out, r)
		}
	}
	return out
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestTornTailEveryOffset cuts the last segment at every byte offset, as a
// crash during its writes could: replay keeps every whole record before the
// cut, truncates the rest, and a second replay is clean.
func TestTornTailEveryOffset(t *testing.T) {
	l := writeTestLog(t)
	last := l.segs[2]
	lastRecs := l.recordsIn(2)
	for cut := 0; cut <= len(last); cut++ {
		dir := l.install(t, 2, last[:cut])
		// What survives: whole records before the cut. A cut inside the
		// header leaves an empty segment.
		wantRecords := len(l.recordsIn(1))
		wantSize := int64(0)
		if cut >= segmentHeaderSizeV1 {
			wantSize = segmentHeaderSizeV1
		}
		for _, r := range lastRecs {
			if end := r.offset + int64(recordHeaderSize+len(r.rec)); end <= int64(cut) {
				wantRecords++
				wantSize = end
			}
		}
		got, res := replayAll(t, dir, 1)
		if len(got) != wantRecords || res.TruncatedBytes != int64(cut)-wantSize {
			t.Fatalf("cut at %d: %d records, truncated %d; want %d records, truncated %d",
				cut, len(got), res.TruncatedBytes, wantRecords, int64(cut)-wantSize)
		}
		if res.TruncatedBytes > 0 && res.TruncatedSegment != 2 {
			t.Fatalf("cut at %d: truncated segment %d, want 2", cut, res.TruncatedSegment)
		}
		for i, r := range got {
			if r != l.records[i] {
				t.Fatalf("cut at %d: record %d is %v, want %v", cut, i, r, l.records[i])
			}
		}
		if size := fileSize(t, segmentPath(dir, 2)); size != wantSize {
			t.Fatalf("cut at %d: segment is %d bytes after replay, want %d", cut, size, wantSize)
		}
		again, res := replayAll(t, dir, 1)
		if len(again) != wantRecords || res.TruncatedBytes != 0 {
			t.Fatalf("cut at %d: second replay saw %d records and truncated %d", cut, len(again), res.TruncatedBytes)
		}
	}
}

func TestTornTailCases(t *testing.T) {
	l := writeTestLog(t)
	last := l.segs[2]
	lastRecs := l.recordsIn(2)
	final := lastRecs[len(lastRecs)-1]
	finalOff := int(final.offset)
	zeros := func(n int) []byte { return make([]byte, n) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	flip := func(i int, x byte) []byte {
		b := bytes.Clone(last)
		b[i] ^= x
		return b
	}
	setLength := func(n uint32) []byte {
		b := bytes.Clone(last)
		binary.LittleEndian.PutUint32(b[finalOff:], n)
		return b
	}
	all, allButFinal := len(l.records), len(l.records)-1
	cases := []struct {
		name        string
		data        []byte
		wantRecords int
		wantSize    int // of the segment after replay
	}{
		{"clean", last, all, len(last)},
		{"zeros after the final record", cat(last, zeros(4096)), all, len(last)},
		{"final record cut and zero-filled", cat(last[:finalOff+5], zeros(len(last)-finalOff-5)), allButFinal, finalOff},
		{"final record zeroed", cat(last[:finalOff], zeros(len(last)-finalOff)), allButFinal, finalOff},
		{"final record zeroed and more zeros", cat(last[:finalOff], zeros(len(last)-finalOff+100)), allButFinal, finalOff},
		{"final record checksum fails at EOF", flip(len(last)-1, 0x5a), allButFinal, finalOff},
		{"final record checksum fails before zeros", cat(flip(len(last)-1, 0x5a), zeros(512)), allButFinal, finalOff},
		{"final record checksum field damaged", flip(finalOff+recordChecksumOffset, 1), allButFinal, finalOff},
		{"final record length runs past EOF", setLength(1 << 20), allButFinal, finalOff},
		{"zero-filled segment", zeros(100), len(l.recordsIn(1)), 0},
		{"partial segment header", last[:7], len(l.recordsIn(1)), 0},
		{"empty segment", nil, len(l.recordsIn(1)), 0},
		{"header only", last[:segmentHeaderSizeV1], len(l.recordsIn(1)), segmentHeaderSizeV1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := l.install(t, 2, tc.data)
			got, res := replayAll(t, dir, 1)
			if len(got) != tc.wantRecords {
				t.Fatalf("%d records, want %d", len(got), tc.wantRecords)
			}
			for i, r := range got {
				if r != l.records[i] {
					t.Fatalf("record %d is %v, want %v", i, r, l.records[i])
				}
			}
			if want := int64(len(tc.data) - tc.wantSize); res.TruncatedBytes != want {
				t.Fatalf("truncated %d bytes, want %d", res.TruncatedBytes, want)
			}
			if size := fileSize(t, segmentPath(dir, 2)); size != int64(tc.wantSize) {
				t.Fatalf("segment is %d bytes after replay, want %d", size, tc.wantSize)
			}
			if again, res := replayAll(t, dir, 1); len(again) != tc.wantRecords || res.TruncatedBytes != 0 {
				t.Fatalf("second replay: %d records, truncated %d", len(again), res.TruncatedBytes)
			}
		})
	}
}

// expectCorruption replays dir and checks the error wraps base.ErrCorruption,
// names the file, and (when wantOffset >= 0) the offset; and that replay
// repaired nothing.
func expectCorruption(t *testing.T, dir string, file string, wantOffset int64) {
	t.Helper()
	if err := checkCorruption(dir, file, wantOffset); err != nil {
		t.Fatal(err)
	}
}

func checkCorruption(dir string, file string, wantOffset int64) error {
	before := map[string][]byte{}
	names, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n.Name()))
		if err != nil {
			return err
		}
		before[n.Name()] = b
	}
	_, err = Replay(vfs.Default, dir, 1, func(uint64, int64, []byte) error { return nil })
	if !errors.Is(err, base.ErrCorruption) {
		return fmt.Errorf("replay error %v does not wrap base.ErrCorruption", err)
	}
	if !strings.Contains(err.Error(), file) {
		return fmt.Errorf("error does not name %s: %v", file, err)
	}
	want := "offset "
	if wantOffset >= 0 {
		want = fmt.Sprintf("offset %d", wantOffset)
	}
	if !strings.Contains(err.Error(), want) {
		return fmt.Errorf("error does not say %q: %v", want, err)
	}
	for name, b := range before {
		if now, _ := os.ReadFile(filepath.Join(dir, name)); !bytes.Equal(now, b) {
			return fmt.Errorf("replay changed %s although it reported corruption", name)
		}
	}
	return nil
}

func TestCorruption(t *testing.T) {
	l := writeTestLog(t)
	lastRecs := l.recordsIn(2)
	middle := lastRecs[1] // neither the first nor the final record of the last segment
	with := func(num uint64, edit func(b []byte) []byte) func() (uint64, []byte) {
		return func() (uint64, []byte) { return num, edit(bytes.Clone(l.segs[num])) }
	}
	xorAt := func(i int, x byte) func(b []byte) []byte {
		return func(b []byte) []byte { b[i] ^= x; return b }
	}
	mid := int(middle.offset)
	cases := []struct {
		name       string
		edit       func() (uint64, []byte)
		wantOffset int64
	}{
		{"middle record payload", with(2, xorAt(mid+recordHeaderSize+3, 0x5a)), middle.offset},
		{"middle record checksum", with(2, xorAt(mid+recordChecksumOffset, 0x01)), middle.offset},
		// Each byte of the length field: the record then ends early, runs
		// to or past EOF, or claims an absurd length. None may pass for a
		// torn tail while intact records follow.
		{"middle record length byte 0", with(2, xorAt(mid, 0x5a)), middle.offset},
		{"middle record length byte 1", with(2, xorAt(mid+1, 0x5a)), middle.offset},
		{"middle record length byte 2", with(2, xorAt(mid+2, 0x5a)), middle.offset},
		{"middle record length byte 3", with(2, xorAt(mid+3, 0x5a)), middle.offset},
		{"middle record length to exactly EOF", with(2, func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[mid:], uint32(len(b)-mid-recordHeaderSize))
			return b
		}), middle.offset},
		{"final record absurd length", with(2, func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[lastRecs[len(lastRecs)-1].offset:], MaxRecordSize+1)
			return b
		}), lastRecs[len(lastRecs)-1].offset},
		{"final record length shortened", with(2, func(b []byte) []byte {
			off := lastRecs[len(lastRecs)-1].offset
			binary.LittleEndian.PutUint32(b[off:], binary.LittleEndian.Uint32(b[off:])-3)
			return b
		}), lastRecs[len(lastRecs)-1].offset},
		{"bad magic", with(2, xorAt(0, 0x20)), 0},
		{"bad format version", with(2, xorAt(segmentVersionOffset, 0x02)), 0},
		{"reserved header byte", with(2, xorAt(segmentReservedOffset, 0x01)), 0},
		{"last segment shorter than its header, not a header prefix", with(2, func(b []byte) []byte { return []byte("garbage") }), 0},
		{"wrong segment number (renamed file)", func() (uint64, []byte) { return 2, bytes.Clone(l.segs[1]) }, 0},
		{"non-last segment cut inside a record", with(1, func(b []byte) []byte { return b[:len(b)-3] }), l.recordsIn(1)[2].offset},
		{"non-last segment with a zero tail", with(1, func(b []byte) []byte { return append(b, make([]byte, 64)...) }), int64(len(l.segs[1]))},
		{"non-last segment zero-filled", with(1, func(b []byte) []byte { return make([]byte, len(b)) }), 0},
		{"non-last segment with a partial header", with(1, func(b []byte) []byte { return b[:9] }), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			num, data := tc.edit()
			dir := l.install(t, num, data)
			expectCorruption(t, dir, SegmentFileName(num), tc.wantOffset)
		})
	}
}

// TestCorruptionAnywhere flips every byte, three ways, of every segment
// except the last, and of every record of the last segment except its final
// one: each must be reported as corruption naming the file and an offset,
// never replayed or taken for a torn tail. It drives the segment reader on
// bytes; TestCorruption covers the same through files and Replay.
func TestCorruptionAnywhere(t *testing.T) {
	l := writeTestLog(t)
	lastRecs := l.recordsIn(2)
	spans := []struct {
		num  uint64
		last bool
		end  int // flip bytes [0, end)
	}{
		{1, false, len(l.segs[1])},
		{2, true, int(lastRecs[len(lastRecs)-1].offset)},
	}
	for _, s := range spans {
		path := "/wal/" + SegmentFileName(s.num)
		for i := range s.end {
			for _, x := range []byte{0x01, 0x5a, 0xff} {
				b := bytes.Clone(l.segs[s.num])
				b[i] ^= x
				r := newSegmentReader(bytes.NewReader(b), int64(len(b)), path, s.num, s.last)
				var err error
				for err == nil {
					_, _, err = r.next()
				}
				if !errors.Is(err, base.ErrCorruption) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "offset ") {
					t.Fatalf("segment %d byte %d xor %#x: got %v, want corruption naming %s and an offset", s.num, i, x, err, path)
				}
			}
		}
	}
}

func TestReplaySegments(t *testing.T) {
	l := writeTestLog(t)
	t.Run("missing segment", func(t *testing.T) {
		dir := l.install(t, 0, nil)
		if err := os.WriteFile(segmentPath(dir, 4), l.segs[2][:segmentHeaderSizeV1], 0o644); err != nil {
			t.Fatal(err)
		}
		expectCorruption(t, dir, SegmentFileName(3), 0)
	})
	t.Run("older segments are not read", func(t *testing.T) {
		dir := l.install(t, 1, []byte("damaged, but below minSegment"))
		got, res := replayAll(t, dir, 2)
		if len(got) != len(l.recordsIn(2)) || res.Segments[0] != 2 {
			t.Fatalf("replay from 2: %d records in %v", len(got), res.Segments)
		}
	})
	t.Run("no segments", func(t *testing.T) {
		got, res := replayAll(t, t.TempDir(), 1)
		if len(got) != 0 || res.LastSegment != 0 || len(res.Segments) != 0 {
			t.Fatalf("empty directory: %v %+v", got, res)
		}
	})
	t.Run("empty non-last segment", func(t *testing.T) {
		// A crash while creating a segment can leave it empty; the
		// writer opened after recovery then starts the next one.
		dir := l.install(t, 0, nil)
		if err := os.WriteFile(segmentPath(dir, 3), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(segmentPath(dir, 4), appendRecord(appendSegmentHeaderV1(nil, 4), []byte("after")), 0o644); err != nil {
			t.Fatal(err)
		}
		got, res := replayAll(t, dir, 1)
		if len(got) != len(l.records)+1 || got[len(got)-1] != (replayedRecord{4, segmentHeaderSizeV1, "after"}) || res.LastSegment != 4 {
			t.Fatalf("replayed %v, %+v", got, res)
		}
	})
	t.Run("callback error", func(t *testing.T) {
		dir := l.install(t, 0, nil)
		stop := errors.New("stop here")
		n := 0
		res, err := Replay(vfs.Default, dir, 1, func(seg uint64, off int64, rec []byte) error {
			if n == 4 {
				return stop
			}
			n++
			return nil
		})
		if !errors.Is(err, stop) || !strings.Contains(err.Error(), SegmentFileName(2)) || res.Records != 4 {
			t.Fatalf("replay returned %v after %d records", err, res.Records)
		}
	})
}
