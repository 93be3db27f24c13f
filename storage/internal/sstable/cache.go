package sstable

import (
	"sync"
	"sync/atomic"
)

// Cache is an LRU cache of decoded data blocks and index pages shared by
// the readers of a store, bounded by the bytes they hold (decompressed
// bytes, key arena and cell structs, offset tables); index pages are
// evicted after data blocks (see cacheShard). It also holds the zstd decoder the readers
// share. It is safe for concurrent use; a nil *Cache caches nothing.
//
// Blocks are keyed by (file number, block offset): a file number must
// never name different contents while the cache lives. Cached blocks are
// immutable (but for the values a slice's read left out, which get
// rebuilds once before handing the block out: see lazyValues) and counted: the cache holds one reference and every iterator
// using a block another, so an evicted block stays valid for the
// iterators using it and is recycled when the last one lets go.
type Cache struct {
	shards []cacheShard
	dec    decompressor
	blocks blockPool
	hits   atomic.Int64
	misses atomic.Int64
	// rangeBudget is what is left of the bytes the readers may keep
	// decoded range tombstones in (rangeCache): a quarter of the
	// capacity, on top of it.
	rangeBudget atomic.Int64
	// pinBudget is what is left of the bytes the readers may pin index
	// pages in when they open (Reader.pinPages): a sixteenth of the
	// capacity, taken out of it; pinned is what they pin now.
	pinBudget atomic.Int64
	pinned    atomic.Int64
}

// maxCacheShards spreads lock contention; minCacheShardBytes keeps each
// shard able to hold many blocks, so that small caches are not split into
// shards too small for one block.
const (
	maxCacheShards     = 16
	minCacheShardBytes = 2 << 20
)

// CacheMetrics is a snapshot of a cache's counters.
type CacheMetrics struct {
	Hits, Misses int64
	Blocks       int64
	Bytes        int64
	Capacity     int64
	// PinnedIndexBytes is what the open readers' pinned index pages
	// take (see Reader): on the Go heap, counted against Capacity, so
	// the cache holds that much less of blocks and other pages.
	PinnedIndexBytes int64
	// MappedBytes is the block arena's memory (see blockArena): mapped
	// from the OS outside the Go heap, or, where there is no mmap,
	// allocated on it. It holds the cached blocks, the blocks iterators
	// and scanners still hold after their eviction, and the free buffers
	// the next reads will use; InUseBytes is what is not free.
	MappedBytes, InUseBytes int64
	// ReservedBytes is the part of MappedBytes that Prefault faulted in
	// and no block has used yet: resident, idle.
	ReservedBytes int64
}

type cacheKey struct{ fileNum, offset uint64 }

type cacheEntry struct {
	key        cacheKey
	blk        *loadedBlock // a data block, or
	page       *indexPage   // an index page (version 4)
	size       int64
	prev, next *cacheEntry // LRU list, most recent after the sentinel
}

type cacheShard struct {
	c        *Cache
	mu       sync.Mutex
	capacity int64
	size     int64 // data blocks and index pages
	entries  map[cacheKey]*cacheEntry
	lru      cacheEntry // sentinel of the data blocks' list
	// Index pages have a list of their own and are evicted only once the
	// data blocks are gone or the pages hold more than half the
	// capacity (RocksDB's high-priority pool for index blocks): a page
	// serves every partition in it, and a page miss costs a read and a
	// full validation before the data block is even looked up.
	plru      cacheEntry // sentinel of the index pages' list
	pageBytes int64
}

