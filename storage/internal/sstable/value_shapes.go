package sstable

import (
	"bytes"
	"encoding/binary"
	"slices"
	"sync"

	"github.com/eventide/eventide/storage/internal/base"
)

// Shaped values (format version 2, block encoding flag valuesShaped).
//
// Event payloads are JSON objects that repeat the same keys and punctuation
// in every value and differ only in their scalars. zstd finds the repeats,
// but pays a match sequence for each of them and codes every scalar with one
// literal table shared by digits, hex strings and words alike. A shaped
// values section splits each value into
//
//   - its shape: the value with every scalar replaced by the hole byte 0xFF
//     (object keys, punctuation and whitespace stay), stored once per block
//     in a shape dictionary, and
//   - its holes: the scalars, stored column by column: all first holes of
//     the values of shape 0, then all second holes, ..., then the holes of
//     shape 1, and so on. A column stores the prefix its entries share once,
//     the lengths of the rest, and the rest.
//
// The writer ends a zstd block at every column (of at least minZstdPart
// bytes), so each column gets literal and sequence tables of its own. On the issue 2 event workload this
// shrinks the values from 29 to about 21 bytes per event.
//
// Decoding does not parse JSON: a value is its shape with the holes filled
// in, whatever the bytes are. The writer's scanner only decides where holes
// go, so any value round-trips exactly, JSON or not; a value holding 0xFF,
// or with an unterminated string, is the one-hole shape "\xFF" (the whole
// value in one column).
//
// Layout, in the block's valueLens section ("shapes") and values section:
//
//	shapes:
//	  count uvarint (1..maxShapes), then each shape as bytes (>= 1 byte)
//	  shape index of each value: uint column (n = values in the block)
//	  per column, in column order (shape, then hole within the shape):
//	    prefix bytes | suffix lengths: uint column (n = values of the shape)
//	values:
//	  the suffixes of column 0, then of column 1, ... concatenated
//
//	uint column of n integers: a width u8; 0 means all n are equal to the
//	uvarint that follows; 1..8 means byte planes of that width (see
//	appendPlanes) without their own width byte.
//
// Every value must reconstruct to at least one byte (empty values have the
// cellEmptyValue flag), and all values together to at most
// max(maxShapedExpansion * the block's raw length, maxBlockKeyBytes): a
// shape shared by many values must not let a small block allocate without
// bound.

const (
	// holeByte marks a hole in a shape. It never occurs in UTF-8 text.
	holeByte = 0xFF
	// maxShapes bounds a block's shape dictionary; a block whose values
	// need more is stored with plain values.
	maxShapes = 64
	// maxShapeColumns bounds the hole columns of a block.
	maxShapeColumns = 1024
	// maxValueHoles is the most holes one value is split into; a value
	// with more (a long array of numbers) becomes one hole.
	maxValueHoles = 128
	// maxShapedExpansion bounds the reconstructed values of a block
	// relative to its raw length.
	maxShapedExpansion = 16
)

