package memtable

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"sync/atomic"
	"unsafe"

	"github.com/eventide/eventide/storage/internal/base"
)

const maxHeight = 20

// The skiplist lives in two kinds of slab, so the garbage collector has
// nothing to scan however many entries it holds (a node per entry with
// slice headers and link pointers made the GC's mark phase a large share
// of ingest CPU):
//
//   - node slabs ([]uint64): a node is nodeFixedWords words followed by
//     its height's forward links. A node reference is
//     slab index<<nodeSlabShift | word index; 0 is nil (word 0 of slab 0
//     is never used).
//   - data slabs ([]byte): partition keys, clustering keys, columns and
//     cell records. A data reference is slab index<<32 | byte offset.
//
// Node layout (words):
//
//	0  table (low 32 bits) | height<<32
//	1  partition data ref
//	2  partition length (low 32) | clustering length<<32
//	3  key data ref: clustering key then column
//	4  column length
//	5  cell data ref (atomic: swapped when a write changes the cell)
//	6  prev: the node before it at level 0 (atomic; may lag behind an
//	   insert, never ahead: see insertAt)
//	7+ next[level] (atomic)
//
// Cell record (data): kind u8 | ttl i32 | timestamp i64 |
// local deletion time i64 | value length u32 | value, little endian.
//
// Everything but the atomic words is written before the node is published
// by the atomic store of a link to it, and never changed afterwards, so a
// reader that reached a node through an atomic load sees it whole.
const (
	nodeTableHeight = iota
	nodePartRef
	nodeLens
	nodeKeyRef
	nodeColLen
	nodeCell
	nodePrev
	nodeNext
	nodeFixedWords = nodeNext

	nodeSlabShift = 18
	// Node slabs grow from minNodeSlabWords to maxNodeSlabWords (2 MiB)
	// and data slabs from minDataSlabBytes to maxDataSlabBytes (2 MiB), so
	// a small memtable stays small, a big one allocates rarely, and the
	// unused tail of the last slabs (heap that SizeBytes does not count)
	// stays small.
	minNodeSlabWords = 1 << 12
	maxNodeSlabWords = 1 << nodeSlabShift
	minDataSlabBytes = 32 << 10
	maxDataSlabBytes = 2 << 20

	cellHeaderBytes = 1 + 4 + 8 + 8 + 4
)

// key orders memtable entries by (table, partition, clustering, column).
type key struct {
	table      uint32
	partition  []byte
	clustering []byte
	column     []byte
	// partKnown: partRef is the arena ref of the partition key that
	// nodes of (table, partition) share, which the writer knows when a
	// splice or the last insert is of the partition; compareNode then
	// takes a node with that ref for the same table and partition
	// without comparing them. Nodes of other partitions, or of this one
	// whose key was copied again (not placed next to the others), compare
	// in full.
	partKnown bool
	partRef   uint64
}

func compareKeys(a, b *key) int {
	if a.table != b.table {
		if a.table < b.table {
			return -1
		}
		return 1
	}
	if c := bytes.Compare(a.partition, b.partition); c != 0 {
		return c
	}
	if c := bytes.Compare(a.clustering, b.clustering); c != 0 {
		return c
	}
	return bytes.Compare(a.column, b.column)
}

// skiplist is a single-writer, multi-reader sorted list: the writer is
// serialised by the caller, readers need no lock because every link is
// published with an atomic store after the node is fully built (the
// design of LevelDB's skiplist), with back links at level 0 so reverse
// iteration is a step, not a search.
type skiplist struct {
	// Readers load the slab lists atomically; the writer appends to them
	// and publishes the grown slice. Slabs themselves never move.
	nodeSlabs atomic.Pointer[[][]uint64]
	dataSlabs atomic.Pointer[[][]byte]

	height atomic.Int32
	head   uint64

	// slabs owns the slabs' memory (arena.go).
	slabs *slabs

	// Writer only.
	// splices remembers, per partition (direct-mapped by a hash of table
	// and partition), the search path of the partition's last insert.
	splices [spliceSlotCount]splice
	// spliceHits counts the inserts placed from a splice, and
	// spliceUpperCompares the key comparisons their search made above
	// level 0 (for tests).
	spliceHits, spliceUpperCompares int
	// fingers are the last two inserts' search paths (see findInRow):
	// fingers[lastFinger] the last one's, the other the one before.
	// Alternating saves copying one into the other per insert.
	fingers    [2]finger
	lastFinger int
	// fingerHits counts the inserts the fingers placed (for tests).
	fingerHits int
	rng        *rand.Rand
	nodeUsed   int // words used in the last node slab
	dataUsed   int // bytes used in the last data slab
	// arenaBytes is the slab bytes used. Slabs are at most 1 MiB, so what
	// the last ones leave unused is small against a memtable's size.
	arenaBytes int64
}

