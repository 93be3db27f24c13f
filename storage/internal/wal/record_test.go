package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/eventide/eventide/storage/internal/base"
)

func TestDecodeRecord(t *testing.T) {
	valid := appendRecord(nil, []byte("hello"))
	withByte := func(i int, b byte) []byte {
		out := bytes.Clone(valid)
		out[i] = b
		return out
	}
	absurd := bytes.Clone(valid)
	binary.LittleEndian.PutUint32(absurd, MaxRecordSize+1)
	cases := []struct {
		name    string
		buf     []byte
		payload string
		n       int
		err     error
	}{
		{"empty record", appendRecord(nil, nil), "", recordHeaderSize, nil},
		{"small record", valid, "hello", len(valid), nil},
		{"trailing bytes ignored", append(bytes.Clone(valid), 1, 2, 3), "hello", len(valid), nil},
		{"nothing", nil, "", 0, errIncompleteRecord},
		{"partial header", valid[:recordHeaderSize-1], "", 0, errIncompleteRecord},
		{"partial payload", valid[:len(valid)-1], "", 0, errIncompleteRecord},
		{"zero header", make([]byte, 64), "", 0, errRecordChecksum},
		{"flipped payload", withByte(len(valid)-1, 'O'), "", 0, errRecordChecksum},
		{"flipped checksum", withByte(recordChecksumOffset, valid[recordChecksumOffset]^1), "", 0, errRecordChecksum},
		{"length above limit", absurd, "", 0, errRecordLength},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			payload, n, err := decodeRecord(tc.buf)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			if string(payload) != tc.payload || n != tc.n {
				t.Fatalf("got (%q, %d), want (%q, %d)", payload, n, tc.payload, tc.n)
			}
		})
	}
	if errors.Is(errIncompleteRecord, base.ErrCorruption) {
		t.Error("an incomplete record must not be corruption by itself: it is how a torn tail looks")
	}
	for _, err := range []error{errRecordChecksum, errRecordLength} {
		if !errors.Is(err, base.ErrCorruption) {
			t.Errorf("%v does not wrap base.ErrCorruption", err)
		}
	}
}

func TestSegmentFileName(t *testing.T) {
	cases := []struct {
		name string
		num  uint64
		ok   bool
	}{
		{"000001.wal", 1, true},
		{"000042.wal", 42, true},
		{"1234567.wal", 1234567, true},
		{"18446744073709551615.wal", 1<<64 - 1, true},
		{"42.wal", 0, false},         // not the canonical spelling of 42
		{"0000042.wal", 0, false},    // ditto
		{"000042.wal.tmp", 0, false}, // not a segment
		{"000042.sst", 0, false},
		{"+00042.wal", 0, false},
		{"-00042.wal", 0, false},
		{".wal", 0, false},
		{"18446744073709551616.wal", 0, false}, // overflows uint64
	}
	for _, tc := range cases {
		num, ok := ParseSegmentFileName(tc.name)
		if num != tc.num || ok != tc.ok {
			t.Errorf("ParseSegmentFileName(%q) = (%d, %v), want (%d, %v)", tc.name, num, ok, tc.num, tc.ok)
		}
		if tc.ok && SegmentFileName(tc.num) != tc.name {
			t.Errorf("SegmentFileName(%d) = %q, want %q", tc.num, SegmentFileName(tc.num), tc.name)
		}
	}
}