// NewCache returns a cache holding up to capacityBytes of decoded blocks.
func NewCache(capacityBytes int64) *Cache {
	capacityBytes = max(capacityBytes, 0)
	n := 1
	for n < maxCacheShards && capacityBytes/int64(2*n) >= minCacheShardBytes {
		n *= 2
	}
	c := &Cache{shards: make([]cacheShard, n)}
	// Free buffers beyond the capacity go back to the OS (see
	// blockArena). An eighth made a full cache's evictions and reads
	// decommit and fault buffers in all the time (blocks move between
	// size classes): window slices in loadtest/peers took 1.5x as long.
	c.blocks.arena = newMappedArena(c, max(capacityBytes, 4<<20))
	c.rangeBudget.Store(capacityBytes / 4)
	c.pinBudget.Store(capacityBytes / pinnedIndexShare)
	for i := range c.shards {
		s := &c.shards[i]
		s.c = c
		s.capacity = capacityBytes / int64(n)
		s.entries = map[cacheKey]*cacheEntry{}
		s.lru.next, s.lru.prev = &s.lru, &s.lru
		s.plru.next, s.plru.prev = &s.plru, &s.plru
	}
	return c
}

// PoisonReleased makes the cache overwrite the bytes of every block whose
// last reference is released before the block is reused (a debugging and
// testing aid, see storage.Options.PoisonReleasedBlocks): a caller that
// keeps a cell's bytes past the iterator step that gave them then reads
// 0xdb bytes at once, instead of the right bytes until some other read
// happens to reuse the buffer. Call it before the cache is used.
func (c *Cache) PoisonReleased() { c.blocks.arena.poison = true }

// Prefault makes the cache, when it first needs memory for a block, map
// the memory for its whole capacity and fault it in at once (transparent
// huge pages where allowed; milliseconds per 32 MiB), so that the
// blocks it fills with are decoded into resident memory instead of each
// cold read paying the page faults of the fresh buffer it is cached in
// (see blockArena). Nothing is prefaulted where block buffers are not
// mapped from the OS, for a cache without capacity, if the mapping fails,
// or beyond what is left of the process's budget of memory prefaulted and
// not used yet (256 MiB). ReleaseReserve gives back what no block has
// used. Call it before the cache is used.
func (c *Cache) Prefault() {
	if c == nil {
		return
	}
	var capacity int64
	for i := range c.shards {
		capacity += c.shards[i].capacity
	}
	c.blocks.arena.armPrefault(capacity)
}

// PrefaultNow is Prefault done at once: the memory for the cache's
// capacity is mapped and faulted in before it returns (see Prefault for
// what limits it), so that no block read pays for it. It returns the
// bytes it faulted in.
func (c *Cache) PrefaultNow() int64 {
	if c == nil {
		return 0
	}
	c.Prefault()
	return c.blocks.arena.prefaultArmed()
}

// ReleaseReserve unmaps the part of the memory Prefault faulted in that
// no block has used yet (and disarms a Prefault not done yet), and
// returns its bytes; the cache goes on working, mapping fresh memory as
// it needs. Call it when the store
// closes: an unreachable cache's memory is unmapped only once the garbage
// collector finds it so, which may be never in a process whose Go heap
// does not grow.
func (c *Cache) ReleaseReserve() int64 {
	if c == nil {
		return 0
	}
	return c.blocks.arena.releaseReserve()
}

func (c *Cache) shard(k cacheKey) *cacheShard {
	// splitmix64 finaliser: block offsets are not aligned to anything,
	// file numbers are sequential; mix both.
	h := k.fileNum*0x9e3779b97f4a7c15 ^ k.offset
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	return &c.shards[h%uint64(len(c.shards))]
}

// get returns the cached block with a reference for the caller, or nil.
func (c *Cache) get(fileNum, offset uint64) *loadedBlock {
	if c == nil {
		return nil
	}
	k := cacheKey{fileNum, offset}
	s := c.shard(k)
	s.mu.Lock()
	e := s.entries[k]
	if e != nil && e.blk == nil {
		e = nil // an index page at this offset: cannot be, but never hand it out as a block
	}
	if e != nil {
		s.unlink(e)
		s.pushFront(e)
		e.blk.ref() // under the lock, so eviction cannot release it first
	}
	s.mu.Unlock()
	if e == nil {
		c.misses.Add(1)
		return nil
	}
	c.hits.Add(1)
	// The block may have been cached by the reader that decoded it with
	// only its values rebuilt (see lazyValues).
	e.blk.lazy.complete()
	return e.blk
}

