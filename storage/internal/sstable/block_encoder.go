package sstable

// This file holds the data block encoder (blockBuilder): the writer side
// of the block format described in block.go.

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"

	"github.com/eventide/eventide/storage/internal/base"
)

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
	b.splits = mergeSmallParts(b.splits)
	meta := b.meta
	meta.MinClustering = b.minCK
	meta.MaxClustering = b.prevCK
	return dst, meta, b.splits
}

// minZstdPart is the smallest part of a data block that ends a zstd block
// of its own: a smaller one (a hole column of short scalars, like a
// two-letter country code) joins the next part. Each zstd block carries
// its own literal table, which the reader decodes and builds (a Huffman
// table whose weights are themselves FSE-coded) before it decodes a byte:
// in a cold read of one block, about a fifth of the CPU went into reading
// these tables. Measured on loadtest/peers' JSON events at 2,000,000
// events: 32.9 bytes/event without merging, 32.8 with 512 and 640, 32.9
// with 768, 33.2 with 1024; cold BenchmarkExpiredRead and
// BenchmarkWindowSlice 3-6% less CPU with 512.
const minZstdPart = 512

// mergeSmallParts drops from splits (ascending offsets where a block's
// zstd blocks end) each split that would end a part of fewer than
// minZstdPart bytes, so that part joins the next one.
func mergeSmallParts(splits []int) []int {
	out := splits[:0]
	prev := 0
	for _, sp := range splits {
		if sp-prev >= minZstdPart {
			out = append(out, sp)
			prev = sp
		}
	}
	return out
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
