package wal

// On-disk format of a WAL segment file (format version 2; version 1 is still
// replayed).
//
// A segment is a segment header followed by zero or more records, back to
// back, with no padding and no trailer, followed (version 2) by zero bytes up
// to the preallocated size. All integers are little-endian.
//
// Segment header, version 2 (segmentHeaderSize = 32 bytes):
//
//	offset  size  field
//	0       4     magic: the ASCII bytes "EVWL" (0x45 0x56 0x57 0x4c)
//	4       1     format version: formatVersion (2)
//	5       3     reserved: must be zero
//	8       8     segment number: uint64, must equal the number in the file name
//	16      8     preallocated size: uint64, the file size the writer set (with
//	              zeros past the header) and fsynced before its first record
//	24      8     sealed end: uint64, 0 while the segment is written; on a clean
//	              Close, the offset where its records end, written and fsynced
//	              last
//
// Segment header, version 1 (segmentHeaderSizeV1 = 16 bytes): bytes [0, 16)
// above with format version 1; no preallocation, no seal.
//
// Every byte of the header is checked on replay, so a file renamed to another
// segment's name, a file from another program or a future format is reported
// as corruption instead of being replayed.
//
// Record (recordHeaderSize = 8 bytes + payload), the same in both versions:
//
//	offset  size  field
//	0       4     payload length n: uint32, at most MaxRecordSize
//	4       4     checksum: CRC-32C (Castagnoli) of bytes [0, 4) of this
//	              record (the length field) followed by the n payload bytes
//	8       n     payload: one opaque batch, as given to Writer.Append
//
// The checksum covers the length so that a damaged length is caught instead
// of silently reframing the rest of the segment. An all-zero header never
// checks (the CRC-32C of four zero bytes is 0x48674bc7), so a zero-filled
// tail left by a crash, or the preallocated zeros, can never be mistaken for
// an empty record: in version 2 the records end where only zeros follow.
//
// Why version 2 preallocates and seals. In version 1 the file size was the
// only end marker, so any truncation of the last segment, and any damage to
// its final record, looked like the torn tail of a crash and was cut away
// with acknowledged records in it. In version 2:
//   - The size is made durable before any record is written, so a file
//     shorter than its preallocated size has been truncated: corruption (the
//     one exception is a file holding nothing past its header, which is a
//     creation interrupted before that fsync).
//   - With the size durable, a group commit needs only fdatasync (the
//     metadata of a write inside the file is not needed to read it back).
//   - Appends write into preallocated zeros, so a torn write leaves a record
//     prefix followed by zeros; recovery may cut only the extent of one
//     record (the one whose header is at the damage, with a sane length),
//     and only when nothing but zeros follows it and no intact record
//     follows the damage. Anything else is corruption.
//   - A sealed segment was closed cleanly: its records must end exactly at
//     the sealed end and nothing may be cut.
//
// The one remaining ambiguity is the final record of a segment that was not
// sealed (the process crashed): a flipped byte there looks exactly like a
// torn write of the last group commit, which may have been acknowledged.
// Replay reports exactly what it cut (ReplayResult) so the layer above can
// compare with its own source of truth.
//
// Format versions (never reuse a number):
//
//	1  segment header with magic, version and segment number; records as above.
//	2  header adds the preallocated size and the sealed end; zeros follow the
//	   records.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/eventide/eventide/storage/internal/base"
)

// formatVersion is the version written into every new segment header.
const formatVersion = formatVersion2

// Segment format versions.
const (
	formatVersion1 = 1
	formatVersion2 = 2
)

const (
	segmentMagic        = "EVWL"
	segmentHeaderSize   = 32 // version 2
	segmentHeaderSizeV1 = 16
	// Offsets inside the segment header.
	segmentVersionOffset  = 4
	segmentReservedOffset = 5
	segmentNumberOffset   = 8
	segmentPreallocOffset = 16 // version 2
	segmentSealedOffset   = 24 // version 2

	recordHeaderSize = 8
	// Offsets inside the record header.
	recordLengthOffset   = 0
	recordChecksumOffset = 4
)

