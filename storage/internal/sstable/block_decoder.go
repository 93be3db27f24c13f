package sstable

// This file holds the data block decoder (decodeBlock, block): the reader
// side of the block format described in block.go.

import (
	"bytes"
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/eventide/eventide/storage/internal/base"
)

// block is a decoded data block. It is immutable once decoded (but for
// shaped values left out of a partial rebuild, which lazyValues fills in
// once, without touching the rest) and may be shared between goroutines
// through the Cache.
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
	// colsBuf and namesBuf are cols' and, for shaped values, the copied
	// column names' first arrays: most blocks have a column or two with
	// short names, and then the block is one allocation.
	colsBuf  [2][]byte
	namesBuf [16]byte
	// lazy is set when only some of the block's shaped values were
	// rebuilt (see lazyValues); nil when all were.
	lazy *lazyValues
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
	return decodeBlockInto(raw, version, nil, nil, nil)
}

// decodeBlockInto is decodeBlock decoding the cells into cells' array,
// shaped values into vals' array and expanded row keys into keysDst's
// array when they are large enough.
func decodeBlockInto(raw []byte, version uint32, cells []packedCell, valsDst, keysDst []byte) (*block, []byte, error) {
	return decodeBlockValues(raw, version, cells, valsDst, keysDst, false)
}