// add caches b, which the caller holds a reference to, taking a reference
// of the cache's own.
func (c *Cache) add(fileNum, offset uint64, b *loadedBlock) {
	if c == nil {
		return
	}
	k := cacheKey{fileNum, offset}
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.size > s.capacity {
		return
	}
	if e := s.entries[k]; e != nil {
		// Another reader loaded it concurrently; keep the first.
		return
	}
	b.ref()
	s.insert(&cacheEntry{key: k, blk: b, size: b.size})
}

// insert adds e (whose key is not cached) and evicts the least recently
// used entries beyond the capacity: data blocks first, index pages once
// there are no blocks left or they take more than half. The caller holds
// s.mu.
func (s *cacheShard) insert(e *cacheEntry) {
	s.entries[e.key] = e
	s.pushFront(e)
	s.size += e.size
	if e.page != nil {
		s.pageBytes += e.size
	}
	capacity := s.capacity - s.c.pinned.Load()/int64(len(s.c.shards))
	for s.size > capacity && s.size > 0 {
		old := s.lru.prev
		if old == &s.lru || s.pageBytes > capacity/2 {
			old = s.plru.prev
		}
		s.unlink(old)
		delete(s.entries, old.key)
		s.size -= old.size
		if old.page != nil {
			s.pageBytes -= old.size
		}
		if old.blk != nil {
			old.blk.release()
		}
	}
}

// pinnedIndexShare: the readers of a cache may pin index pages in up to
// capacity/pinnedIndexShare bytes (Reader.pinPages).
const pinnedIndexShare = 16

// reservePin takes n bytes of the pinning budget, if that much is left.
func (c *Cache) reservePin(n int64) bool {
	if c.pinBudget.Add(-n) < 0 {
		c.pinBudget.Add(n)
		return false
	}
	c.pinned.Add(n)
	return true
}

// releasePin gives n bytes back to the pinning budget.
func (c *Cache) releasePin(n int64) {
	c.pinned.Add(-n)
	c.pinBudget.Add(n)
}

// getPage returns the cached index page at (fileNum, offset), or nil.
// Pages are not counted: nothing recycles them, so an evicted page stays
// valid for whoever still refers to it.
func (c *Cache) getPage(fileNum, offset uint64) *indexPage {
	if c == nil {
		return nil
	}
	k := cacheKey{fileNum, offset}
	s := c.shard(k)
	s.mu.Lock()
	e := s.entries[k]
	if e != nil && e.page != nil {
		s.unlink(e)
		s.pushFront(e)
	}
	s.mu.Unlock()
	if e == nil || e.page == nil {
		c.misses.Add(1)
		return nil
	}
	c.hits.Add(1)
	return e.page
}

// addPage caches an index page.
func (c *Cache) addPage(fileNum, offset uint64, pg *indexPage) {
	if c == nil {
		return
	}
	k := cacheKey{fileNum, offset}
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if pg.size > s.capacity || s.entries[k] != nil {
		return
	}
	s.insert(&cacheEntry{key: k, page: pg, size: pg.size})
}

func (s *cacheShard) unlink(e *cacheEntry) {
	e.prev.next = e.next
	e.next.prev = e.prev
}

func (s *cacheShard) pushFront(e *cacheEntry) {
	head := &s.lru
	if e.page != nil {
		head = &s.plru
	}
	e.prev = head
	e.next = head.next
	head.next.prev = e
	head.next = e
}

// Metrics returns the cache's counters. A nil cache reports zeros.
func (c *Cache) Metrics() CacheMetrics {
	var m CacheMetrics
	if c == nil {
		return m
	}
	m.Hits, m.Misses = c.hits.Load(), c.misses.Load()
	m.MappedBytes, m.InUseBytes = c.blocks.arena.mapped.Load(), c.blocks.arena.inUse()
	m.ReservedBytes = c.blocks.arena.reserved.Load()
	m.PinnedIndexBytes = c.pinned.Load()
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		m.Blocks += int64(len(s.entries))
		m.Bytes += s.size
		m.Capacity += s.capacity
		s.mu.Unlock()
	}
	return m
}
