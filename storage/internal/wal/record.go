package wal

// On-disk format of a WAL segment file (format version 1).
//
// A segment is a segment header followed by zero or more records, back to
// back, with no padding and no trailer. All integers are little-endian.
//
// Segment header (segmentHeaderSize = 16 bytes):
//
//	offset  size  field
//	0       4     magic: the ASCII bytes "EVWL" (0x45 0x56 0x57 0x4c)
//	4       1     format version: formatVersion (1)
//	5       3     reserved: must be zero
//	8       8     segment number: uint64, must equal the number in the file name
//
// Every byte of the header is checked on replay, so a file renamed to another
// segment's name, a file from another program or a future format is reported
// as corruption instead of being replayed.
//
// Record (recordHeaderSize = 8 bytes + payload):
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
// tail left by a crash can never be mistaken for an empty record.
//
// Format versions (never reuse a number):
//
//	1  segment header with magic, version and segment number; records as above.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/eventide/eventide/storage/internal/base"
)

// formatVersion is the version written into every new segment header.
const formatVersion = 1

const (
	segmentMagic      = "EVWL"
	segmentHeaderSize = 16
	// Offsets inside the segment header.
	segmentVersionOffset  = 4
	segmentReservedOffset = 5
	segmentNumberOffset   = 8

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

// appendSegmentHeader appends the header of segment num to dst.
func appendSegmentHeader(dst []byte, num uint64) []byte {
	var hdr [segmentHeaderSize]byte
	copy(hdr[:], segmentMagic)
	hdr[segmentVersionOffset] = formatVersion
	binary.LittleEndian.PutUint64(hdr[segmentNumberOffset:], num)
	return append(dst, hdr[:]...)
}

// checkSegmentHeader validates a complete segment header against the number
// in the file name. The returned description is meant for a corruption error.
func checkSegmentHeader(hdr []byte, num uint64) error {
	if string(hdr[:len(segmentMagic)]) != segmentMagic {
		return fmt.Errorf("bad magic %q, want %q", hdr[:len(segmentMagic)], segmentMagic)
	}
	if v := hdr[segmentVersionOffset]; v != formatVersion {
		return fmt.Errorf("unsupported format version %d, want %d", v, formatVersion)
	}
	for i := segmentReservedOffset; i < segmentNumberOffset; i++ {
		if hdr[i] != 0 {
			return fmt.Errorf("reserved header byte %d is %#x, want 0", i, hdr[i])
		}
	}
	if got := binary.LittleEndian.Uint64(hdr[segmentNumberOffset:]); got != num {
		return fmt.Errorf("header names segment %d, want %d (misplaced or renamed file)", got, num)
	}
	return nil
}