// decodeBlockValues is decodeBlockInto; with deferValues, a block of
// shaped values is returned with none of its values rebuilt (its cells
// say where each will be, and its lazy field holds what rebuilds them):
// the caller must call buildValues before the block's cells are read,
// and before the block is shared (see lazyValues).
func decodeBlockValues(raw []byte, version uint32, cells []packedCell, valsDst, keysDst []byte, deferValues bool) (*block, []byte, error) {
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
	blk := new(block)
	cols := blk.colsBuf[:0]
	if ncols <= len(blk.colsBuf) {
		cols = blk.colsBuf[:ncols]
	} else {
		cols = make([][]byte, ncols)
	}
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
		sc := getShapeScratch()
		limit := max(maxShapedExpansion*len(raw), maxBlockKeyBytes)
		if deferValues {
			var lz *lazyValues
			if vals, shapedLens, lz, err = deferShapedValues(sc, lenRaw, valSec.b, nlens, limit, valsDst); err != nil {
				sc.put()
				return nil, nil, err
			}
			// sc is lz's until buildValues; a block that fails to
			// decode below leaves it to the garbage collector.
			blk.lazy = lz
		} else {
			defer sc.put()
			if vals, shapedLens, err = decodeShapedValuesWith(sc, lenRaw, valSec.b, nlens, limit, valsDst); err != nil {
				return nil, nil, err
			}
		}
		valSec = cursor{b: vals}
		data, voff = vals, 0
		// Values come from their own buffer; copy the column names too,
		// and nothing refers to raw any more.
		names := 0
		for _, col := range cols {
			names += len(col)
		}
		arena := blk.namesBuf[:0]
		if names > len(blk.namesBuf) {
			arena = make([]byte, 0, names)
		}
		for i, col := range cols {
			arena = append(arena, col...)
			cols[i] = arena[len(arena)-len(col) : len(arena) : len(arena)]
		}
		blockBytes = int64(cap(vals)) + int64(names)
		aliasesRaw = false
	} else if lenSec, err = decodePlanes(lenRaw, nlens, "block value lengths"); err != nil {
		return nil, nil, err
	}

	keys, err := newRowKeyReader(rowSec.b, keyEnc, rows, len(raw), keysDst)
	if err != nil {
		return nil, nil, err
	}
	if cap(cells) >= n {
		cells = cells[:n]
	} else {
		cells = make([]packedCell, n)
	}
	blk.cells, blk.cols, blk.aliasesRaw = cells, cols, aliasesRaw
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
// max(rawLen, maxBlockKeyBytes) bytes, into dst's array if it is large
// enough.
func newRowKeyReader(sec []byte, enc, rows, rawLen int, dst []byte) (rowKeyReader, error) {
	limit := max(rawLen, maxBlockKeyBytes)
	if enc == rowKeysPrefix {
		keyBytes, err := rowKeyBytes(sec, rows, limit)
		if err != nil {
			return rowKeyReader{}, err
		}
		if cap(dst) < keyBytes {
			dst = make([]byte, 0, keyBytes)
		}
		return rowKeyReader{arena: dst[:0], sec: cursor{b: sec}}, nil
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
	var arena []byte
	if cap(dst) >= rows*keyLen {
		arena = dst[:rows*keyLen]
	} else {
		arena = make([]byte, rows*keyLen)
	}
	expandFixedKeys(arena, binary.BigEndian.Uint64(first), &deltas, rest, rows, keyLen)
	return rowKeyReader{arena: arena, enc: enc, keyLen: keyLen}, nil
}

// expandFixedKeys writes rows fixed-width keys of keyLen bytes into arena:
// each key's first 8 bytes are first plus the running sum of deltas (rows-1
// of them), big-endian, and its other keyLen-8 bytes are byte r of each of
// rest's planes (rest holds the tails transposed: byte i of every key,
// then byte i+1, ...).
//
// This runs for every row of every data block read. The deltas are read
// a plane at a time (four planes at most, which a gap between two event
// times always fits in) rather than through planes.next, and the tails
// are gathered from up to eight planes at once, so that the loop per row
// holds neither a call nor a loop over planes.
func expandFixedKeys(arena []byte, v uint64, deltas *planes, rest []byte, rows, keyLen int) {
	binary.BigEndian.PutUint64(arena, v)
	switch w, n := deltas.w, deltas.n; {
	case rows == 1:
	case w == 0:
		for r := 1; r < rows; r++ {
			v += deltas.constant
			binary.BigEndian.PutUint64(arena[r*keyLen:], v)
		}
	case w <= 4:
		var pl [4][]byte
		for k := range pl {
			pl[k] = deltas.b[min(k, w-1)*n : (min(k, w-1)+1)*n]
		}
		// Planes past the width repeat the last one; mask drops them.
		mask := uint64(1)<<(8*w) - 1
		p0, p1, p2, p3 := pl[0][:n], pl[1][:n], pl[2][:n], pl[3][:n]
		for i := 0; i < n; i++ {
			d := uint64(p0[i]) | uint64(p1[i])<<8 | uint64(p2[i])<<16 | uint64(p3[i])<<24
			v += d & mask
			binary.BigEndian.PutUint64(arena[(i+1)*keyLen:], v)
		}
	default:
		for r := 1; r < rows; r++ {
			v += deltas.next()
			binary.BigEndian.PutUint64(arena[r*keyLen:], v)
		}
	}
	tail := keyLen - 8
	if tail == 8 {
		t0, t1, t2, t3 := rest[0*rows:1*rows], rest[1*rows:2*rows], rest[2*rows:3*rows], rest[3*rows:4*rows]
		t4, t5, t6, t7 := rest[4*rows:5*rows], rest[5*rows:6*rows], rest[6*rows:7*rows], rest[7*rows:8*rows]
		for r := 0; r < rows; r++ {
			t := uint64(t0[r]) | uint64(t1[r])<<8 | uint64(t2[r])<<16 | uint64(t3[r])<<24 |
				uint64(t4[r])<<32 | uint64(t5[r])<<40 | uint64(t6[r])<<48 | uint64(t7[r])<<56
			binary.LittleEndian.PutUint64(arena[r*keyLen+8:], t)
		}
		return
	}
	for i := 0; i < tail; i++ {
		plane := rest[i*rows : (i+1)*rows]
		for r, c := range plane {
			arena[r*keyLen+8+i] = c
		}
	}
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

// next returns the next integer; the caller reads at most n. One byte
// wide is the common case (value and suffix lengths under 256) and is
// read without the loop over planes.
func (p *planes) next() uint64 {
	i := p.i
	p.i++
	switch p.w {
	case 0:
		return p.constant
	case 1:
		return uint64(p.b[i])
	}
	return p.wide(i)
}

// wide is integer i of planes two or more bytes wide.
func (p *planes) wide(i int) uint64 {
	var v uint64
	for k := 0; k < p.w; k++ {
		v |= uint64(p.b[k*p.n+i]) << (8 * k)
	}
	return v
}

// prefixSum is the sum of the first r integers (r <= n), added up a plane
// at a time as sum does; the caller knows the sum of all n fits (a
// column's lengths, checked against its section).
func (p *planes) prefixSum(r int) int {
	if p.w == 0 {
		return int(p.constant) * r
	}
	total := 0
	for k := 0; k < p.w; k++ {
		s := 0
		for _, c := range p.b[k*p.n : k*p.n+r] {
			s += int(c)
		}
		total += s << (8 * k)
	}
	return total
}

// sum is the sum of all n integers, without reading them one by one:
// each plane's bytes are added up and shifted into place. ok is false
// when the sum could pass 2^63 (planes wider than 4 bytes, which no
// length needs), so the caller adds them one by one instead.
func (p *planes) sum() (total uint64, ok bool) {
	if p.w == 0 {
		if p.constant > math.MaxUint32 {
			return 0, false
		}
		return p.constant * uint64(p.n), true
	}
	if p.w > 4 {
		return 0, false
	}
	for k := 0; k < p.w; k++ {
		var s uint64
		for _, c := range p.b[k*p.n : (k+1)*p.n] {
			s += uint64(c)
		}
		total += s << (8 * k)
	}
	return total, true
}