// newSkiplist returns an empty list whose mapped slab bytes are added to
// account (if not nil) while it holds them.
func newSkiplist(account *atomic.Int64) *skiplist {
	s := &skiplist{rng: rand.New(rand.NewPCG(1, 2)), slabs: &slabs{account: account}}
	s.nodeSlabs.Store(&[][]uint64{s.slabs.wordSlab(minNodeSlabWords)})
	s.dataSlabs.Store(&[][]byte{s.slabs.byteSlab(minDataSlabBytes)})
	s.releaseWhenUnreachable()
	s.nodeUsed = 1 // ref 0 is nil
	s.head = s.allocNode(maxHeight)
	s.height.Store(1)
	return s
}

// allocNode returns a zeroed node of height h. Writer only.
func (s *skiplist) allocNode(h int) uint64 {
	words := nodeFixedWords + h
	slabs := *s.nodeSlabs.Load()
	last := len(slabs) - 1
	if s.nodeUsed+words > len(slabs[last]) {
		size := min(2*len(slabs[last]), maxNodeSlabWords)
		grown := append(slabs, s.slabs.wordSlab(size))
		s.nodeSlabs.Store(&grown)
		slabs, last, s.nodeUsed = grown, last+1, 0
		if last == 0 {
			s.nodeUsed = 1
		}
	}
	ref := uint64(last)<<nodeSlabShift | uint64(s.nodeUsed)
	s.nodeUsed += words
	s.arenaBytes += int64(words * 8)
	return ref
}

// allocData returns n bytes of arena and their reference. Writer only.
func (s *skiplist) allocData(n int) (uint64, []byte) {
	slabs := *s.dataSlabs.Load()
	last := len(slabs) - 1
	if s.dataUsed+n > len(slabs[last]) {
		size := max(min(2*len(slabs[last]), maxDataSlabBytes), n)
		grown := append(slabs, s.slabs.byteSlab(size))
		s.dataSlabs.Store(&grown)
		slabs, last, s.dataUsed = grown, last+1, 0
	}
	ref := uint64(last)<<32 | uint64(s.dataUsed)
	b := slabs[last][s.dataUsed : s.dataUsed+n : s.dataUsed+n]
	s.dataUsed += n
	s.arenaBytes += int64(n)
	return ref, b
}

// node returns the words of the node ref (fixed part and links).
func (s *skiplist) node(ref uint64) []uint64 {
	slab := (*s.nodeSlabs.Load())[ref>>nodeSlabShift]
	i := ref & (1<<nodeSlabShift - 1)
	return slab[i:]
}

func (s *skiplist) data(ref uint64, n int) []byte {
	slab := (*s.dataSlabs.Load())[ref>>32]
	off := ref & (1<<32 - 1)
	return slab[off : off+uint64(n) : off+uint64(n)]
}

func (s *skiplist) next(ref uint64, level int) uint64 {
	return atomic.LoadUint64(&s.node(ref)[nodeNext+level])
}

// prev returns the node before ref at level 0, or 0 at the head.
func (s *skiplist) prev(ref uint64) uint64 {
	p := atomic.LoadUint64(&s.node(ref)[nodePrev])
	if p == s.head {
		return 0
	}
	return p
}

func (s *skiplist) table(ref uint64) uint32 { return uint32(s.node(ref)[nodeTableHeight]) }

func (s *skiplist) partition(ref uint64) []byte {
	n := s.node(ref)
	return s.data(n[nodePartRef], int(uint32(n[nodeLens])))
}

// key returns the node's key; its slices alias the arena.
func (s *skiplist) key(ref uint64) key {
	n := s.node(ref)
	clustLen, colLen := int(n[nodeLens]>>32), int(n[nodeColLen])
	kb := s.data(n[nodeKeyRef], clustLen+colLen)
	return key{
		table:      uint32(n[nodeTableHeight]),
		partition:  s.data(n[nodePartRef], int(uint32(n[nodeLens]))),
		clustering: kb[:clustLen:clustLen],
		column:     kb[clustLen:],
	}
}