// MaxRecordSize is the largest payload Append accepts. A decoded length above
// it is corruption: no writer produces it, and trusting it would make replay
// allocate absurd buffers.
const MaxRecordSize = 1 << 30

// crcTable is the Castagnoli polynomial table. crc32.MakeTable caches it
// internally, so this is a lookup, not a global with state.
func crcTable() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) }

// Reasons decodeRecord rejects a record. errIncompleteRecord is not by itself
// corruption: at the end of the last segment it is a torn tail. The others
// wrap base.ErrCorruption.
var (
	errIncompleteRecord = errors.New("incomplete record")
	errRecordLength     = fmt.Errorf("%w: record length above %d bytes", base.ErrCorruption, MaxRecordSize)
	errRecordChecksum   = fmt.Errorf("%w: record checksum mismatch", base.ErrCorruption)
)

// recordHeader returns the header that frames rec. It is separate from the
// copy into the log buffer so that the checksum can be computed before the
// writer's lock is taken. The caller checks len(rec) <= MaxRecordSize.
func recordHeader(rec []byte) [recordHeaderSize]byte {
	var hdr [recordHeaderSize]byte
	binary.LittleEndian.PutUint32(hdr[recordLengthOffset:], uint32(len(rec)))
	tab := crcTable()
	crc := crc32.Update(crcOfLength(uint32(len(rec)), tab), tab, rec)
	binary.LittleEndian.PutUint32(hdr[recordChecksumOffset:], crc)
	return hdr
}

// crcOfLength is the CRC-32C of the four little-endian length bytes. Handing
// hdr[:4] to crc32.Update instead would make hdr escape (the update function
// is chosen at run time) and cost an allocation per Append. decodeRecord
// uses crc32.Update on the stored bytes, so the two implementations check
// each other.
func crcOfLength(n uint32, tab *crc32.Table) uint32 {
	crc := ^uint32(0)
	for range 4 {
		crc = tab[byte(crc)^byte(n)] ^ crc>>8
		n >>= 8
	}
	return ^crc
}

// appendRecord appends rec, framed as one record, to dst.
func appendRecord(dst, rec []byte) []byte {
	hdr := recordHeader(rec)
	dst = append(dst, hdr[:]...)
	return append(dst, rec...)
}

// recordLength returns the payload length in a record header, or
// errRecordLength.
func recordLength(hdr []byte) (int, error) {
	n := binary.LittleEndian.Uint32(hdr[recordLengthOffset:])
	if n > MaxRecordSize {
		return 0, errRecordLength
	}
	return int(n), nil
}

// decodeRecord decodes the record at the start of buf. On success payload
// aliases buf and n is the record's total size (header and payload). It
// returns errIncompleteRecord when buf ends inside the record, and an error
// wrapping base.ErrCorruption when the length is absurd or the checksum fails.
func decodeRecord(buf []byte) (payload []byte, n int, err error) {
	if len(buf) < recordHeaderSize {
		return nil, 0, errIncompleteRecord
	}
	length, err := recordLength(buf)
	if err != nil {
		return nil, 0, err
	}
	if len(buf)-recordHeaderSize < length {
		return nil, 0, errIncompleteRecord
	}
	n = recordHeaderSize + length
	tab := crcTable()
	crc := crc32.Update(0, tab, buf[recordLengthOffset:recordChecksumOffset])
	crc = crc32.Update(crc, tab, buf[recordHeaderSize:n])
	if crc != binary.LittleEndian.Uint32(buf[recordChecksumOffset:]) {
		return nil, 0, errRecordChecksum
	}
	return buf[recordHeaderSize:n], n, nil
}