// FuzzDecodeRecord: any input decodes to a record that re-encodes to the
// same bytes, or to an incomplete-record or corruption error; never a panic.
func FuzzDecodeRecord(f *testing.F) {
	// The seed corpus is in testdata/fuzz/FuzzDecodeRecord.
	f.Fuzz(func(t *testing.T, buf []byte) {
		payload, n, err := decodeRecord(buf)
		if err != nil {
			if err != errIncompleteRecord && !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if n > len(buf) || n != recordHeaderSize+len(payload) {
			t.Fatalf("n = %d with payload of %d bytes and input of %d", n, len(payload), len(buf))
		}
		if !bytes.Equal(appendRecord(nil, payload), buf[:n]) {
			t.Fatalf("record does not re-encode to its own bytes")
		}
	})
}

// FuzzDecodeRecordV3: any bytes decode, for any segment number, as a
// record of that segment that re-encodes to exactly its own bytes, or
// fail with one of the documented kinds; never a panic.
func FuzzDecodeRecordV3(f *testing.F) {
	valid := appendRecordV3(nil, []byte("hello"), 7)
	f.Add(valid, uint64(7))
	f.Add(valid, uint64(6)) // a stale record of segment 7 read in segment 6
	f.Add(appendRecordV3(nil, nil, 1), uint64(1))
	f.Add(valid[:recordHeaderSizeV3-1], uint64(7))
	f.Add(valid[:len(valid)-1], uint64(7))
	f.Add(make([]byte, recordHeaderSizeV3), uint64(1))
	damaged := bytes.Clone(valid)
	damaged[recordSegmentOffset] ^= 1
	f.Add(damaged, uint64(7))
	f.Add(damaged, uint64(6))
	f.Fuzz(func(t *testing.T, buf []byte, num uint64) {
		payload, n, err := decodeRecordV3(buf, num)
		if err != nil {
			if err != errIncompleteRecord && err != errOtherSegment && !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if n > len(buf) || n != recordHeaderSizeV3+len(payload) {
			t.Fatalf("n = %d with payload of %d bytes and input of %d", n, len(payload), len(buf))
		}
		if !bytes.Equal(appendRecordV3(nil, payload, num), buf[:n]) {
			t.Fatalf("record does not re-encode to its own bytes")
		}
		if num != num+1 {
			if _, _, err := decodeRecordV3(buf, num+1); err == nil {
				t.Fatalf("record of segment %d also decodes as a record of segment %d", num, num+1)
			}
		}
	})
}

// FuzzSegmentReader: any file content replays as records followed by a clean
// end, a torn tail (last segment only) or a corruption error naming the file;
// never a panic. Repairing a torn tail (cutting it from a version 1 segment,
// zeroing it in a version 2 one) leaves a segment that replays cleanly with
// the same records, which is what makes a second Replay clean.
func FuzzSegmentReader(f *testing.F) {
	// The version 1 seed corpus is in testdata/fuzz/FuzzSegmentReader; the
	// version 2 seeds are built here from the encoders.
	v2 := appendRecord(appendRecord(appendSegmentHeader(nil, 7, 256), []byte("first record")), []byte("second"))
	v2 = append(v2, make([]byte, 256-len(v2))...)
	sealed := bytes.Clone(v2)
	binary.LittleEndian.PutUint64(sealed[segmentSealedOffset:], uint64(segmentHeaderSize+2*recordHeaderSize+len("first record")+len("second")))
	torn := bytes.Clone(v2)
	clear(torn[segmentHeaderSize+recordHeaderSize+len("first record")+5:])
	// Version 3: a reused segment 7 with records of segment 3 after its
	// own, sealed, and with a torn final record.
	v3 := appendRecordV3(appendRecordV3(appendSegmentHeaderVersion(nil, formatVersion3, 7, 512), []byte("first record"), 7), []byte("second"), 7)
	v3End := len(v3)
	v3 = appendRecordV3(v3, []byte("stale record of an older segment"), 3)
	v3 = append(v3, bytes.Repeat([]byte{0xa5}, 512-len(v3))...)
	v3sealed := bytes.Clone(v3)
	binary.LittleEndian.PutUint64(v3sealed[segmentSealedOffset:], uint64(v3End))
	v3torn := bytes.Clone(v3)
	copy(v3torn[v3End-3:], "xyz")
	for _, last := range []bool{true, false} {
		f.Add(v3, last)
		f.Add(v3sealed, last)
		f.Add(v3torn, last)
		f.Add(v2, last)
		f.Add(sealed, last)
		f.Add(torn, last)
		f.Add(v2[:100], last)
		f.Add(v2[:segmentHeaderSize+3], last)
	}
	const path = "/fuzz/000007.wal"
	read := func(t *testing.T, data []byte, last bool) (recs [][]byte, end error) {
		r := newSegmentReader(bytes.NewReader(data), int64(len(data)), path, 7, last)
		prev := int64(-1)
		for {
			rec, off, err := r.next()
			if err != nil {
				return recs, err
			}
			hdrLen := recordHeaderSize
			if data[segmentVersionOffset] >= formatVersion3 {
				hdrLen = recordHeaderSizeV3
			}
			if off <= prev || off < segmentHeaderSizeV1 || off+int64(hdrLen+len(rec)) > int64(len(data)) {
				t.Fatalf("record at offset %d (after %d) of %d bytes does not fit a %d byte file", off, prev, len(rec), len(data))
			}
			prev = off
			recs = append(recs, bytes.Clone(rec))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, last bool) {
		recs, err := read(t, data, last)
		var torn *tornTailError
		switch {
		case err == io.EOF:
		case errors.As(err, &torn):
			if !last {
				t.Fatalf("torn tail reported for a segment that is not the last: %v", err)
			}
			if torn.offset < 0 || torn.offset > torn.size || torn.size > int64(len(data)) ||
				(!torn.zero && torn.extendTo == 0 && torn.size != int64(len(data))) {
				t.Fatalf("torn tail [%d, %d) of a %d byte file", torn.offset, torn.size, len(data))
			}
			repaired := data[:torn.offset]
			switch {
			case torn.extendTo > 0:
				if len(recs) != 0 || torn.extendTo <= int64(len(data)) {
					t.Fatalf("interrupted creation with %d records, extended from %d to %d bytes", len(recs), len(data), torn.extendTo)
				}
				return // the repaired file may be huge; readHeader checked it holds zeros
			case torn.zero:
				repaired = bytes.Clone(data)
				clear(repaired[torn.offset:torn.size])
			}
			again, err := read(t, repaired, true)
			if err != io.EOF {
				t.Fatalf("segment cut at its torn tail (%d) does not end cleanly: %v", torn.offset, err)
			}
			if len(again) != len(recs) {
				t.Fatalf("segment cut at its torn tail has %d records, want %d", len(again), len(recs))
			}
		case errors.Is(err, base.ErrCorruption):
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "offset") {
				t.Fatalf("corruption error does not name the file and offset: %v", err)
			}
		default:
			t.Fatalf("unexpected error kind: %v", err)
		}
	})
}