// compareNode compares the node's key with k.
func (s *skiplist) compareNode(ref uint64, k *key) int {
	n := s.node(ref)
	if !k.partKnown || n[nodePartRef] != k.partRef {
		if t := uint32(n[nodeTableHeight]); t != k.table {
			if t < k.table {
				return -1
			}
			return 1
		}
		if c := bytes.Compare(s.data(n[nodePartRef], int(uint32(n[nodeLens]))), k.partition); c != 0 {
			return c
		}
	}
	clustLen, colLen := int(n[nodeLens]>>32), int(n[nodeColLen])
	kb := s.data(n[nodeKeyRef], clustLen+colLen)
	if c := bytes.Compare(kb[:clustLen], k.clustering); c != 0 {
		return c
	}
	return bytes.Compare(kb[clustLen:], k.column)
}

// cell decodes the node's current cell into c; its slices alias the
// arena, which is never modified once written.
func (s *skiplist) cell(ref uint64, c *base.Cell) {
	n := s.node(ref)
	clustLen, colLen := int(n[nodeLens]>>32), int(n[nodeColLen])
	kb := s.data(n[nodeKeyRef], clustLen+colLen)
	c.Clustering, c.Column = kb[:clustLen:clustLen], kb[clustLen:]
	cellRef := atomic.LoadUint64(&n[nodeCell])
	h := s.data(cellRef, cellHeaderBytes)
	c.Kind = base.Kind(h[0])
	c.TTL = int32(binary.LittleEndian.Uint32(h[1:]))
	c.Timestamp = int64(binary.LittleEndian.Uint64(h[5:]))
	c.LocalDeletionTime = int64(binary.LittleEndian.Uint64(h[13:]))
	vlen := int(binary.LittleEndian.Uint32(h[21:]))
	c.Value = s.data(cellRef+cellHeaderBytes, vlen)
}

// writeCell stores c's record (not its key) in the arena. Writer only.
func (s *skiplist) writeCell(c *base.Cell) uint64 {
	ref, b := s.allocData(cellHeaderBytes + len(c.Value))
	b[0] = byte(c.Kind)
	binary.LittleEndian.PutUint32(b[1:], uint32(c.TTL))
	binary.LittleEndian.PutUint64(b[5:], uint64(c.Timestamp))
	binary.LittleEndian.PutUint64(b[13:], uint64(c.LocalDeletionTime))
	binary.LittleEndian.PutUint32(b[21:], uint32(len(c.Value)))
	copy(b[cellHeaderBytes:], c.Value)
	return ref
}

// setCell replaces the node's cell with c. Writer only.
func (s *skiplist) setCell(ref uint64, c *base.Cell) {
	atomic.StoreUint64(&s.node(ref)[nodeCell], s.writeCell(c))
}

func (s *skiplist) randomHeight() int {
	h := 1
	for h < maxHeight && s.rng.Uint32()&3 == 0 {
		h++
	}
	return h
}

// prefetchAhead starts loading what a walk at level 0 from ref reads
// next: the key and cell data of the next node, and the node after it
// (whose words the next call's data prefetch reads). A flush walks the
// nodes in key order, which is not the order they were allocated in, so
// without it each cell costs a cache miss for its node and another for
// its data, one after the other.
func (s *skiplist) prefetchAhead(ref uint64) {
	next := s.next(ref, 0)
	if next == 0 {
		return
	}
	n := s.node(next)
	prefetch(s.dataAddr(n[nodeKeyRef]))
	prefetch(s.dataAddr(atomic.LoadUint64(&n[nodeCell])))
	if after := atomic.LoadUint64(&n[nodeNext]); after != 0 {
		prefetch(uintptr(unsafe.Pointer(&s.node(after)[0])))
	}
}

// dataAddr is the address of the data ref's first byte.
func (s *skiplist) dataAddr(ref uint64) uintptr {
	slab := (*s.dataSlabs.Load())[ref>>32]
	return uintptr(unsafe.Pointer(unsafe.SliceData(slab))) + uintptr(ref&(1<<32-1))
}

// findGreaterOrEqual returns the first node >= k (0 if none), filling
// prev (if not nil) with the rightmost node < k at each level.
func (s *skiplist) findGreaterOrEqual(k *key, prev *[maxHeight]uint64) uint64 {
	x := s.head
	level := int(s.height.Load()) - 1
	for {
		next := s.next(x, level)
		if next != 0 && s.compareNode(next, k) < 0 {
			x = next
			continue
		}
		if prev != nil {
			prev[level] = x
		}
		if level == 0 {
			return next
		}
		level--
	}
}