// isJSONStructural reports whether c ends a bare scalar: punctuation,
// whitespace or a quote.
func isJSONStructural(c byte) bool {
	switch c {
	case '{', '}', '[', ']', ',', ':', '"', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// shapeValue appends v's shape to shape and the spans of its holes (offsets
// into v) to holes. Strings that are followed by a colon are object keys and
// stay in the shape; other strings become a hole between their quotes; bare
// tokens (numbers, true, false, null, anything else) become a hole.
func shapeValue(v, shape []byte, holes [][2]int32) ([]byte, [][2]int32) {
	shape0, holes0 := len(shape), len(holes)
	whole := func() ([]byte, [][2]int32) {
		return append(shape[:shape0], holeByte), append(holes[:holes0], [2]int32{0, int32(len(v))})
	}
	if bytes.IndexByte(v, holeByte) >= 0 {
		return whole()
	}
	for i := 0; i < len(v); {
		c := v[i]
		switch {
		case c == '"':
			j := i + 1
			for j < len(v) && v[j] != '"' {
				if v[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(v) {
				return whole()
			}
			k := j + 1
			for k < len(v) && (v[k] == ' ' || v[k] == '\t' || v[k] == '\n' || v[k] == '\r') {
				k++
			}
			if k < len(v) && v[k] == ':' {
				shape = append(shape, v[i:j+1]...)
			} else {
				shape = append(shape, '"', holeByte, '"')
				holes = append(holes, [2]int32{int32(i + 1), int32(j)})
			}
			i = j + 1
		case isJSONStructural(c):
			shape = append(shape, c)
			i++
		default:
			j := i + 1
			for j < len(v) && !isJSONStructural(v[j]) {
				j++
			}
			shape = append(shape, holeByte)
			holes = append(holes, [2]int32{int32(i), int32(j)})
			i = j
		}
		if len(holes)-holes0 > maxValueHoles {
			return whole()
		}
	}
	return shape, holes
}

// shapeEncoder is the reusable state of shaping one block's values.
type shapeEncoder struct {
	shapes    []byte         // the dictionary's shapes, concatenated
	shapeEnds []int          // end of each shape in shapes
	index     map[string]int // shape -> its number
	holesOf   []int          // holes per shape
	valShape  []uint64       // shape number of each value
	valHoles  []int          // first span of each value in spans
	spans     [][2]int32     // hole spans, absolute offsets into the values
	colStart  []int          // first entry of each column in colEnt
	colFill   []int          // scratch: entries placed per column
	colEnt    []int32        // span numbers, column by column
	lens      []uint64       // scratch: one column's suffix lengths
	shape     []byte         // scratch: the shape of one value
}

// encode shapes the n values concatenated in vals with lengths lens. It
// appends the shapes section to shapesDst and the values section to
// valuesDst and returns both with the offsets in valuesDst where each
// column starts. ok is false when the values do not fit the limits (too
// many shapes or columns) or have no structure (every value is one hole);
// the caller then stores them plain.
func (e *shapeEncoder) encode(vals []byte, lens []uint64, shapesDst, valuesDst []byte, colOffs []int) (shapesOut, valuesOut []byte, colOffsOut []int, ok bool) {
	e.shapes, e.shapeEnds, e.holesOf = e.shapes[:0], e.shapeEnds[:0], e.holesOf[:0]
	e.valShape, e.valHoles, e.spans = e.valShape[:0], e.valHoles[:0], e.spans[:0]
	if e.index == nil {
		e.index = make(map[string]int)
	}
	clear(e.index)
	off := 0
	for _, l := range lens {
		v := vals[off : off+int(l)]
		first := len(e.spans)
		e.shape, e.spans = shapeValue(v, e.shape[:0], e.spans)
		shape := e.shape
		for k := first; k < len(e.spans); k++ {
			e.spans[k][0] += int32(off)
			e.spans[k][1] += int32(off)
		}
		s, seen := e.index[string(shape)]
		if !seen {
			if len(e.shapeEnds) == maxShapes {
				return shapesDst, valuesDst, colOffs, false
			}
			s = len(e.shapeEnds)
			e.shapes = append(e.shapes, shape...)
			e.shapeEnds = append(e.shapeEnds, len(e.shapes))
			e.index[string(e.shapes[len(e.shapes)-len(shape):])] = s
			e.holesOf = append(e.holesOf, len(e.spans)-first)
		}
		e.valShape = append(e.valShape, uint64(s))
		e.valHoles = append(e.valHoles, first)
		off += int(l)
	}

	if len(e.shapeEnds) == 1 && e.shapeEnds[0] == 1 && e.shapes[0] == holeByte {
		// Nothing but whole values: no structure to take out.
		return shapesDst, valuesDst, colOffs, false
	}

	// Columns: shape by shape, hole by hole. Place every span in its
	// column (a counting sort over the values in order).
	ncols := 0
	colBase := make([]int, len(e.holesOf))
	for s, h := range e.holesOf {
		colBase[s] = ncols
		ncols += h
	}
	if ncols > maxShapeColumns {
		return shapesDst, valuesDst, colOffs, false
	}
	e.colStart = slices.Grow(e.colStart[:0], ncols+1)[:ncols+1]
	clear(e.colStart)
	perShape := make([]int, len(e.holesOf))
	for _, s := range e.valShape {
		perShape[s]++
	}
	pos := 0
	for s, h := range e.holesOf {
		for j := 0; j < h; j++ {
			e.colStart[colBase[s]+j] = pos
			pos += perShape[s]
		}
	}
	e.colStart[ncols] = pos
	e.colFill = slices.Grow(e.colFill[:0], ncols)[:ncols]
	copy(e.colFill, e.colStart[:ncols])
	e.colEnt = slices.Grow(e.colEnt[:0], pos)[:pos]
	for v, s := range e.valShape {
		for j := 0; j < e.holesOf[s]; j++ {
			c := colBase[s] + j
			e.colEnt[e.colFill[c]] = int32(e.valHoles[v] + j)
			e.colFill[c]++
		}
	}

	shapesDst = binary.AppendUvarint(shapesDst, uint64(len(e.shapeEnds)))
	start := 0
	for _, end := range e.shapeEnds {
		shapesDst = appendBytes(shapesDst, e.shapes[start:end])
		start = end
	}
	shapesDst = appendUintColumn(shapesDst, e.valShape)
	for c := 0; c < ncols; c++ {
		ents := e.colEnt[e.colStart[c]:e.colStart[c+1]]
		first := e.spans[ents[0]]
		prefix := vals[first[0]:first[1]]
		for _, k := range ents[1:] {
			sp := e.spans[k]
			prefix = prefix[:commonPrefix(prefix, vals[sp[0]:sp[1]])]
		}
		shapesDst = appendBytes(shapesDst, prefix)
		e.lens = e.lens[:0]
		colOffs = append(colOffs, len(valuesDst))
		for _, k := range ents {
			sp := e.spans[k]
			e.lens = append(e.lens, uint64(int(sp[1]-sp[0])-len(prefix)))
			valuesDst = append(valuesDst, vals[int(sp[0])+len(prefix):sp[1]]...)
		}
		shapesDst = appendUintColumn(shapesDst, e.lens)
	}
	return shapesDst, valuesDst, colOffs, true
}

// appendUintColumn appends vals as a uint column: width 0 and one uvarint
// when they are all equal, else byte planes.
func appendUintColumn(dst []byte, vals []uint64) []byte {
	allEqual := true
	for _, v := range vals[1:] {
		if v != vals[0] {
			allEqual = false
			break
		}
	}
	if allEqual {
		dst = append(dst, 0)
		return binary.AppendUvarint(dst, vals[0])
	}
	return appendPlanes(dst, vals)
}

// uintColumn reads a uint column of n (>= 1) integers from c.
func uintColumn(c *cursor, n int, what string) planes {
	w := int(c.byte1(what))
	if c.err != nil {
		return planes{}
	}
	if w == 0 {
		return planes{n: n, constant: c.uvarint(what)}
	}
	if w > 8 {
		c.fail(what, "got width %d, want 0..8", w)
		return planes{}
	}
	if n > len(c.b)/w {
		c.fail(what, "got %d bytes, want %d for %d values of %d bytes", len(c.b), w*n, n, w)
		return planes{}
	}
	return planes{b: c.take(what, w*n), n: n, w: w}
}

// shapeColumn is one hole column being read back.
type shapeColumn struct {
	prefix []byte
	lead   []byte // the shape's bytes before this hole, then prefix
	lens   planes
	data   []byte
	// off is how much of data was used. An offset, not a reslice of
	// data: storing a pointer into the heap-allocated column costs a GC
	// write barrier per hole.
	off int
}

// shapeScratch is what decoding one block's shaped values uses only while
// it runs (and the value lengths, until the block's cells are decoded):
// pooled, so that a block read allocates no more than what the block
// keeps. Everything in it that points into a block's bytes is cleared
// before it goes back to the pool.
type shapeScratch struct {
	shapes   [][]byte
	colBase  []int
	perShape []int
	cols     []shapeColumn
	leads    []byte
	tails    [][]byte
	lens     []uint32
	// For valueLens and buildValues.
	fixed []uint32
	at    []int
	pos   []int32
	rank  []int
}

var shapeScratchPool = sync.Pool{New: func() any { return new(shapeScratch) }}

func getShapeScratch() *shapeScratch { return shapeScratchPool.Get().(*shapeScratch) }

// put clears what aliases a block and returns sc to the pool.
func (sc *shapeScratch) put() {
	clear(sc.shapes)
	clear(sc.cols)
	clear(sc.tails)
	shapeScratchPool.Put(sc)
}

// resize returns s with length n, reusing its array when it is large
// enough; its contents are not cleared.
func resize[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// decodeShapedValues reconstructs the n values of a block from its shapes
// and values sections. It returns them concatenated, in dst's array if it
// is large enough, with their lengths. limit bounds the reconstructed
// bytes.
func decodeShapedValues(shapesSec, valuesSec []byte, n, limit int, dst []byte) ([]byte, []uint32, error) {
	return decodeShapedValuesWith(new(shapeScratch), shapesSec, valuesSec, n, limit, dst)
}

// decodeShapedValuesWith is decodeShapedValues using sc's buffers; the
// lengths it returns are sc's, valid until sc is reused.
func decodeShapedValuesWith(sc *shapeScratch, shapesSec, valuesSec []byte, n, limit int, dst []byte) ([]byte, []uint32, error) {
	total, idx, err := sc.parse(shapesSec, valuesSec, n, limit)
	if err != nil {
		return nil, nil, err
	}
	out := shapedValuesBuffer(dst, total)
	sc.lens = resize(sc.lens, n)
	lens := sc.lens
	o := 0
	for i := 0; i < n; i++ {
		start := o
		o = sc.buildValue(out, o, int(idx.next()))
		if o == start {
			return nil, nil, base.CorruptionErrorf("cannot decode value %d: it is empty", i)
		}
		lens[i] = uint32(o - start)
	}
	return out[:total], lens, nil
}

// shapedValuesBuffer returns a buffer for total bytes of values and the
// copySlack bytes of scratch after them (the values end at total; the
// bytes after are for copyShort's whole-word stores): dst's array if it
// is large enough.
func shapedValuesBuffer(dst []byte, total int) []byte {
	out := dst[:0]
	if cap(out) < total+copySlack {
		// A little larger than needed, so that a recycled buffer
		// (a released block's data) fits the next block.
		out = make([]byte, 0, roundUp(total+copySlack, recycleRawStep))
	}
	return out[:total+copySlack]
}

// parse reads and checks the shapes section of n values and their
// values section into sc (shapes, columns with their leads, tails), as
// far as it can without rebuilding a value, and returns the values'
// rebuilt size and the values' shape indexes. It rejects what
// decodeShapedValues rejects, but for empty values (see valueLens).
func (sc *shapeScratch) parse(shapesSec, valuesSec []byte, n, limit int) (int, planes, error) {
	c := cursor{b: shapesSec}
	nshapes := c.length("value shape count", 1)
	if c.err != nil {
		return 0, planes{}, c.err
	}
	if nshapes == 0 || nshapes > maxShapes {
		return 0, planes{}, base.CorruptionErrorf("cannot decode value shapes: got %d shapes, want 1..%d", nshapes, maxShapes)
	}
	sc.shapes = resize(sc.shapes, nshapes)
	sc.colBase = resize(sc.colBase, nshapes+1)
	shapes, colBase := sc.shapes, sc.colBase
	colBase[0] = 0
	for s := range shapes {
		shapes[s] = c.bytes("value shape")
		if c.err == nil && len(shapes[s]) == 0 {
			return 0, planes{}, base.CorruptionErrorf("cannot decode value shape %d: it is empty", s)
		}
		colBase[s+1] = colBase[s] + bytes.Count(shapes[s], []byte{holeByte})
	}
	ncols := colBase[nshapes]
	if c.err == nil && ncols > maxShapeColumns {
		return 0, planes{}, base.CorruptionErrorf("cannot decode value shapes: got %d hole columns, want at most %d", ncols, maxShapeColumns)
	}
	idx := uintColumn(&c, n, "value shape indexes")
	if c.err != nil {
		return 0, planes{}, c.err
	}
	sc.perShape = resize(sc.perShape, nshapes)
	perShape := sc.perShape
	clear(perShape)
	scan := idx
	for i := 0; i < n; i++ {
		s := scan.next()
		if s >= uint64(nshapes) {
			return 0, planes{}, base.CorruptionErrorf("cannot decode value %d: got shape %d, want < %d", i, s, nshapes)
		}
		perShape[s]++
	}
	// Reconstructed size: every value's shape less its holes, plus each
	// column's prefix per entry and its suffixes.
	total := uint64(0)
	for s, shape := range shapes {
		total += uint64(perShape[s]) * uint64(len(shape)-(colBase[s+1]-colBase[s]))
	}
	sc.cols = resize(sc.cols, ncols)
	cols := sc.cols
	clear(cols)
	dataOff := 0
	for s := range shapes {
		for k := colBase[s]; k < colBase[s+1]; k++ {
			col := &cols[k]
			col.prefix = c.bytes("value column prefix")
			if perShape[s] == 0 {
				continue
			}
			col.lens = uintColumn(&c, perShape[s], "value column lengths")
			if c.err != nil {
				return 0, planes{}, c.err
			}
			sum, ok := col.lens.sum()
			if !ok {
				sum = 0
				scan := col.lens
				for i := 0; i < perShape[s] && sum <= uint64(len(valuesSec)-dataOff); i++ {
					sum += scan.next()
				}
			}
			if sum > uint64(len(valuesSec)-dataOff) {
				return 0, planes{}, base.CorruptionErrorf("cannot decode value column %d: its lengths pass the %d bytes of values left", k, len(valuesSec)-dataOff)
			}
			col.data = valuesSec[dataOff : dataOff+int(sum)]
			dataOff += int(sum)
			total += uint64(perShape[s]) * uint64(len(col.prefix))
			total += sum
		}
	}
	if c.err != nil {
		return 0, planes{}, c.err
	}
	if len(c.b) != 0 {
		return 0, planes{}, base.CorruptionErrorf("cannot decode value shapes: got %d trailing bytes", len(c.b))
	}
	if dataOff != len(valuesSec) {
		return 0, planes{}, base.CorruptionErrorf("cannot decode value columns: they hold %d of the %d bytes of values", dataOff, len(valuesSec))
	}
	if total > uint64(limit) {
		return 0, planes{}, base.CorruptionErrorf("cannot decode values: they expand to %d bytes, more than %d", total, limit)
	}
	// Each column's lead is the part of its shape before its hole
	// followed by the column's prefix, and each shape's tail what follows
	// its last hole: filling a value is then two copies per hole and one
	// at the end.
	leadBytes := 0
	for k := range cols {
		leadBytes += len(cols[k].prefix)
	}
	for _, shape := range shapes {
		leadBytes += len(shape)
	}
	// Tails are kept in leads too (within the shapes' bytes counted
	// above), and leads has copySlack spare bytes at its end, so that
	// every lead and tail can be copied with copyShort.
	sc.leads = resize(sc.leads, leadBytes+copySlack)[:0]
	sc.tails = resize(sc.tails, nshapes)
	leads, tails := sc.leads, sc.tails
	for s, shape := range shapes {
		from := 0
		for k := colBase[s]; k < colBase[s+1]; k++ {
			h := from + bytes.IndexByte(shape[from:], holeByte)
			start := len(leads)
			leads = append(leads, shape[from:h]...)
			leads = append(leads, cols[k].prefix...)
			cols[k].lead = leads[start:len(leads)]
			from = h + 1
		}
		start := len(leads)
		leads = append(leads, shape[from:]...)
		tails[s] = leads[start:len(leads)]
	}
	return int(total), idx, nil
}

// valueLens sets and returns sc.lens to the lengths of the n values
// parse read, column by column, without rebuilding them; it rejects an
// empty value as decodeShapedValues does. idx is parse's.
func (sc *shapeScratch) valueLens(idx planes, n int) ([]uint32, error) {
	nshapes := len(sc.shapes)
	sc.lens = resize(sc.lens, n)
	lens := sc.lens
	// fixed[s]: what every value of shape s holds besides its suffixes.
	sc.fixed = resize(sc.fixed, nshapes)
	for s, shape := range sc.shapes {
		f := len(shape) - (sc.colBase[s+1] - sc.colBase[s])
		for k := sc.colBase[s]; k < sc.colBase[s+1]; k++ {
			f += len(sc.cols[k].prefix)
		}
		sc.fixed[s] = uint32(f)
	}
	if nshapes == 1 {
		for i := range lens {
			lens[i] = sc.fixed[0]
		}
		for k := range sc.cols {
			addLens(lens, sc.cols[k].lens)
		}
	} else {
		// Value indexes grouped by shape (a counting sort), so that each
		// column's lengths go to its shape's values in order.
		sc.at = resize(sc.at, nshapes+1)
		at := sc.at
		at[0] = 0
		for s := range nshapes {
			at[s+1] = at[s] + sc.perShape[s]
		}
		sc.pos = resize(sc.pos, n)
		scan := idx
		for i := range n {
			s := scan.next()
			sc.pos[at[s]] = int32(i)
			at[s]++
			lens[i] = sc.fixed[s]
		}
		from := 0
		for s := range nshapes {
			pos := sc.pos[from : from+sc.perShape[s]]
			for k := sc.colBase[s]; k < sc.colBase[s+1]; k++ {
				p := sc.cols[k].lens
				for _, i := range pos {
					lens[i] += uint32(p.next())
				}
			}
			from += sc.perShape[s]
		}
	}
	for i, l := range lens {
		if l == 0 {
			return nil, base.CorruptionErrorf("cannot decode value %d: it is empty", i)
		}
	}
	return lens, nil
}

// addLens adds p's integers (a column's suffix lengths, one per value of
// a block with one shape) to lens.
func addLens(lens []uint32, p planes) {
	switch p.w {
	case 0:
		for i := range lens {
			lens[i] += uint32(p.constant)
		}
	case 1:
		for i, c := range p.b[:len(lens)] {
			lens[i] += uint32(c)
		}
	default:
		for i := range lens {
			lens[i] += uint32(p.next())
		}
	}
}

// buildValues rebuilds values [va, vb) of those parse read into out, the
// first at offset off (where it starts in the block's values), and
// writes nothing at or past len(out): copyShort's whole-word stores then
// stay out of the values after vb when out ends where they start, which
// other readers may be reading. idx is parse's. It may be called again
// for another range.
func (sc *shapeScratch) buildValues(out []byte, idx planes, va, vb, off int) {
	cols, colBase := sc.cols, sc.colBase
	// Each column's next suffix: its values of each shape before va.
	sc.rank = resize(sc.rank, len(sc.shapes))
	rank := sc.rank
	clear(rank)
	idx.i = 0
	for range va {
		rank[idx.next()]++
	}
	for s := range sc.shapes {
		for k := colBase[s]; k < colBase[s+1]; k++ {
			col := &cols[k]
			col.lens.i = rank[s]
			col.off = col.lens.prefixSum(rank[s])
		}
	}
	o := off
	for range vb - va {
		o = sc.buildValue(out, o, int(idx.next()))
	}
}

// buildValue writes the next value of shape s at out[o:]: each of the
// shape's columns' lead bytes and next suffix, then the shape's tail. It
// returns the offset after it.
func (sc *shapeScratch) buildValue(out []byte, o, s int) int {
	cols := sc.cols[sc.colBase[s]:sc.colBase[s+1]]
	for k := range cols {
		col := &cols[k]
		o += copyShort(out, o, col.lead)
		l := int(col.lens.next())
		o += copyShort(out, o, col.data[col.off:col.off+l])
		col.off += l
	}
	return o + copyShort(out, o, sc.tails[s])
}

// copySlack is the scratch space copyShort may write past the end of what
// it copies.
const copySlack = 16

// copyShort copies src to dst[o:] and returns len(src). A shaped value's
// pieces are mostly a few bytes long, too short for memmove's call to
// pay: when src is at most copySlack bytes, and both src's array (up to
// its capacity) and dst have copySlack bytes from where the copy starts,
// it copies a fixed 16 bytes instead, the bytes past len(src) being
// overwritten by the next copy or lying in dst's scratch tail.
func copyShort(dst []byte, o int, src []byte) int {
	n := len(src)
	if n <= copySlack && cap(src) >= copySlack && len(dst)-o >= copySlack {
		*(*[copySlack]byte)(dst[o:]) = *(*[copySlack]byte)(src[:copySlack])
		return n
	}
	return copy(dst[o:], src)
}
