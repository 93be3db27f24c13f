package sstable

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"unsafe"

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

// blockBuilder accumulates the cells of one data block.
type blockBuilder struct {
	// shapeValues tries the shaped encoding of values (value_shapes.go)
	// at finish. The writer sets it for zstd files only: with S2 or no
	// compression, the plain layout is as small and cheaper to write.
	shapeValues bool

	cells, rows int
	defaultTTL  int32
	haveTTL     bool
	ldt         ldtPredictor
	keyBytes    int // total length of the full row keys

	// ts tracks the timestamps under each predictor; finish keeps the
	// one with the smallest section. shortKey: a row key has fewer than 8
	// bytes, so only tsFromPrevious applies.
	ts       [tsPredictors]tsTrack
	shortKey bool

	// Row keys: rowSec holds the prefix encoding; keyBuf every full key
	// while they all have keyLen >= 8 bytes (keysFixed), for the
	// fixed-width encoding.
	rowSec    []byte
	keyBuf    []byte
	keyLen    int
	keysFixed bool

	flags   []byte
	colIdx  []uint32 // first-appearance column index per cell, remapped to sorted order by finish
	ttlSec  []byte
	ldtSec  []byte
	lenVals []uint64
	valSec  []byte
	colBuf  []byte // column names in first-appearance order, concatenated
	colEnds []int  // end offset of each name in colBuf

	prevCK []byte // owned
	minCK  []byte // owned
	meta   BlockMeta

	remap     []uint32 // scratch
	order     []int    // scratch
	fixedSec  []byte   // scratch: fixed-width row keys
	keyDeltas []uint64 // scratch: fixed-width row keys' deltas
	lensBuf   []byte   // scratch: plain value lengths
	shapesSec []byte   // scratch: shaped values, shapes section
	shapedVal []byte   // scratch: shaped values, values section
	colOffs   []int    // scratch: where each hole column starts
	splits    []int    // scratch: zstd block boundaries
	shaper    shapeEncoder
}

