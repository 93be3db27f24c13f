package sstable

import (
	"sync"
	"sync/atomic"
)

// lazyValues is what a block whose shaped values were rebuilt only in
// part needs to rebuild the rest.
//
// A cold slice decodes whole blocks but returns only the rows within its
// bounds: the peers' window slice ~208 of the ~372 rows of the 2.3 blocks
// it reads. A PartitionIter that reads a block from the file knows, once
// the block's keys are decoded, which of its cells it will hand out (see
// cellRange), and rebuilds only their values (values [va, vb), bytes
// [offA, offB) of the block's values buffer). The cells of every value
// are decoded and checked as for a full rebuild, and every value's length
// is known (valueLens), so each cell already says where its value is.
//
// The block is then cached as it is. The rest of its values are rebuilt
// by complete, once, before any other reader reads a cell of the block:
// Cache.get completes every block it hands out. So:
//
//   - the reader that decoded the block reads only bytes [offA, offB),
//     which are written before the block is shared and never again;
//   - complete writes only bytes outside them (buildValues is bounded
//     so that copyShort's whole-word stores do not spill into offA), so
//     it may run while that reader still reads its cells;
//   - every other reader has gone through complete (mu, then done), so
//     it sees every value.
//
// The rest is rebuilt from the block's decompressed bytes, which such a
// block keeps (in its mem buffer, with the cells) for as long as it
// lives; a block whose values were all rebuilt keeps none of this.
type lazyValues struct {
	// sc holds the parsed sections from decoding until the first
	// buildValues; complete parses them again.
	sc        *shapeScratch
	idx       planes
	shapesSec []byte // the valueLens section of the decompressed block
	valuesSec []byte
	n, limit  int
	total     int
	// buf is the block's values with their copySlack bytes of scratch
	// (set where the block's buffers are final, blockPool.adopt).
	buf        []byte
	va, vb     int // the values rebuilt
	offA, offB int // where they are in buf
	mu         sync.Mutex
	done       atomic.Bool
}

// deferShapedValues is decodeShapedValuesWith rebuilding no value: it
// parses and checks the sections, and returns a buffer for the values
// (in dst's array if it is large enough) that holds none of them yet,
// their lengths, and what buildValues will need. sc is the result's.
func deferShapedValues(sc *shapeScratch, shapesSec, valuesSec []byte, n, limit int, dst []byte) ([]byte, []uint32, *lazyValues, error) {
	total, idx, err := sc.parse(shapesSec, valuesSec, n, limit)
	if err != nil {
		return nil, nil, nil, err
	}
	lens, err := sc.valueLens(idx, n)
	if err != nil {
		return nil, nil, nil, err
	}
	out := shapedValuesBuffer(dst, total)
	lz := &lazyValues{sc: sc, idx: idx, shapesSec: shapesSec, valuesSec: valuesSec, n: n, limit: limit, total: total}
	return out[:total], lens, lz, nil
}

// buildValues rebuilds the values of cells [c0, c1) of b, decoded with
// deferred values; when they are all of its values, b.lazy becomes nil
// and b is an ordinary block. It must run before b is shared.
func (b *block) buildValues(c0, c1 int) {
	lz := b.lazy
	sc := lz.sc
	lz.sc = nil
	defer sc.put()
	c0, c1 = max(c0, 0), min(max(c1, c0), len(b.cells))
	va := 0
	for i := range c0 {
		if b.cells[i].valLen > 0 {
			va++
		}
	}
	vb := va
	for i := c0; i < c1; i++ {
		if b.cells[i].valLen > 0 {
			vb++
		}
	}
	offA, offB := 0, 0
	for i, l := range sc.lens[:vb] {
		if i < va {
			offA += int(l)
		}
		offB += int(l)
	}
	buf := b.data[:lz.total+copySlack]
	if va == 0 && vb == lz.n {
		sc.buildValues(buf, lz.idx, 0, lz.n, 0)
		b.lazy = nil
		return
	}
	sc.buildValues(buf, lz.idx, va, vb, offA)
	lz.va, lz.vb, lz.offA, lz.offB = va, vb, offA, offB
}

// complete rebuilds the values buildValues left out, once; see
// lazyValues. A nil lz is complete.
func (lz *lazyValues) complete() {
	if lz == nil || lz.done.Load() {
		return
	}
	lz.mu.Lock()
	defer lz.mu.Unlock()
	if lz.done.Load() {
		return
	}
	sc := getShapeScratch()
	defer sc.put()
	total, idx, err := sc.parse(lz.shapesSec, lz.valuesSec, lz.n, lz.limit)
	if err != nil || total != lz.total {
		panic("BUG: sstable block's shaped values no longer parse as they did when it was decoded")
	}
	sc.buildValues(lz.buf[:lz.offA], idx, 0, lz.va, 0)
	sc.buildValues(lz.buf, idx, lz.vb, lz.n, lz.offB)
	lz.done.Store(true)
}