// findLessThan returns the last node < k, or 0.
func (s *skiplist) findLessThan(k *key) uint64 {
	x := s.head
	level := int(s.height.Load()) - 1
	for {
		next := s.next(x, level)
		if next != 0 && s.compareNode(next, k) < 0 {
			x = next
			continue
		}
		if level == 0 {
			if x == s.head {
				return 0
			}
			return x
		}
		level--
	}
}

// first returns the first node, or 0.
func (s *skiplist) first() uint64 { return s.next(s.head, 0) }

// spliceSlotCount is the number of slots of partitions' splices: many
// more than the partitions a batch spreads over (a writer's: 20 event
// types in an hour or two, as many per-minute count partitions, a
// type-hours one), each partition having two (spliceSlots). A slot is
// 192 bytes.
const spliceSlotCount = 1024

// splice is where the last insert into a partition went, of those at
// either end of the partition's run of nodes or placed by a full search
// (see the end of upsertSharingPartition): prev[i] was the
// rightmost node before its key at level i, for i < height (the list's
// height then). Nodes are never removed and never move, so each prev[i]
// stays before every key after prev[0], and a later key of the partition
// just after prev[0] at level 0 needs only a step per level: Eventide's
// clustering keys are TimeUUIDs DESC, so each new event of a partition goes
// right before the one inserted last, after the same prev[0]. A full
// search there costs twice as many key comparisons; it was most of the
// memtable insert's CPU in loadtest/peers' ingest.
type splice struct {
	table   uint32
	partRef uint64 // arena ref of the partition key
	partLen int
	height  int // 0: an empty slot
	prev    [maxHeight]uint64
}

// spliceSlots returns the two splice slots of (table, partition): a
// multiply and xor-shift mix of the key read 8 bytes at a time (FNV-1a,
// byte by byte, was an eighth of a writer's memtable insert), its low
// bits and its high bits. Two partitions in one direct-mapped slot evict
// each other's splice at every switch (a full search each time); with
// two slots each, ~40 partitions practically never meet. Deterministic,
// so which partitions meet does not change from run to run.
func spliceSlots(table uint32, partition []byte) (int, int) {
	h := uint64(table)*0x9e3779b97f4a7c15 ^ uint64(len(partition))
	p := partition
	for len(p) >= 8 {
		h = (h ^ binary.LittleEndian.Uint64(p)) * 0xbf58476d1ce4e5b9
		h ^= h >> 31
		p = p[8:]
	}
	var tail uint64
	for i, c := range p {
		tail |= uint64(c) << (8 * i)
	}
	// splitmix64's finalizer: every input bit reaches the low bits.
	h ^= tail
	h = (h ^ h>>30) * 0xbf58476d1ce4e5b9
	h = (h ^ h>>27) * 0x94d049bb133111eb
	h ^= h >> 31
	return int(h % spliceSlotCount), int(h >> 32 % spliceSlotCount)
}

// spliceOf reports whether the splice in slot is k's partition's.
func (s *skiplist) spliceOf(slot int, k *key) bool {
	sp := &s.splices[slot]
	return sp.height > 0 && sp.table == k.table && bytes.Equal(s.data(sp.partRef, sp.partLen), k.partition)
}

// maxSpliceSteps bounds how far a remembered splice is followed at level
// 0 before the full search is cheaper.
const maxSpliceSteps = 12

// findWithSplice is findGreaterOrEqual (with prev) for a key of the
// partition sp was remembered for, starting from sp instead of the head,
// for a node of height h: prev is filled for the levels below h only (the
// only ones the node is linked into); above them it keeps sp's, which
// are still before k (nodes never move), so the splice stays valid with
// a search of about one step per level of the new node instead of one per
// level of the list (about 11 at 2,000,000 cells, against 1.3 on
// average). It also reports whether the node it returns (the first >=
// k) holds k. It reports ok false, having filled nothing, when sp does
// not hold k's place closely enough (k is before sp.prev[0], or more than
// maxSpliceSteps nodes after it at level 0); the caller then searches
// from the head.
func (s *skiplist) findWithSplice(k *key, sp *splice, prev *[maxHeight]uint64, h int) (next uint64, equal, ok bool) {
	return s.findFrom(k, &sp.prev, sp.height, false, prev, h)
}