// tsTrack is the timestamp section under one predictor. A cell's residual
// is its timestamp less the prediction; a cell whose residual equals the
// previous cell's (the block's base for the first) costs only its
// cellSameTimestamp flag, any other stores the zigzag delta.
type tsTrack struct {
	base, prev int64
	deltas     []uint64
	same       []bool
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

func (b *blockBuilder) reset() {
	ts := b.ts
	for m := range ts {
		ts[m] = tsTrack{deltas: ts[m].deltas[:0], same: ts[m].same[:0]}
	}
	*b = blockBuilder{
		shapeValues: b.shapeValues, ts: ts,
		flags: b.flags[:0], rowSec: b.rowSec[:0], keyBuf: b.keyBuf[:0], colIdx: b.colIdx[:0],
		ttlSec: b.ttlSec[:0], ldtSec: b.ldtSec[:0], lenVals: b.lenVals[:0], valSec: b.valSec[:0],
		colEnds: b.colEnds[:0], colBuf: b.colBuf[:0], prevCK: b.prevCK[:0], minCK: b.minCK[:0],
		remap: b.remap[:0], order: b.order[:0], fixedSec: b.fixedSec[:0], keyDeltas: b.keyDeltas[:0],
		lensBuf: b.lensBuf[:0], shapesSec: b.shapesSec[:0],
		shapedVal: b.shapedVal[:0], colOffs: b.colOffs[:0], splits: b.splits[:0], shaper: b.shaper,
	}
}

func (b *blockBuilder) empty() bool { return b.cells == 0 }

// size estimates the encoded (uncompressed) size.
func (b *blockBuilder) size() int {
	return 32 + len(b.flags) + len(b.rowSec) + len(b.colIdx) + 3*len(b.ts[0].deltas) + len(b.ttlSec) +
		len(b.ldtSec) + 2*len(b.lenVals) + len(b.valSec) + len(b.colBuf) + 2*len(b.colEnds)
}

// cellSize estimates what adding c would add to size.
func cellSize(c *base.Cell, newRow bool) int {
	n := 1 + 1 + 3 + len(c.Value) + 2
	if newRow {
		n += len(c.Clustering) + 2
	}
	return n
}

// add appends c, which the caller has checked sorts after the previous
// cell. sameRow says c has the previous cell's clustering key.
func (b *blockBuilder) add(c *base.Cell, sameRow bool) {
	if b.cells == 0 {
		sameRow = false
		b.minCK = append(b.minCK[:0], c.Clustering...)
		b.meta = BlockMeta{MinTimestamp: c.Timestamp, MaxTimestamp: c.Timestamp, MaxLocalDeletionTime: math.MinInt64}
		b.keysFixed, b.keyLen = len(c.Clustering) >= 8, len(c.Clustering)
	}
	flags := byte(c.Kind-1) & cellKindMask
	if !sameRow {
		flags |= cellNewRow
		shared := 0
		if b.rows > 0 {
			shared = commonPrefix(b.prevCK, c.Clustering)
		}
		b.rowSec = binary.AppendUvarint(b.rowSec, uint64(shared))
		b.rowSec = appendBytes(b.rowSec, c.Clustering[shared:])
		b.prevCK = append(b.prevCK[:0], c.Clustering...)
		b.rows++
		b.keyBytes += len(c.Clustering)
		if len(c.Clustering) != b.keyLen {
			b.keysFixed = false
		}
		if b.keysFixed {
			b.keyBuf = append(b.keyBuf, c.Clustering...)
		}
		if len(c.Clustering) < 8 {
			b.shortKey = true
		}
	}
	b.colIdx = append(b.colIdx, b.columnIndex(c.Column))
	for p := range b.ts {
		if p != tsFromPrevious && b.shortKey {
			break
		}
		t := &b.ts[p]
		r := c.Timestamp - predictTimestamp(p, c.Clustering)
		if b.cells == 0 {
			t.base, t.prev = r, r
		}
		if r == t.prev {
			t.same = append(t.same, true)
		} else {
			t.same = append(t.same, false)
			t.deltas = append(t.deltas, zigzag(r-t.prev))
			t.prev = r
		}
	}
	if c.Kind == base.KindExpiring && !b.haveTTL {
		b.defaultTTL, b.haveTTL = c.TTL, true
	}
	if c.TTL != b.ttlDefault(c.Kind) {
		flags |= cellExplicitTTL
		b.ttlSec = binary.AppendVarint(b.ttlSec, int64(c.TTL))
	}
	if p := b.ldt.predict(c.Kind, c.Timestamp, c.TTL); c.LocalDeletionTime != p {
		flags |= cellExplicitLDT
		b.ldtSec = binary.AppendVarint(b.ldtSec, c.LocalDeletionTime-p)
	}
	b.ldt.observe(c.Kind, c.Timestamp, c.TTL, c.LocalDeletionTime)
	if len(c.Value) == 0 {
		flags |= cellEmptyValue
	} else {
		b.lenVals = append(b.lenVals, uint64(len(c.Value)))
		b.valSec = append(b.valSec, c.Value...)
	}
	b.flags = append(b.flags, flags)
	b.cells++

	b.meta.Cells++
	b.meta.MinTimestamp = min(b.meta.MinTimestamp, c.Timestamp)
	b.meta.MaxTimestamp = max(b.meta.MaxTimestamp, c.Timestamp)
	b.meta.MaxLocalDeletionTime = max(b.meta.MaxLocalDeletionTime, cellMaxLDT(c))
}

func (b *blockBuilder) ttlDefault(k base.Kind) int32 {
	if k == base.KindExpiring {
		return b.defaultTTL
	}
	return 0
}

// columnIndex returns the first-appearance index of col, adding it. Blocks
// have a handful of columns, so a linear scan beats a map.
func (b *blockBuilder) columnIndex(col []byte) uint32 {
	for i := range b.colEnds {
		if bytes.Equal(b.column(i), col) {
			return uint32(i)
		}
	}
	b.colBuf = append(b.colBuf, col...)
	b.colEnds = append(b.colEnds, len(b.colBuf))
	return uint32(len(b.colEnds) - 1)
}

func (b *blockBuilder) column(i int) []byte {
	start := 0
	if i > 0 {
		start = b.colEnds[i-1]
	}
	return b.colBuf[start:b.colEnds[i]]
}

// finish appends the encoded block to dst and returns it with the block's
// metadata (its key slices alias the builder; copy before reset) and the
// offsets in dst where the compressor should end a zstd block: where the
// fields of one kind of data give way to another's (see
// compressor.appendBlockFrame).
func (b *blockBuilder) finish(dst []byte) ([]byte, BlockMeta, []int) {
	start := len(dst)
	// Sort the dictionary so that decoders can check column order with
	// integer comparisons.
	b.order = b.order[:0]
	ncols := len(b.colEnds)
	for i := 0; i < ncols; i++ {
		b.order = append(b.order, i)
	}
	slices.SortFunc(b.order, func(x, y int) int { return bytes.Compare(b.column(x), b.column(y)) })
	b.remap = slices.Grow(b.remap[:0], ncols)[:ncols]
	for sorted, orig := range b.order {
		b.remap[orig] = uint32(sorted)
	}
	colSecLen := 0
	if ncols > 1 {
		for _, idx := range b.colIdx {
			colSecLen += uvarintLen(uint64(b.remap[idx]))
		}
	}

	var enc byte
	rowSec := b.rowSec
	if b.keysFixed && b.rows > 1 {
		enc |= rowKeysFixed
		b.fixedSec = b.appendFixedKeys(b.fixedSec[:0])
		rowSec = b.fixedSec
	}
	tsPred := tsFromPrevious
	if !b.shortKey {
		for p := tsFromTimeUUID; p < tsPredictors; p++ {
			if planesLen(b.ts[p].deltas) < planesLen(b.ts[tsPred].deltas) {
				tsPred = p
			}
		}
	}
	enc |= byte(tsPred) << encTimestampShift
	ts := &b.ts[tsPred]
	for i, same := range ts.same {
		if same {
			b.flags[i] |= cellSameTimestamp
		}
	}
	b.lensBuf = appendPlanes(b.lensBuf[:0], b.lenVals)
	lensSec, valSec := b.lensBuf, b.valSec
	b.colOffs = b.colOffs[:0]
	if b.shapeValues && len(b.lenVals) > 0 {
		var ok bool
		b.shapesSec, b.shapedVal, b.colOffs, ok = b.shaper.encode(b.valSec, b.lenVals, b.shapesSec[:0], b.shapedVal[:0], b.colOffs[:0])
		shaped := len(b.shapesSec) + len(b.shapedVal)
		// The decoder refuses values that expand more than
		// maxShapedExpansion times past maxBlockKeyBytes.
		fits := len(valSec) <= max(maxShapedExpansion*shaped, maxBlockKeyBytes)
		if ok && fits && shaped < len(lensSec)+len(valSec) {
			enc |= encValuesShaped
			lensSec, valSec = b.shapesSec, b.shapedVal
		}
	}

	dst = binary.AppendUvarint(dst, uint64(b.cells))
	dst = binary.AppendUvarint(dst, uint64(b.rows))
	dst = binary.AppendVarint(dst, ts.base)
	dst = binary.AppendVarint(dst, int64(b.defaultTTL))
	dst = binary.AppendUvarint(dst, uint64(ncols))
	for _, orig := range b.order {
		dst = appendBytes(dst, b.column(orig))
	}
	dst = append(dst, enc)
	for _, n := range [...]int{len(rowSec), colSecLen, planesLen(ts.deltas), len(b.ttlSec), len(b.ldtSec), len(lensSec), len(valSec)} {
		dst = binary.AppendUvarint(dst, uint64(n))
	}
	dst = append(dst, b.flags...)
	dst = append(dst, rowSec...)
	if ncols > 1 {
		for _, idx := range b.colIdx {
			dst = binary.AppendUvarint(dst, uint64(b.remap[idx]))
		}
	}
	dst = appendPlanes(dst, ts.deltas)
	dst = append(dst, b.ttlSec...)
	dst = append(dst, b.ldtSec...)
	b.splits = b.splits[:0]
	if enc&encValuesShaped != 0 {
		b.splits = append(b.splits, len(dst)-start)
	}
	dst = append(dst, lensSec...)
	valuesOff := len(dst) - start
	if enc&encValuesShaped != 0 {
		for _, off := range b.colOffs {
			b.splits = append(b.splits, valuesOff+off)
		}
	} else {
		b.splits = append(b.splits, valuesOff)
	}
	dst = append(dst, valSec...)
	meta := b.meta
	meta.MinClustering = b.minCK
	meta.MaxClustering = b.prevCK
	return dst, meta, b.splits
}

// appendFixedKeys appends the rowKeysFixed encoding of the block's row keys.
func (b *blockBuilder) appendFixedKeys(dst []byte) []byte {
	l := b.keyLen
	dst = binary.AppendUvarint(dst, uint64(l))
	dst = append(dst, b.keyBuf[:8]...)
	deltas := b.keyDeltas[:0]
	prev := binary.BigEndian.Uint64(b.keyBuf)
	for r := 1; r < b.rows; r++ {
		v := binary.BigEndian.Uint64(b.keyBuf[r*l:])
		deltas = append(deltas, v-prev)
		prev = v
	}
	b.keyDeltas = deltas
	dst = appendUintColumn(dst, deltas)
	for i := 8; i < l; i++ {
		for r := 0; r < b.rows; r++ {
			dst = append(dst, b.keyBuf[r*l+i])
		}
	}
	return dst
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// block is a decoded data block. It is immutable once decoded and may be
// shared between goroutines through the Cache.
//
// Its cells are packed: offsets into the block's buffers instead of
// slices. A []base.Cell holds three slices per cell, which the garbage
// collector has to scan in every cached block on every cycle (tens of MB
// of pointers with a full cache, and the reads that ran during a cycle
// were several times slower); packed cells hold no pointers, and are half
// the size.
type block struct {
	cells []packedCell
	keys  []byte   // the row keys, expanded
	data  []byte   // what the values are in: the raw bytes, or shaped values' own buffer
	cols  [][]byte // the column dictionary
	meta  BlockMeta
	size  int64 // bytes held, for the cache's accounting
	// aliasesRaw: the block points into the decompressed bytes, which
	// must then live as long as the block. A block of shaped values
	// copies what it keeps (data is then its own buffer, reusable for the
	// next block's values), so its decompressed buffer can be reused.
	aliasesRaw bool
}

// packedCell is a decoded cell as a block keeps it (see block).
type packedCell struct {
	ckOff, ckLen   uint32 // in block.keys
	valOff, valLen uint32 // in block.data
	col            uint32 // in block.cols
	ttl            int32
	kind           base.Kind
	timestamp      int64
	ldt            int64
}

const cellStructSize = int64(unsafe.Sizeof(packedCell{}))

// len is the number of cells.
func (b *block) len() int { return len(b.cells) }

// clustering is cell i's clustering key.
func (b *block) clustering(i int) []byte {
	p := &b.cells[i]
	return b.keys[p.ckOff : p.ckOff+p.ckLen : p.ckOff+p.ckLen]
}

// cell sets c to cell i; its slices alias the block.
func (b *block) cell(i int, c *base.Cell) {
	p := &b.cells[i]
	c.Clustering = b.keys[p.ckOff : p.ckOff+p.ckLen : p.ckOff+p.ckLen]
	c.Column = b.cols[p.col]
	c.Kind, c.Timestamp, c.TTL, c.LocalDeletionTime = p.kind, p.timestamp, p.ttl, p.ldt
	c.Value = nil
	if p.valLen > 0 {
		c.Value = b.data[p.valOff : p.valOff+p.valLen : p.valOff+p.valLen]
	}
}

// decodeBlock decodes the decompressed bytes of a data block of a file of
// the given format version, verifying that its cells are strictly
// ascending by (clustering, column) and that every field is well formed.
// The cells alias raw, which must not change afterwards (unless the block
// says otherwise: see block.aliasesRaw).
func decodeBlock(raw []byte, version uint32) (*block, []byte, error) {
	return decodeBlockInto(raw, version, nil, nil)
}

// decodeBlockInto is decodeBlock decoding the cells into cells' array and
// shaped values into vals' array when they are large enough.
func decodeBlockInto(raw []byte, version uint32, cells []packedCell, valsDst []byte) (*block, []byte, error) {
	c := cursor{b: raw}
	n := c.length("block cell count", 1)
	rows := c.length("block row count", 1)
	baseTS := c.varint("block base timestamp")
	defTTL := c.varint("block default TTL")
	ncols := c.length("block column count", 1)
	if c.err != nil {
		return nil, nil, c.err
	}
	if n == 0 || rows == 0 || rows > n {
		return nil, nil, base.CorruptionErrorf("cannot decode block: got %d cells in %d rows, want 1 <= rows <= cells", n, rows)
	}
	if defTTL < math.MinInt32 || defTTL > math.MaxInt32 {
		return nil, nil, base.CorruptionErrorf("cannot decode block default TTL: got %d, want an int32", defTTL)
	}
	if ncols == 0 {
		return nil, nil, base.CorruptionErrorf("cannot decode block: got 0 columns for %d cells", n)
	}
	cols := make([][]byte, ncols)
	for i := range cols {
		cols[i] = c.bytes("block column name")
		if i > 0 && c.err == nil && bytes.Compare(cols[i-1], cols[i]) >= 0 {
			return nil, nil, base.CorruptionErrorf("cannot decode block columns: %q does not sort after %q", cols[i], cols[i-1])
		}
	}
	var enc byte
	if version >= formatVersion2 {
		enc = c.byte1("block encodings")
	}
	keyEnc := int(enc & encRowKeysMask)
	tsPred := int(enc&encTimestampMask) >> encTimestampShift
	if c.err == nil && (enc&encReserved != 0 || keyEnc > rowKeysFixed || tsPred >= tsPredictors) {
		return nil, nil, base.CorruptionErrorf("cannot decode block: unknown encodings %#02x", enc)
	}
	var secLens [7]int
	for i := range secLens {
		secLens[i] = c.length("block section length", 1)
	}
	flags := c.take("block cell flags", n)
	rowSec := cursor{b: c.take("block row keys", secLens[0])}
	colSec := cursor{b: c.take("block column indexes", secLens[1])}
	tsRaw := c.take("block timestamps", secLens[2])
	ttlSec := cursor{b: c.take("block TTLs", secLens[3])}
	ldtSec := cursor{b: c.take("block deletion times", secLens[4])}
	lenRaw := c.take("block value lengths", secLens[5])
	valSec := cursor{b: c.take("block values", secLens[6])}
	if c.err != nil {
		return nil, nil, c.err
	}
	// Values are read in order from data, starting at voff.
	data, voff := raw, len(raw)-len(c.b)-secLens[6]
	if secLens[1] == 0 && ncols != 1 {
		return nil, nil, base.CorruptionErrorf("cannot decode block: no column indexes for %d columns", ncols)
	}
	var nts, nlens int
	for _, f := range flags {
		if f&cellSameTimestamp == 0 {
			nts++
		}
		if f&cellEmptyValue == 0 {
			nlens++
		}
	}
	tsSec, err := decodePlanes(tsRaw, nts, "block timestamps")
	if err != nil {
		return nil, nil, err
	}
	var lenSec planes
	var shapedLens []uint32
	blockBytes := int64(len(raw))
	aliasesRaw := true
	if enc&encValuesShaped != 0 {
		if nlens == 0 {
			return nil, nil, base.CorruptionErrorf("cannot decode block: shaped values but no cell has a value")
		}
		var vals []byte
		vals, shapedLens, err = decodeShapedValues(lenRaw, valSec.b, nlens, max(maxShapedExpansion*len(raw), maxBlockKeyBytes), valsDst)
		if err != nil {
			return nil, nil, err
		}
		valSec = cursor{b: vals}
		data, voff = vals, 0
		// Values come from their own buffer; copy the column names too,
		// and nothing refers to raw any more.
		names := 0
		for _, col := range cols {
			names += len(col)
		}
		arena := make([]byte, 0, names)
		for i, col := range cols {
			arena = append(arena, col...)
			cols[i] = arena[len(arena)-len(col) : len(arena) : len(arena)]
		}
		blockBytes = int64(cap(vals)) + int64(names)
		aliasesRaw = false
	} else if lenSec, err = decodePlanes(lenRaw, nlens, "block value lengths"); err != nil {
		return nil, nil, err
	}

	keys, err := newRowKeyReader(rowSec.b, keyEnc, rows, len(raw))
	if err != nil {
		return nil, nil, err
	}
	if cap(cells) >= n {
		cells = cells[:n]
	} else {
		cells = make([]packedCell, n)
	}
	blk := &block{cells: cells, cols: cols, aliasesRaw: aliasesRaw}
	var (
		ck      []byte
		ckOff   int
		resid   = baseTS
		prevCol = -1
		ldtPred ldtPredictor
		seen    = 0
		vi      = 0
		valEnd  = voff + len(valSec.b)
	)
	blk.meta = BlockMeta{MinTimestamp: math.MaxInt64, MaxTimestamp: math.MinInt64, MaxLocalDeletionTime: math.MinInt64, Cells: n}
	for i := range cells {
		f := flags[i]
		if f&cellReservedFlags != 0 {
			return nil, nil, base.CorruptionErrorf("cannot decode cell %d: reserved flag bits set in %#02x", i, f)
		}
		var cell base.Cell
		cell.Kind = base.Kind(f&cellKindMask) + 1
		if f&cellNewRow != 0 {
			if seen == rows {
				return nil, nil, base.CorruptionErrorf("cannot decode cell %d: more rows than the header's %d", i, rows)
			}
			next, off := keys.next()
			if seen > 0 && bytes.Compare(ck, next) >= 0 {
				return nil, nil, base.CorruptionErrorf("cannot decode cell %d: clustering %x does not sort after %x", i, next, ck)
			}
			if tsPred != tsFromPrevious && len(next) < 8 {
				return nil, nil, base.CorruptionErrorf("cannot decode cell %d: timestamps predicted from a %d-byte clustering key", i, len(next))
			}
			ck, ckOff = next, off
			seen++
			prevCol = -1
		} else if i == 0 {
			return nil, nil, base.CorruptionErrorf("cannot decode cell 0: it does not start a row")
		}
		col := 0
		if ncols > 1 {
			v := colSec.uvarint("cell column index")
			if colSec.err != nil {
				return nil, nil, colSec.err
			}
			if v >= uint64(ncols) {
				return nil, nil, base.CorruptionErrorf("cannot decode cell %d column: got index %d, want < %d", i, v, ncols)
			}
			col = int(v)
		}
		if col <= prevCol {
			return nil, nil, base.CorruptionErrorf("cannot decode cell %d: column %q does not sort after %q in its row", i, cols[col], cols[prevCol])
		}
		prevCol = col
		if f&cellSameTimestamp == 0 {
			resid += unzigzag(tsSec.next())
		}
		cell.Timestamp = resid + predictTimestamp(tsPred, ck)
		if cell.Kind == base.KindExpiring {
			cell.TTL = int32(defTTL)
		}
		if f&cellExplicitTTL != 0 {
			v := ttlSec.varint("cell TTL")
			if v < math.MinInt32 || v > math.MaxInt32 {
				return nil, nil, base.CorruptionErrorf("cannot decode cell %d TTL: got %d, want an int32", i, v)
			}
			cell.TTL = int32(v)
		}
		cell.LocalDeletionTime = ldtPred.predict(cell.Kind, cell.Timestamp, cell.TTL)
		if f&cellExplicitLDT != 0 {
			cell.LocalDeletionTime += ldtSec.varint("cell deletion time")
		}
		ldtPred.observe(cell.Kind, cell.Timestamp, cell.TTL, cell.LocalDeletionTime)
		var vlen int
		if f&cellEmptyValue == 0 {
			var l uint64
			if shapedLens != nil {
				l = uint64(shapedLens[vi])
			} else {
				l = lenSec.next()
			}
			vi++
			if l == 0 || l > uint64(valEnd-voff) {
				return nil, nil, base.CorruptionErrorf("cannot decode cell %d value: got length %d, want 1..%d", i, l, valEnd-voff)
			}
			vlen = int(l)
		}
		cells[i] = packedCell{
			ckOff: uint32(ckOff), ckLen: uint32(len(ck)), valOff: uint32(voff), valLen: uint32(vlen), col: uint32(col),
			ttl: cell.TTL, kind: cell.Kind, timestamp: cell.Timestamp, ldt: cell.LocalDeletionTime,
		}
		voff += vlen
		blk.meta.MinTimestamp = min(blk.meta.MinTimestamp, cell.Timestamp)
		blk.meta.MaxTimestamp = max(blk.meta.MaxTimestamp, cell.Timestamp)
		blk.meta.MaxLocalDeletionTime = max(blk.meta.MaxLocalDeletionTime, cellMaxLDT(&cell))
	}
	if seen != rows {
		return nil, nil, base.CorruptionErrorf("cannot decode block: got %d rows, header says %d", seen, rows)
	}
	if voff != valEnd {
		return nil, nil, base.CorruptionErrorf("cannot decode block values: %d of %d bytes left over", valEnd-voff, valEnd)
	}
	for _, s := range [...]*cursor{&colSec, &ttlSec, &ldtSec} {
		s.done("block section")
		if s.err != nil {
			return nil, nil, s.err
		}
	}
	blk.keys, blk.data = keys.arena, data
	blk.meta.MinClustering = blk.clustering(0)
	blk.meta.MaxClustering = blk.clustering(n - 1)
	blk.size = blockBytes + int64(cap(keys.arena)) + int64(n)*cellStructSize + 64
	return blk, c.b, nil
}

// rowKeyReader returns a block's row keys in order, expanded into one
// arena sized up front.
type rowKeyReader struct {
	arena []byte
	enc   int
	// rowKeysPrefix: the section, and the previous key.
	sec  cursor
	prev []byte
	// rowKeysFixed: keys are consecutive keyLen-byte slices of arena.
	keyLen, row int
}

// newRowKeyReader checks the row key section of rows keys in encoding enc
// and expands it, rejecting keys that would expand to more than
// max(rawLen, maxBlockKeyBytes) bytes.
func newRowKeyReader(sec []byte, enc, rows, rawLen int) (rowKeyReader, error) {
	limit := max(rawLen, maxBlockKeyBytes)
	if enc == rowKeysPrefix {
		keyBytes, err := rowKeyBytes(sec, rows, limit)
		if err != nil {
			return rowKeyReader{}, err
		}
		return rowKeyReader{arena: make([]byte, 0, keyBytes), sec: cursor{b: sec}}, nil
	}
	c := cursor{b: sec}
	l := c.uvarint("row key length")
	first := c.take("first row key", 8)
	if c.err != nil {
		return rowKeyReader{}, c.err
	}
	if l < 8 || l > uint64(limit) || uint64(rows)*l > uint64(limit) {
		return rowKeyReader{}, base.CorruptionErrorf("cannot decode fixed-width row keys: got %d keys of %d bytes, want 8 or more bytes and at most %d in all", rows, l, limit)
	}
	keyLen := int(l)
	var deltas planes
	if rows > 1 {
		deltas = uintColumn(&c, rows-1, "row key deltas")
	}
	tail := keyLen - 8
	rest := c.take("row key tails", tail*rows)
	c.done("block row keys")
	if c.err != nil {
		return rowKeyReader{}, c.err
	}
	arena := make([]byte, rows*keyLen)
	v := binary.BigEndian.Uint64(first)
	for r := 0; r < rows; r++ {
		if r > 0 {
			v += deltas.next()
		}
		key := arena[r*keyLen : (r+1)*keyLen]
		binary.BigEndian.PutUint64(key, v)
		for i := 0; i < tail; i++ {
			key[8+i] = rest[i*rows+r]
		}
	}
	return rowKeyReader{arena: arena, enc: enc, keyLen: keyLen}, nil
}

// next returns the next row key and its offset in the arena; the caller
// reads at most the rows the reader was made for. The key is
// capacity-limited.
func (k *rowKeyReader) next() ([]byte, int) {
	if k.enc == rowKeysFixed {
		r := k.row
		k.row++
		return k.arena[r*k.keyLen : (r+1)*k.keyLen : (r+1)*k.keyLen], r * k.keyLen
	}
	// rowKeyBytes has checked every entry.
	shared := k.sec.uvarint("row key prefix")
	suffix := k.sec.bytes("row key suffix")
	start := len(k.arena)
	k.arena = append(k.arena, k.prev[:shared]...)
	k.arena = append(k.arena, suffix...)
	k.prev = k.arena[start:len(k.arena):len(k.arena)]
	return k.prev, start
}

// rowKeyBytes walks a prefix-encoded row-key section and returns the total
// length of the full keys it expands to, rejecting a prefix longer than the
// previous key, a row count that disagrees with the header and a total
// above limit.
func rowKeyBytes(sec []byte, rows, limit int) (int, error) {
	c := cursor{b: sec}
	total, prev := 0, 0
	for i := 0; i < rows; i++ {
		shared := c.uvarint("row key prefix")
		suffix := c.length("row key suffix length", 1)
		c.take("row key suffix", suffix)
		if c.err != nil {
			return 0, c.err
		}
		if shared > uint64(prev) {
			return 0, base.CorruptionErrorf("cannot decode row %d key: shares %d bytes with a %d-byte key", i, shared, prev)
		}
		prev = int(shared) + suffix
		total += prev
		if total > limit {
			return 0, base.CorruptionErrorf("cannot decode block: row keys expand to more than %d bytes", limit)
		}
	}
	c.done("block row keys")
	return total, c.err
}

// Byte planes: a section of n unsigned integers is stored as a width byte
// w (1..8), then n low bytes, then n second bytes, and so on to w planes
// (empty when n is 0). Timestamp deltas and value lengths vary in their low
// bytes and hardly at all in their high bytes; split into planes, zstd's
// entropy coder squeezes the near-constant high planes to almost nothing,
// where varints would interleave them with continuation bits.

func planesWidth(vals []uint64) int {
	var m uint64
	for _, v := range vals {
		m |= v
	}
	w := 1
	for m > 0xff {
		m >>= 8
		w++
	}
	return w
}

func planesLen(vals []uint64) int {
	if len(vals) == 0 {
		return 0
	}
	return 1 + planesWidth(vals)*len(vals)
}

func appendPlanes(dst []byte, vals []uint64) []byte {
	if len(vals) == 0 {
		return dst
	}
	w := planesWidth(vals)
	dst = append(dst, byte(w))
	for p := 0; p < w; p++ {
		shift := 8 * p
		for _, v := range vals {
			dst = append(dst, byte(v>>shift))
		}
	}
	return dst
}

// planes reads back the integers of a byte-plane section in order.
type planes struct {
	b        []byte
	n, i     int
	w        int // 0: every value is constant (a uint column, value_shapes.go)
	constant uint64
}

// decodePlanes checks that sec holds exactly n integers.
func decodePlanes(sec []byte, n int, what string) (planes, error) {
	if n == 0 {
		if len(sec) != 0 {
			return planes{}, base.CorruptionErrorf("cannot decode %s: got %d bytes for no values", what, len(sec))
		}
		return planes{}, nil
	}
	if len(sec) == 0 || sec[0] == 0 || sec[0] > 8 {
		return planes{}, base.CorruptionErrorf("cannot decode %s: bad width in %d bytes", what, len(sec))
	}
	w := int(sec[0])
	if len(sec)-1 != w*n {
		return planes{}, base.CorruptionErrorf("cannot decode %s: got %d bytes, want %d for %d values of %d bytes", what, len(sec)-1, w*n, n, w)
	}
	return planes{b: sec[1:], n: n, w: w}, nil
}

// next returns the next integer; the caller reads at most n.
func (p *planes) next() uint64 {
	if p.w == 0 {
		p.i++
		return p.constant
	}
	var v uint64
	for k := 0; k < p.w; k++ {
		v |= uint64(p.b[k*p.n+p.i]) << (8 * k)
	}
	p.i++
	return v
}
