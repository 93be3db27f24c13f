package sstable

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// loadedBlock is a decoded data block as readers and the cache share it.
// Everything a cell aliases lives in the block's arena buffers (see
// blockArena): mem holds the packed cells, then the decompressed bytes
// when the cells alias them; extra the expanded row keys and, for shaped
// values, the rebuilt values (and then the cells too, and mem is nil).
// It counts its references (the cache's, one per iterator or scanner
// holding it) so that, once the last one is released, its buffers go back
// to the arena for the next block read: they are neither left to the
// garbage collector (an uncached read allocated ~50 KiB for a 32 KiB block,
// and under a steady stream of cache misses the GC cycles that made were
// what made the slowest reads several times slower than the median) nor,
// since they are mapped outside the Go heap, counted by it.
//
// Holding a reference is what keeps the cells valid: every holder must
// release it (PartitionIter.Close, the Scanner as it moves on, Check after
// each block). A block never released keeps its buffers out of the arena
// for good.
type loadedBlock struct {
	*block
	mem, extra []byte // arena buffers, full length
	refs       atomic.Int32
	pool       *blockPool
}

// ref adds a reference; the caller must already hold one, or hold the lock
// that keeps the block from being released (the cache's).
func (b *loadedBlock) ref() { b.refs.Add(1) }

// release drops a reference; the last one hands the buffers to the pool.
func (b *loadedBlock) release() {
	switch n := b.refs.Add(-1); {
	case n < 0:
		panic("BUG: sstable block released more often than referenced")
	case n == 0:
		b.pool.put(b)
	}
}

// blockPool recycles released blocks: their buffers go back to the arena,
// the structs to a sync.Pool.
type blockPool struct {
	arena   *blockArena
	structs sync.Pool // of *loadedBlock without buffers
	// scratch holds buffers shaped values are rebuilt into before they
	// are copied into the block's arena buffer (their size is known only
	// once they are rebuilt).
	scratch sync.Pool // of *[]byte
	// valsRatio is the last shaped block's values per decompressed byte
	// (fixed point, valsRatioShift), an eighth more; 0 when the last
	// block had no shaped values. See valsBuffer.
	valsRatio atomic.Int64
}

// poisonByte fills the buffers of released blocks when poisoning is on.
const poisonByte = 0xdb

func (p *blockPool) put(b *loadedBlock) {
	if p == nil || b.block == nil {
		return
	}
	p.arena.free(b.mem)
	p.arena.free(b.extra)
	b.block, b.mem, b.extra = nil, nil, nil
	p.structs.Put(b)
}

// get returns a block without buffers with one reference.
func (p *blockPool) get() *loadedBlock {
	b, _ := p.structs.Get().(*loadedBlock)
	if b == nil {
		b = &loadedBlock{pool: p}
	}
	b.refs.Store(1)
	return b
}

// getScratch returns an empty buffer to rebuild shaped values into.
func (p *blockPool) getScratch() []byte {
	if b, ok := p.scratch.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return nil
}

func (p *blockPool) putScratch(b []byte) {
	if cap(b) > 0 && cap(b) <= arenaMaxClassBytes {
		p.scratch.Put(&b)
	}
}

// cellBytes is the room n packed cells take at the start of mem.
func cellBytes(n int) int { return n * int(cellStructSize) }

// valsBuffer returns an arena buffer to rebuild the shaped values of a
// block of rawLen decompressed bytes into, sized from the last shaped
// block's ratio of values to decompressed bytes, or nil if the last block
// had no shaped values (then a block that has them is rebuilt into a
// scratch buffer and copied). A guess too small costs that copy; the
// decoder never writes past the buffer's capacity.
func (p *blockPool) valsBuffer(rawLen int) []byte {
	r := p.valsRatio.Load()
	if r == 0 || rawLen == 0 {
		return nil
	}
	n := int(int64(rawLen)*r>>valsRatioShift) + copySlack + 64
	if n > arenaMaxClassBytes {
		return nil
	}
	return p.arena.alloc(n)[:0]
}

// valsRatioShift is the fixed point of blockPool.valsRatio.
const valsRatioShift = 8

// observeVals records a decoded block's shaped values' size (0: none).
func (p *blockPool) observeVals(rawLen, vals int) {
	if vals == 0 || rawLen == 0 {
		p.valsRatio.Store(0)
		return
	}
	// An eighth more than this block needed, for the next one's.
	p.valsRatio.Store(int64(vals+copySlack) << valsRatioShift / int64(rawLen) * 9 / 8)
}