// findFrom is findWithSplice from a path: from[i] is a node before k at
// level i for i < fromHeight (so far as from[0] is, which it checks
// unless known says it is known to be).
func (s *skiplist) findFrom(k *key, from *[maxHeight]uint64, fromHeight int, known bool, prev *[maxHeight]uint64, h int) (next uint64, equal, ok bool) {
	x := from[0]
	if !known && x != s.head && s.compareNode(x, k) >= 0 {
		return 0, false, false
	}
	next = s.next(x, 0)
	for steps := 0; next != 0; steps++ {
		c := s.compareNode(next, k)
		if c >= 0 {
			equal = c == 0
			break
		}
		if steps == maxSpliceSteps {
			return 0, false, false
		}
		x, next = next, s.next(next, 0)
	}
	prev[0] = x
	// Above level 0, sp.prev[i] is at or before sp.prev[0], so before
	// k: walk right from it to the last node before k (nodes inserted
	// since are the only ones it can pass).
	height := int(s.height.Load())
	for level := 1; level < height; level++ {
		y := s.head
		if level < fromHeight {
			y = from[level]
		}
		if level >= h {
			prev[level] = y
			continue
		}
		for {
			n := s.next(y, level)
			if n == 0 {
				break
			}
			s.spliceUpperCompares++
			if s.compareNode(n, k) >= 0 {
				break
			}
			y = n
		}
		prev[level] = y
	}
	return next, equal, true
}

// finger is where an insert went: its node, and prev, the rightmost node
// before it at each level of the list then (height).
type finger struct {
	node   uint64 // 0: none
	slot   int    // its partition's splice slot
	height int
	prev   [maxHeight]uint64
}

// findInRow is findWithSplice for a key of the same row (table,
// partition, clustering) as the last insert, from the last two inserts'
// paths instead of a partition's splice: a writer's event is a row of a
// few cells applied one after the other (catalog.EventRowBuilder: data,
// user, author), the first placed by the splice, and each next cell goes
// right after the last insert (the path to it, with the node itself at
// its levels) or right before it or the insert before it (their own
// paths). Nodes never move, so such a path is still before k wherever
// findFrom checks its first node, and findFrom walks the levels right
// from it as from a splice. A key of another row, or that none of them
// places, reports ok false having filled nothing.
func (s *skiplist) findInRow(k *key, prev *[maxHeight]uint64, h int) (next uint64, equal, sameRow, ok bool) {
	l := &s.fingers[s.lastFinger]
	if l.node == 0 {
		return 0, false, false, false
	}
	n := s.node(l.node)
	clustLen := int(n[nodeLens] >> 32)
	if uint32(n[nodeTableHeight]) != k.table || clustLen != len(k.clustering) ||
		!bytes.Equal(s.data(n[nodeKeyRef], clustLen), k.clustering) ||
		!bytes.Equal(s.data(n[nodePartRef], int(uint32(n[nodeLens]))), k.partition) {
		return 0, false, false, false
	}
	k.partKnown, k.partRef = true, n[nodePartRef]
	next, equal, ok = s.findInRowOf(k, l, n, clustLen, prev, h)
	return next, equal, true, ok
}

// findInRowOf is findInRow once k is known to be of l's row; n is l's
// node, clustLen its clustering key's length.
func (s *skiplist) findInRowOf(k *key, l *finger, n []uint64, clustLen int, prev *[maxHeight]uint64, h int) (next uint64, equal, ok bool) {
	colLen := int(n[nodeColLen])
	switch c := bytes.Compare(s.data(n[nodeKeyRef]+uint64(clustLen), colLen), k.column); {
	case c == 0:
		return l.node, true, true
	case c < 0:
		// After the last insert: its path with the node at its levels.
		var from [maxHeight]uint64
		hn := int(n[nodeTableHeight] >> 32)
		for i := range l.height {
			if i < hn {
				from[i] = l.node
			} else {
				from[i] = l.prev[i]
			}
		}
		return s.findFrom(k, &from, l.height, true, prev, h)
	}
	if next, equal, ok = s.findFrom(k, &l.prev, l.height, false, prev, h); ok {
		return next, equal, ok
	}
	if b := &s.fingers[1-s.lastFinger]; b.node != 0 {
		return s.findFrom(k, &b.prev, b.height, false, prev, h)
	}
	return 0, false, false
}

