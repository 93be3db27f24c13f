package wal

// On-disk format of a WAL segment file (format version 2; version 1 is still
// replayed).
//
// A segment is a segment header followed by zero or more records, back to
// back, with no padding and no trailer, followed (version 2) by zero bytes up
// to the preallocated size. All integers are little-endian.
//
// Segment header, versions 2 and 3 (segmentHeaderSize = 32 bytes):
//
//	offset  size  field
//	0       4     magic: the ASCII bytes "EVWL" (0x45 0x56 0x57 0x4c)
//	4       1     format version: 2 or 3 (formatVersion, what writers write, is 3)
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
// Record, versions 1 and 2 (recordHeaderSize = 8 bytes + payload):
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
// Record, version 3 (recordHeaderSizeV3 = 16 bytes + payload):
//
//	offset  size  field
//	0       4     payload length n: uint32, at most MaxRecordSize
//	4       4     checksum: CRC-32C of bytes [0, 4) of this record (the length
//	              field) followed by the n payload bytes, XOR the CRC-32C of
//	              the 8 little-endian bytes of the segment number
//	8       8     segment number: uint64, the segment the record was written to
//	16      n     payload: one opaque batch, as given to Writer.Append
//
// Why version 3: recycled segments. A Writer may reuse a segment file whose
// records were flushed (Options.RecycleSegments) instead of creating a new
// sparse one: it rewrites the header with the new number and size, syncs
// it and renames the file. Its blocks are then already allocated and
// written, so the fdatasync of a group commit writes data only, with no
// block allocation or unwritten-extent conversion to journal (measured in
// BENCHMARKS.md, s11-wal). The bytes after the live records are then not
// zeros but the records of an older generation (numbered below the
// current segment), so a record carries its segment number, and the
// checksum is keyed by it: a stale record never checks as a record of the
// current segment, whatever it holds.
//
// Reading a version 3 segment, at each offset the 16 bytes there are:
//   - a record of this segment (number equal, checksum good): replayed;
//   - a record whose checksum is good for this segment's number but whose
//     number field differs: a damaged number field, corruption;
//   - anything naming another segment (a stale record, the middle of an old
//     payload, zeros): the records end here, unless an intact record of
//     this segment starts anywhere after this offset (corruption: a
//     damaged record in the middle of the log), or the segment was sealed
//     at another offset (corruption);
//   - a header naming this segment that does not check (bad checksum,
//     absurd length, running past the end of the file): a damaged record.
//     In the last segment, not sealed, with no intact record of this
//     segment after it, it is the torn write of the last group commit
//     before a crash: its extent (to the end of its claimed length, or its
//     header when the length is absurd, at most to the end of the file) is
//     overwritten with zeros and reported in ReplayResult. Anywhere else it
//     is corruption.
//
// A Writer seals a version 3 segment (the sealed end above, fsynced after
// its records) when it rotates away from it as well as on Close, so only
// the newest segment, after a crash, is read without a seal.
//
// Format versions (never reuse a number):
//
//	1  segment header with magic, version and segment number; records as above.
//	2  header adds the preallocated size and the sealed end; zeros follow the
//	   records.
//	3  records carry their segment number, and the checksum is keyed by it,
//	   so a segment may be a recycled file with an older generation's
//	   records after the live ones; segments are sealed on rotation too.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/eventide/eventide/storage/internal/base"
)

// formatVersion is the version written into every new segment header.
const formatVersion = formatVersion3

// Segment format versions.
const (
	formatVersion1 = 1
	formatVersion2 = 2
	formatVersion3 = 3
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

	recordHeaderSize   = 8  // versions 1 and 2
	recordHeaderSizeV3 = 16 // version 3
	// Offsets inside the record header.
	recordLengthOffset   = 0
	recordChecksumOffset = 4
	recordSegmentOffset  = 8 // version 3
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
// errOtherSegment (version 3) is not corruption by itself either: the bytes
// name another segment, which is what follows the live records of a
// recycled segment.
var (
	errIncompleteRecord = errors.New("incomplete record")
	errRecordLength     = fmt.Errorf("%w: record length above %d bytes", base.ErrCorruption, MaxRecordSize)
	errRecordChecksum   = fmt.Errorf("%w: record checksum mismatch", base.ErrCorruption)
	errOtherSegment     = errors.New("bytes are not a record of this segment")
	errRecordSegment    = fmt.Errorf("%w: record checksum is good for this segment but its segment number field differs", base.ErrCorruption)
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

// recordHeaderV3 returns the version 3 header of rec without its segment:
// the number field is zero and the checksum is not yet keyed. stampRecords
// completes it once the segment the record lands in is known (at the
// write), so that the CRC of the payload is still computed before the
// writer's lock is taken.
func recordHeaderV3(rec []byte) [recordHeaderSizeV3]byte {
	var hdr [recordHeaderSizeV3]byte
	v2 := recordHeader(rec)
	copy(hdr[:], v2[:])
	return hdr
}

// segmentKey is the CRC-32C of the 8 little-endian bytes of num, the key a
// version 3 record's checksum is XORed with. CRC-32C detects every error
// burst of 32 bits or less, so two segment numbers that differ only in
// their low 32 bits never share a key.
func segmentKey(num uint64) uint32 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], num)
	return crc32.Checksum(b[:], crcTable())
}