// adopt moves what a freshly decoded block b aliases outside the arena
// (its row keys, and shaped values rebuilt into a scratch buffer) into
// arena buffers, so that the block holds nothing on the Go heap but its
// struct and column dictionary, and makes lb own the buffers. mem holds
// b's cells and, when b aliases them, the decompressed bytes (its length
// ends where they end); vals is the
// buffer from valsBuffer b's shaped values were rebuilt into, if they fit
// (nil if there was none).
func (p *blockPool) adopt(lb *loadedBlock, b *block, mem, vals []byte, rawLen int) {
	n := len(b.cells)
	keys := len(b.keys)
	if b.aliasesRaw {
		p.arena.free(vals)
		p.observeVals(rawLen, 0)
		if in := cellsIn(mem, n); unsafe.SliceData(in) != unsafe.SliceData(b.cells) {
			copy(in, b.cells) // the decoder did not take mem's cells
			b.cells = in
		}
		lb.mem, lb.extra = mem, nil
		// The keys go after the decompressed bytes if the size class
		// left room, else in a buffer of their own.
		if used := len(mem); keys > 0 && used+keys <= cap(mem) {
			k := mem[used : used+keys : used+keys]
			copy(k, b.keys)
			b.keys = k
			lb.mem = mem[:cap(mem)]
		} else if keys > 0 {
			extra := p.arena.alloc(keys)
			copy(extra, b.keys)
			b.keys = extra[:keys:keys]
			lb.extra = extra
		}
	} else if lz := b.lazy; lz != nil {
		// Shaped values rebuilt in part: the rest are rebuilt from the
		// decompressed bytes (see lazyValues), so mem stays, with the
		// cells; the values, their scratch bytes and the keys go in
		// the values buffer.
		nv := len(b.data)
		p.observeVals(rawLen, nv)
		if in := cellsIn(mem, n); unsafe.SliceData(in) != unsafe.SliceData(b.cells) {
			copy(in, b.cells)
			b.cells = in
		}
		keysAt := roundUp(nv+copySlack, 8)
		inPlace := cap(vals) > 0 && unsafe.SliceData(b.data) == unsafe.SliceData(vals)
		if !inPlace || keysAt+keys > cap(vals) {
			extra := p.arena.alloc(keysAt + keys)
			copy(extra, b.data[:nv+copySlack])
			p.arena.free(vals)
			if !inPlace {
				p.putScratch(b.data[:0])
			}
			vals = extra
		}
		vals = vals[:cap(vals)]
		copy(vals[keysAt:], b.keys)
		b.keys = vals[keysAt : keysAt+keys : keysAt+keys]
		b.data = vals[:nv:nv]
		lz.buf = vals[: nv+copySlack : nv+copySlack]
		lb.mem, lb.extra = mem, vals[:cap(vals)]
	} else {
		// Shaped values: the decompressed bytes are no longer needed, so
		// mem goes back once the cells are out of it.
		nv := len(b.data)
		p.observeVals(rawLen, nv)
		cb := cellBytes(n)
		inPlace := cap(vals) > 0 && nv > 0 && unsafe.SliceData(b.data) == unsafe.SliceData(vals)
		if !inPlace {
			p.arena.free(vals)
			extra := p.arena.alloc(nv)
			copy(extra, b.data)
			p.putScratch(b.data[:0])
			b.data, vals = extra[:nv:nv], extra
		}
		// Cells and keys after the values if they fit, else in a buffer
		// of their own.
		off := roundUp(nv, 8)
		var rest []byte
		if off+cb+keys <= cap(vals) {
			rest = vals[off:cap(vals)]
			lb.mem = nil
		} else {
			rest = p.arena.alloc(cb + keys)
			lb.mem = rest
		}
		cells := cellsIn(rest, n)
		copy(cells, b.cells)
		copy(rest[cb:], b.keys)
		b.cells = cells
		b.keys = rest[cb : cb+keys : cb+keys]
		b.data = vals[:nv:nv]
		p.arena.free(mem)
		lb.extra = vals[:cap(vals)]
	}
	b.meta.MinClustering = b.clustering(0)
	b.meta.MaxClustering = b.clustering(n - 1)
	// What the block holds: its buffers, and on the heap its struct and
	// column dictionary (the decoder counted those in b.size along with
	// buffers it no longer has).
	b.size = int64(cap(lb.mem)+cap(lb.extra)) + int64(unsafe.Sizeof(block{})+unsafe.Sizeof(loadedBlock{}))
	if len(b.cols) > len(b.colsBuf) {
		b.size += int64(len(b.cols)) * int64(unsafe.Sizeof([]byte(nil)))
	}
	lb.block = b
}

// Buffers the decoder allocates itself (shaped values) are allocated in
// steps of recycleRawStep bytes, so that a scratch buffer fits the next
// block's values, whose size differs by a few bytes.
const recycleRawStep = 4 << 10

func roundUp(n, step int) int { return (n + step - 1) / step * step }
