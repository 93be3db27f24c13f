package memtable

import (
	"bytes"

	"github.com/eventide/eventide/storage/internal/base"
)

// Iter walks the cells of one partition whose clustering key lies within
// [start, end], ascending by (clustering, column) or, reversed, exactly
// descending. It sees cells inserted concurrently or not, but never a torn
// cell.
type Iter struct {
	list       *skiplist
	table      uint32
	partition  []byte
	start, end base.Bound
	reverse    bool

	cur     *node
	started bool
	cell    base.Cell
}

// NewIter returns an iterator over one partition's cells.
func (m *Memtable) NewIter(table uint32, partition []byte, start, end base.Bound, reverse bool) *Iter {
	return &Iter{list: m.list, table: table, partition: partition, start: start, end: end, reverse: reverse}
}

func (it *Iter) inPartition(n *node) bool {
	return n != nil && n.key.table == it.table && bytes.Equal(n.key.partition, it.partition)
}

// Next advances to the next cell and reports whether there is one.
func (it *Iter) Next() bool {
	if !it.started {
		it.started = true
		it.cur = it.first()
	} else if it.cur != nil {
		if it.reverse {
			it.cur = it.list.findLessThan(&it.cur.key)
		} else {
			it.cur = it.cur.next[0].Load()
		}
	}
	if !it.inPartition(it.cur) {
		it.cur = nil
		return false
	}
	if it.reverse {
		if !base.AfterStart(it.cur.key.clustering, it.start) {
			it.cur = nil
			return false
		}
	} else if !base.BeforeEnd(it.cur.key.clustering, it.end) {
		it.cur = nil
		return false
	}
	it.cell = *it.cur.cell.Load()
	return true
}

func (it *Iter) first() *node {
	if !it.reverse {
		k := key{table: it.table, partition: it.partition}
		if it.start.Key != nil {
			k.clustering = it.start.Key
		}
		n := it.list.findGreaterOrEqual(&k, nil)
		// An exclusive start skips every column of the start row.
		for it.start.Key != nil && !it.start.Inclusive && it.inPartition(n) && bytes.Equal(n.key.clustering, it.start.Key) {
			n = n.next[0].Load()
		}
		return n
	}
	if it.end.Key == nil {
		// The last node of the partition is the one before the next
		// partition's first possible key.
		return it.lastOfPartition()
	}
	if it.end.Inclusive {
		// Every column of the end row sorts before (end, column) for any
		// column, so seek just past the row: the smallest key greater
		// than every (end, *) is (end+"\x00", "").
		k := key{table: it.table, partition: it.partition, clustering: append(bytes.Clone(it.end.Key), 0)}
		return it.list.findLessThan(&k)
	}
	k := key{table: it.table, partition: it.partition, clustering: it.end.Key}
	return it.list.findLessThan(&k)
}

func (it *Iter) lastOfPartition() *node {
	// Keys of this partition are < (table, partition+"\x00"): any key with
	// a longer partition sorts after every clustering of this one.
	k := key{table: it.table, partition: append(bytes.Clone(it.partition), 0)}
	return it.list.findLessThan(&k)
}

// Cell returns the current cell. Its bytes are owned by the memtable and
// never modified.
func (it *Iter) Cell() *base.Cell { return &it.cell }

// Err always returns nil: a memtable cannot fail to read.
func (it *Iter) Err() error { return nil }

// TableIter walks every cell of one table in key order (partition, then
// clustering, then column), in one pass over the list: the order a flush
// writes them in.
type TableIter struct {
	table uint32
	cur   *node
	first bool
	cell  base.Cell
}

// NewTableIter returns an iterator over all of table's cells.
func (m *Memtable) NewTableIter(table uint32) *TableIter {
	k := key{table: table}
	return &TableIter{table: table, cur: m.list.findGreaterOrEqual(&k, nil), first: true}
}

// Next advances to the next cell and reports whether there is one.
func (it *TableIter) Next() bool {
	if it.cur == nil {
		return false
	}
	if it.first {
		it.first = false
	} else {
		it.cur = it.cur.next[0].Load()
	}
	if it.cur == nil || it.cur.key.table != it.table {
		it.cur = nil
		return false
	}
	it.cell = *it.cur.cell.Load()
	return true
}

// Partition returns the current cell's partition key; adjacent cells of a
// partition usually share one slice. Owned by the memtable.
func (it *TableIter) Partition() []byte { return it.cur.key.partition }

// Cell returns the current cell. Its bytes are owned by the memtable.
func (it *TableIter) Cell() *base.Cell { return &it.cell }