// upsertSharingPartition finds the node for k or inserts one holding c;
// it reports whether it inserted. The new node's partition key is shared
// with an adjacent node of the same partition (cells of a partition are
// adjacent, so a wide partition stores its key once) or else copied into
// the arena. Writer only.
func (s *skiplist) upsertSharingPartition(k key, c *base.Cell) (uint64, bool) {
	var prev [maxHeight]uint64
	// The height is drawn before the search, which then needs the
	// levels below it only (findWithSplice); an overwrite draws one too.
	h := s.randomHeight()
	x, equal, sameRow, found := s.findInRow(&k, &prev, h)
	if found {
		if equal {
			return x, false
		}
		s.fingerHits++
	}
	// A key of the last insert's row has its partition's slot. Otherwise
	// the partition has two: the first that holds its splice, or else
	// (to renew) the first that is empty, or else the first.
	slot := s.fingers[s.lastFinger].slot
	if !sameRow {
		var other int
		slot, other = spliceSlots(k.table, k.partition)
		if !s.spliceOf(slot, &k) && (s.spliceOf(other, &k) || s.splices[slot].height > 0 && s.splices[other].height == 0) {
			slot = other
		}
	}
	sp := &s.splices[slot]
	hit := s.spliceOf(slot, &k)
	if hit && !k.partKnown {
		k.partKnown, k.partRef = true, sp.partRef
	}
	if !found && hit {
		x, equal, found = s.findWithSplice(&k, sp, &prev, h)
		if found {
			s.spliceHits++
		}
	}
	if !found {
		x = s.findGreaterOrEqual(&k, &prev)
		equal = x != 0 && s.compareNode(x, &k) == 0
	}
	if equal {
		return x, false
	}
	var partRef uint64
	switch p := prev[0]; {
	case hit:
		// The splice's partition key is in the arena already.
		partRef = sp.partRef
	case p != s.head && s.table(p) == k.table && bytes.Equal(s.partition(p), k.partition):
		partRef = s.node(p)[nodePartRef]
	case x != 0 && s.table(x) == k.table && bytes.Equal(s.partition(x), k.partition):
		partRef = s.node(x)[nodePartRef]
	default:
		var b []byte
		partRef, b = s.allocData(len(k.partition))
		copy(b, k.partition)
	}
	keyRef, kb := s.allocData(len(k.clustering) + len(k.column))
	copy(kb[copy(kb, k.clustering):], k.column)
	cellRef := s.writeCell(c)

	cur := int(s.height.Load())
	if h > cur {
		for i := cur; i < h; i++ {
			prev[i] = s.head
		}
		s.height.Store(int32(h))
	}
	ref := s.allocNode(h)
	n := s.node(ref)
	n[nodeTableHeight] = uint64(k.table) | uint64(h)<<32
	n[nodePartRef] = partRef
	n[nodeLens] = uint64(len(k.partition)) | uint64(len(k.clustering))<<32
	n[nodeKeyRef] = keyRef
	n[nodeColLen] = uint64(len(k.column))
	n[nodeCell] = cellRef
	n[nodePrev] = prev[0]
	for i := 0; i < h; i++ {
		n[nodeNext+i] = s.next(prev[i], i)
	}
	// Publish bottom-up: once linked at level 0 the node is reachable.
	for i := 0; i < h; i++ {
		atomic.StoreUint64(&s.node(prev[i])[nodeNext+i], ref)
	}
	// The successor's back link is set last: a reverse reader that loaded
	// the old one skips the new node, as if it had read before the insert.
	if x != 0 {
		atomic.StoreUint64(&s.node(x)[nodePrev], ref)
	}
	// A key placed inside its partition's run of nodes (not first, not
	// last) leaves the splice as it was: with TimeUUID DESC keys that is
	// an event older than the newest one of its partition (event times
	// jitter), and the next event, newer again, goes back to the front,
	// which the old splice still points at, but which is before the new
	// node's predecessor (a splice from there would miss it; measured: a
	// fifth of the peers' inserts searched from the head that way). Keys
	// at either end (DESC or ascending) and full searches renew it.
	atFront := prev[0] == s.head || s.node(prev[0])[nodePartRef] != partRef
	atBack := x == 0 || s.node(x)[nodePartRef] != partRef
	if !found || atFront || atBack {
		sp.table, sp.partRef, sp.partLen, sp.height = k.table, partRef, len(k.partition), int(s.height.Load())
		copy(sp.prev[:sp.height], prev[:sp.height])
	}
	// The finger before the last becomes the last; prev above the list's
	// height is never read.
	s.lastFinger = 1 - s.lastFinger
	f := &s.fingers[s.lastFinger]
	f.node, f.slot, f.height = ref, slot, int(s.height.Load())
	copy(f.prev[:f.height], prev[:f.height])
	return ref, true
}
