package sstable

import (
	"encoding/binary"

	"github.com/eventide/eventide/storage/internal/base"
)

// A data block holds consecutive cells of one partition. Its decompressed
// bytes are laid out column-wise (see writer.go): all cell flags, then all
// row keys, then all column indexes, timestamps, TTLs, deletion times,
// value lengths and finally all values. Grouping alike fields lets zstd
// model each stream on its own (JSON values next to JSON values, small
// varints next to small varints), and the per-cell predictions below make
// most fields vanish before compression:
//   - a row's clustering key is stored once, as a shared prefix length with
//     the previous row's key plus the differing suffix, or, when every key
//     of the block has the same length (8 bytes or more), as big-endian
//     deltas of the leading 8 bytes and the rest transposed (rowKeysFixed);
//   - column names live once in a sorted per-block dictionary; a cell
//     stores its index (and nothing when the block has one column);
//   - a timestamp is a zigzag delta from the previous cell's residual, or
//     nothing when equal (the columns of one row), where the residual is
//     the timestamp itself or, when that is smaller, the timestamp less
//     the one the row's TimeUUID clustering key predicts; deltas and
//     value lengths are stored as byte planes (see appendPlanes);
//   - in zstd files, JSON values are split into shapes and hole columns
//     (value_shapes.go);
//   - a TTL is stored only when it differs from the block's default for
//     the kind (the first expiring cell's TTL; 0 for other kinds);
//   - a local deletion time is stored only when it differs from its
//     prediction: NoDeletionTime for live and counter cells, and for
//     expiring cells and tombstones write-second + TTL plus the previous
//     such cell's offset from that (so a steady ingestion delay costs
//     nothing).

// Cell flag bits (one byte per cell).
const (
	cellKindMask      = 0x03 // Kind - 1
	cellNewRow        = 0x04 // the cell starts a row: a row key follows in the row section
	cellSameTimestamp = 0x08 // timestamp equals the previous cell's (the block base for the first)
	cellExplicitTTL   = 0x10 // TTL differs from the default: a varint follows in the TTL section
	cellExplicitLDT   = 0x20 // deletion time differs from the prediction: a varint delta follows
	cellEmptyValue    = 0x40 // no value length nor value bytes
	cellReservedFlags = 0x80
)

// kindsWithPredictor is how many kinds have a deletion-time predictor:
// expiring cells and tombstones.
const kindsWithPredictor = 2

// maxBlockKeyBytes bounds the total size of the full clustering keys a block
// expands to (beyond its own length), because prefix compression would let
// a small malicious block expand quadratically. The writer closes a block
// before its keys would pass it.
const maxBlockKeyBytes = 1 << 20

// microsPerSecond converts write timestamps (µs) to deletion times (s).
const microsPerSecond = 1_000_000

// writeSecond is the unix second of a µs timestamp, rounded down.
func writeSecond(tsMicros int64) int64 {
	s := tsMicros / microsPerSecond
	if tsMicros%microsPerSecond < 0 {
		s--
	}
	return s
}

// ldtPredictor predicts a cell's local deletion time from its kind,
// timestamp and TTL. Writer and decoder run identical predictors.
type ldtPredictor struct {
	// offset is, per kind (expiring, tombstone), the last seen
	// LDT - (writeSecond + TTL).
	offset [kindsWithPredictor]int64
}

func (p *ldtPredictor) predict(k base.Kind, ts int64, ttl int32) int64 {
	switch k {
	case base.KindExpiring:
		return writeSecond(ts) + int64(ttl) + p.offset[0]
	case base.KindTombstone:
		return writeSecond(ts) + int64(ttl) + p.offset[1]
	}
	return base.NoDeletionTime
}

func (p *ldtPredictor) observe(k base.Kind, ts int64, ttl int32, ldt int64) {
	switch k {
	case base.KindExpiring:
		p.offset[0] = ldt - writeSecond(ts) - int64(ttl)
	case base.KindTombstone:
		p.offset[1] = ldt - writeSecond(ts) - int64(ttl)
	}
}

// cellMaxLDT is what a cell contributes to a max local deletion time: a
// live or counter cell never expires.
func cellMaxLDT(c *base.Cell) int64 {
	if c.Kind == base.KindLive || c.Kind == base.KindCounter {
		return base.NoDeletionTime
	}
	return c.LocalDeletionTime
}

// Timestamp predictors (block encodings bits 2-3). Numbers are on disk.
const (
	// tsFromPrevious predicts nothing: residuals are the timestamps, so
	// a cell stores the delta from the previous cell's timestamp.
	tsFromPrevious = 0
	// tsFromTimeUUID predicts the timestamp of a row whose clustering key
	// starts with an order-preserving TimeUUID (bucket.EncodeTimeUUID:
	// big-endian version<<60 | 100 ns ticks since 1582-10-15): the unix
	// µs of those ticks, rounded down. Events written with their own time
	// as the write time then cost no timestamp bytes at all.
	tsFromTimeUUID = 1
	// tsFromTimeUUIDDesc is tsFromTimeUUID for keys stored inverted
	// (every byte complemented), as descending clustering columns are.
	tsFromTimeUUIDDesc = 2
	tsPredictors       = 3
)

// uuidUnixEpochTicks is the Unix epoch in version 1 UUID ticks (100 ns
// since 1582-10-15T00:00:00Z).
const uuidUnixEpochTicks = 122_192_928_000_000_000

// predictTimestamp is predictor p's timestamp for a cell of row key ck,
// which has at least 8 bytes unless p is tsFromPrevious.
func predictTimestamp(p int, ck []byte) int64 {
	if p == tsFromPrevious {
		return 0
	}
	v := binary.BigEndian.Uint64(ck)
	if p == tsFromTimeUUIDDesc {
		v = ^v
	}
	d := int64(v&(1<<60-1)) - uuidUnixEpochTicks
	q := d / 10
	if d%10 < 0 {
		q--
	}
	return q
}

// Row key encodings (block encodings bits 0-1). Numbers are on disk.
const (
	// rowKeysPrefix: per row, the length of the prefix shared with the
	// previous row's key, then the rest as bytes.
	rowKeysPrefix = 0
	// rowKeysFixed, for blocks whose row keys all have one length L >= 8:
	// L uvarint, the first key's leading 8 bytes, the big-endian uint64
	// deltas of the following keys' leading 8 bytes as a uint column
	// (absent for one row), then the remaining L-8 bytes of every key
	// transposed: byte 8 of each key, then byte 9 of each key, and so
	// on. Sorted keys that start with a time or a counter have small
	// deltas, and random tails (a TimeUUID's node) at least stay out of
	// the way of the deltas.
	rowKeysFixed = 1
)

// Block encodings byte (format version 2): which encoding each section
// uses. Version 1 blocks have no such byte and use all the zero encodings.
const (
	encRowKeysMask    = 0x03
	encTimestampShift = 2
	encTimestampMask  = 0x0c
	encValuesShaped   = 0x10
	encReserved       = 0xe0
)

// Byte planes: a section of n unsigned integers is stored as a width byte
// w (1..8), then n low bytes, then n second bytes, and so on to w planes
// (empty when n is 0). Timestamp deltas and value lengths vary in their low
// bytes and hardly at all in their high bytes; split into planes, zstd's
// entropy coder squeezes the near-constant high planes to almost nothing,
// where varints would interleave them with continuation bits.
