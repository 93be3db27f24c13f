package sstable

import (
	"sync"
	"sync/atomic"
)

// loadedBlock is a decoded data block as readers and the cache share it.
// It counts its references (the cache's, one per iterator holding it) so
// that, once the last one is released, its decompressed bytes and cell
// array can be reused for the next block read instead of being left to the
// garbage collector: an uncached read allocated ~50 KiB for a 32 KiB
// block, and under a steady stream of cache misses the resulting GC cycles
// (marking, write barriers and assists charged to the reading goroutine)
// were what made the slowest reads several times slower than the median.
//
// Holding a reference is what keeps the cells valid. A holder that never
// releases (Scanner, Check) is safe: the block is then never reused and the
// garbage collector frees it as before.
type loadedBlock struct {
	*block
	// raw holds the decompressed bytes the cells alias, when the block
	// owns them (nil when it aliases a frame stored uncompressed, or holds
	// shaped values, which it keeps in vals).
	raw  []byte
	refs atomic.Int32
	pool *blockPool
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

// blockPool recycles the buffers of released blocks, and decompression
// buffers that no block keeps. A nil pool recycles nothing.
type blockPool struct {
	p    sync.Pool // of *loadedBlock with refs 0
	raws sync.Pool // of *[]byte
	// poison: overwrite a released block's buffers (Cache.PoisonReleased).
	poison bool
}

// poisonByte fills the buffers of released blocks when poisoning is on.
const poisonByte = 0xdb

func (p *blockPool) put(b *loadedBlock) {
	if p == nil || b.block == nil {
		return
	}
	if p.poison {
		b.poisonBuffers()
	}
	p.p.Put(b)
}

// poisonBuffers overwrites what the pool will hand to the next block: its
// decompressed bytes, row keys and values. They are the block's own (it
// is being recycled), so whoever still reads them broke the lifetime of
// the cells they came from.
func (b *loadedBlock) poisonBuffers() {
	for _, buf := range [][]byte{b.raw, b.keys, b.data} {
		buf = buf[:cap(buf)]
		for i := range buf {
			buf[i] = poisonByte
		}
	}
}

// rawBuffer returns an empty buffer for at least n decompressed bytes.
func (p *blockPool) rawBuffer(n int) []byte {
	if p != nil {
		if b, ok := p.raws.Get().(*[]byte); ok && cap(*b) >= n {
			return (*b)[:0]
		}
	}
	return make([]byte, 0, max(roundUp(n, recycleRawStep), recycleRawMin))
}

// rawBufferIfAny returns an empty pooled buffer for at least n bytes, or
// nil if the pool has none at hand (it allocates nothing).
func (p *blockPool) rawBufferIfAny(n int) []byte {
	if p != nil {
		if b, ok := p.raws.Get().(*[]byte); ok {
			if cap(*b) >= n {
				return (*b)[:0]
			}
			p.raws.Put(b)
		}
	}
	return nil
}

// putRaw takes back a buffer from rawBuffer that nothing refers to.
func (p *blockPool) putRaw(b []byte) {
	if p == nil || cap(b) == 0 {
		return
	}
	p.raws.Put(&b)
}

// get returns a block with one reference whose buffers (raw, and its
// previous block's cells and shaped values), if any, are free for reuse.
func (p *blockPool) get() *loadedBlock {
	var b *loadedBlock
	if p != nil {
		b, _ = p.p.Get().(*loadedBlock)
	}
	if b == nil {
		b = &loadedBlock{pool: p}
	}
	b.refs.Store(1)
	return b
}

// A block's buffers are allocated in steps of recycleRawStep bytes and
// recycleCellsStep cells, so that blocks of similar size can take each
// other's buffers.
const (
	recycleRawStep   = 4 << 10
	recycleCellsStep = 32
	// recycleRawMin sizes pooled decompression buffers for any block the
	// default options write (a partition's first block, capped at the
	// block size, as well as the others), so that a buffer from the pool
	// fits the next read whichever kind it is.
	recycleRawMin = defaultBlockSize + 4<<10
)

func roundUp(n, step int) int { return (n + step - 1) / step * step }
