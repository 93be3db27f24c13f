package memtable

import (
	"bytes"
	"math/rand/v2"
	"sync/atomic"

	"github.com/eventide/eventide/storage/internal/base"
)

const maxHeight = 20

// key orders memtable entries by (table, partition, clustering, column).
type key struct {
	table      uint32
	partition  []byte
	clustering []byte
	column     []byte
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

// node is one cell key. Its reconciled version is swapped atomically so
// readers never see a half-written cell.
type node struct {
	key  key
	cell atomic.Pointer[base.Cell]
	next []atomic.Pointer[node]
}

// skiplist is a single-writer, multi-reader sorted list: the writer is
// serialised by the caller, readers need no lock because every link is
// published with an atomic store after the node is fully built (the
// design of LevelDB's skiplist).
type skiplist struct {
	head   *node
	height atomic.Int32
	rng    *rand.Rand
}

func newSkiplist() *skiplist {
	s := &skiplist{head: &node{next: make([]atomic.Pointer[node], maxHeight)}, rng: rand.New(rand.NewPCG(1, 2))}
	s.height.Store(1)
	return s
}

func (s *skiplist) randomHeight() int {
	h := 1
	for h < maxHeight && s.rng.Uint32()&3 == 0 {
		h++
	}
	return h
}

// findGreaterOrEqual returns the first node >= k, filling prev (if not nil)
// with the rightmost node < k at each level.
func (s *skiplist) findGreaterOrEqual(k *key, prev *[maxHeight]*node) *node {
	x := s.head
	level := int(s.height.Load()) - 1
	for {
		next := x.next[level].Load()
		if next != nil && compareKeys(&next.key, k) < 0 {
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

// findLessThan returns the last node < k, or nil.
func (s *skiplist) findLessThan(k *key) *node {
	x := s.head
	level := int(s.height.Load()) - 1
	for {
		next := x.next[level].Load()
		if next != nil && compareKeys(&next.key, k) < 0 {
			x = next
			continue
		}
		if level == 0 {
			if x == s.head {
				return nil
			}
			return x
		}
		level--
	}
}

// findLast returns the last node, or nil.
func (s *skiplist) findLast() *node {
	x := s.head
	level := int(s.height.Load()) - 1
	for {
		next := x.next[level].Load()
		if next != nil {
			x = next
			continue
		}
		if level == 0 {
			if x == s.head {
				return nil
			}
			return x
		}
		level--
	}
}

// upsertSharingPartition is upsert for a k whose partition slice the
// caller does not own: a new node reuses the partition slice of an
// adjacent node with the same partition, or else a private copy.
func (s *skiplist) upsertSharingPartition(k key, c *base.Cell) (*node, bool) {
	var prev [maxHeight]*node
	x := s.findGreaterOrEqual(&k, &prev)
	if x != nil && compareKeys(&x.key, &k) == 0 {
		return x, false
	}
	switch p := prev[0]; {
	case p != s.head && p.key.table == k.table && bytes.Equal(p.key.partition, k.partition):
		k.partition = p.key.partition
	case x != nil && x.key.table == k.table && bytes.Equal(x.key.partition, k.partition):
		k.partition = x.key.partition
	default:
		k.partition = bytes.Clone(k.partition)
	}
	return s.insertAt(k, c, &prev), true
}

// insertAt links a new node for k after the nodes in prev (as filled by
// findGreaterOrEqual). Writer only.
func (s *skiplist) insertAt(k key, c *base.Cell, prev *[maxHeight]*node) *node {
	h := s.randomHeight()
	cur := int(s.height.Load())
	if h > cur {
		for i := cur; i < h; i++ {
			prev[i] = s.head
		}
		s.height.Store(int32(h))
	}
	n := &node{key: k, next: make([]atomic.Pointer[node], h)}
	n.cell.Store(c)
	for i := 0; i < h; i++ {
		n.next[i].Store(prev[i].next[i].Load())
	}
	for i := 0; i < h; i++ {
		prev[i].next[i].Store(n)
	}
	return n
}