// appendSegmentHeader appends the version 2 header of segment num,
// preallocated to prealloc bytes and not sealed, to dst.
func appendSegmentHeader(dst []byte, num uint64, prealloc int64) []byte {
	var hdr [segmentHeaderSize]byte
	copy(hdr[:], segmentMagic)
	hdr[segmentVersionOffset] = formatVersion
	binary.LittleEndian.PutUint64(hdr[segmentNumberOffset:], num)
	binary.LittleEndian.PutUint64(hdr[segmentPreallocOffset:], uint64(prealloc))
	return append(dst, hdr[:]...)
}

// V1EmptySegmentSize is the size of a version 1 segment that holds no
// record (its header only). Version 1 writers created such a segment
// whenever a store was opened, so a directory may hold one and nothing else.
const V1EmptySegmentSize = segmentHeaderSizeV1

// appendSegmentHeaderV1 appends a version 1 header (kept to test that old
// segments still replay).
func appendSegmentHeaderV1(dst []byte, num uint64) []byte {
	var hdr [segmentHeaderSizeV1]byte
	copy(hdr[:], segmentMagic)
	hdr[segmentVersionOffset] = formatVersion1
	binary.LittleEndian.PutUint64(hdr[segmentNumberOffset:], num)
	return append(dst, hdr[:]...)
}

// segmentHeader is a decoded segment header.
type segmentHeader struct {
	version  byte
	size     int64 // of the header itself
	prealloc int64 // version 2: preallocated file size
	sealed   int64 // version 2: sealed end, 0 if not sealed
}

// headerSizeOf returns the header size of a segment of version v, or 0 for
// an unknown version.
func headerSizeOf(v byte) int {
	switch v {
	case formatVersion1:
		return segmentHeaderSizeV1
	case formatVersion2:
		return segmentHeaderSize
	}
	return 0
}

// checkSegmentHeader validates a complete segment header (headerSizeOf its
// version byte) against the number in the file name. The returned
// description is meant for a corruption error.
func checkSegmentHeader(hdr []byte, num uint64) (segmentHeader, error) {
	var h segmentHeader
	if string(hdr[:len(segmentMagic)]) != segmentMagic {
		return h, fmt.Errorf("bad magic %q, want %q", hdr[:len(segmentMagic)], segmentMagic)
	}
	h.version = hdr[segmentVersionOffset]
	h.size = int64(headerSizeOf(h.version))
	if h.size == 0 {
		return h, fmt.Errorf("unsupported format version %d, want %d or %d", h.version, formatVersion1, formatVersion2)
	}
	if int64(len(hdr)) < h.size {
		return h, fmt.Errorf("BUG: checkSegmentHeader given %d bytes of a %d byte header", len(hdr), h.size)
	}
	for i := segmentReservedOffset; i < segmentNumberOffset; i++ {
		if hdr[i] != 0 {
			return h, fmt.Errorf("reserved header byte %d is %#x, want 0", i, hdr[i])
		}
	}
	if got := binary.LittleEndian.Uint64(hdr[segmentNumberOffset:]); got != num {
		return h, fmt.Errorf("header names segment %d, want %d (misplaced or renamed file)", got, num)
	}
	if h.version == formatVersion1 {
		return h, nil
	}
	prealloc := binary.LittleEndian.Uint64(hdr[segmentPreallocOffset:])
	if prealloc < segmentHeaderSize || prealloc > maxPreallocSize {
		return h, fmt.Errorf("preallocated size %d outside [%d, %d]", prealloc, segmentHeaderSize, maxPreallocSize)
	}
	sealed := binary.LittleEndian.Uint64(hdr[segmentSealedOffset:])
	if sealed != 0 && (sealed < segmentHeaderSize || sealed > maxSegmentSize) {
		return h, fmt.Errorf("sealed end %d outside [%d, %d]", sealed, segmentHeaderSize, maxSegmentSize)
	}
	h.prealloc, h.sealed = int64(prealloc), int64(sealed)
	return h, nil
}

// maxPreallocSize bounds the preallocated size (the writer preallocates at
// most this much, whatever the target size) and so the size a header may
// claim; maxSegmentSize bounds the sealed end. Larger values are
// corruption.
const (
	maxPreallocSize = 4 << 30
	maxSegmentSize  = 1 << 50
)