// stampRecords completes the version 3 headers (from recordHeaderV3) of the
// back-to-back records in buf for segment num, whose key is key.
func stampRecords(buf []byte, num uint64, key uint32) {
	for off := 0; off+recordHeaderSizeV3 <= len(buf); {
		hdr := buf[off:]
		n := int(binary.LittleEndian.Uint32(hdr[recordLengthOffset:]))
		crc := binary.LittleEndian.Uint32(hdr[recordChecksumOffset:])
		binary.LittleEndian.PutUint32(hdr[recordChecksumOffset:], crc^key)
		binary.LittleEndian.PutUint64(hdr[recordSegmentOffset:], num)
		off += recordHeaderSizeV3 + n
	}
}

// appendRecordV3 appends rec, framed as one version 3 record of segment
// num, to dst.
func appendRecordV3(dst, rec []byte, num uint64) []byte {
	hdr := recordHeaderV3(rec)
	start := len(dst)
	dst = append(dst, hdr[:]...)
	dst = append(dst, rec...)
	stampRecords(dst[start:], num, segmentKey(num))
	return dst
}

// decodeRecordV3 decodes the version 3 record of segment num at the start
// of buf. On success payload aliases buf and n is the record's total size.
// It returns errIncompleteRecord when buf ends inside the record (its
// header names num or not), errRecordLength for an absurd length,
// errOtherSegment when the header names another segment and does not check
// as a damaged record of num, errRecordSegment when only the number field
// is wrong, and errRecordChecksum when a record naming num does not check.
func decodeRecordV3(buf []byte, num uint64) (payload []byte, n int, err error) {
	if len(buf) < recordHeaderSizeV3 {
		return nil, 0, errIncompleteRecord
	}
	ours := binary.LittleEndian.Uint64(buf[recordSegmentOffset:]) == num
	length, err := recordLength(buf)
	if err != nil {
		if !ours {
			return nil, 0, errOtherSegment
		}
		return nil, 0, err
	}
	if len(buf)-recordHeaderSizeV3 < length {
		return nil, 0, errIncompleteRecord
	}
	n = recordHeaderSizeV3 + length
	crc := storedRecordCRC(buf, recordHeaderSizeV3, n)
	if crc^segmentKey(num) == binary.LittleEndian.Uint32(buf[recordChecksumOffset:]) {
		if !ours {
			return nil, 0, errRecordSegment
		}
		return buf[recordHeaderSizeV3:n], n, nil
	}
	if !ours {
		return nil, 0, errOtherSegment
	}
	return nil, 0, errRecordChecksum
}

// storedRecordCRC is the CRC-32C of a stored record's length field and
// its payload, buf[payloadStart:n], as read from the segment (version 3
// keys it by the segment number after).
func storedRecordCRC(buf []byte, payloadStart, n int) uint32 {
	tab := crcTable()
	crc := crc32.Update(0, tab, buf[recordLengthOffset:recordChecksumOffset])
	return crc32.Update(crc, tab, buf[payloadStart:n])
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
	crc := storedRecordCRC(buf, recordHeaderSize, n)
	if crc != binary.LittleEndian.Uint32(buf[recordChecksumOffset:]) {
		return nil, 0, errRecordChecksum
	}
	return buf[recordHeaderSize:n], n, nil
}

// appendSegmentHeader appends the header of segment num in the current
// format version, preallocated to prealloc bytes and not sealed, to dst.
func appendSegmentHeader(dst []byte, num uint64, prealloc int64) []byte {
	return appendSegmentHeaderVersion(dst, formatVersion, num, prealloc)
}

// appendSegmentHeaderVersion is appendSegmentHeader for format version 2
// or 3 (the writer writes version 2 only in tests of old segments).
func appendSegmentHeaderVersion(dst []byte, version byte, num uint64, prealloc int64) []byte {
	var hdr [segmentHeaderSize]byte
	copy(hdr[:], segmentMagic)
	hdr[segmentVersionOffset] = version
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
	case formatVersion2, formatVersion3:
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
		return h, fmt.Errorf("unsupported format version %d, want %d to %d", h.version, formatVersion1, formatVersion3)
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
