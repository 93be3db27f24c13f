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

	cur     uint64
	started bool
	cell    base.Cell
	// partRef is the arena copy of partition once a node of it was seen:
	// the partition's nodes mostly share it, so membership is usually a
	// word comparison.
	partRef uint64
}

// NewIter returns an iterator over one partition's cells.
func (m *Memtable) NewIter(table uint32, partition []byte, start, end base.Bound, reverse bool) *Iter {
	return &Iter{list: m.list, table: table, partition: partition, start: start, end: end, reverse: reverse}
}

func (it *Iter) inPartition(n uint64) bool {
	if n == 0 {
		return false
	}
	words := it.list.node(n)
	if uint32(words[nodeTableHeight]) != it.table {
		return false
	}
	if it.partRef != 0 && words[nodePartRef] == it.partRef {
		return true
	}
	if !bytes.Equal(it.list.partition(n), it.partition) {
		return false
	}
	it.partRef = words[nodePartRef]
	return true
}

// Next advances to the next cell and reports whether there is one.
func (it *Iter) Next() bool {
	if !it.started {
		it.started = true
		it.cur = it.first()
	} else if it.cur != 0 {
		if it.reverse {
			it.cur = it.list.prev(it.cur)
		} else {
			it.cur = it.list.next(it.cur, 0)
		}
	}
	if !it.inPartition(it.cur) {
		it.cur = 0
		return false
	}
	it.list.cell(it.cur, &it.cell)
	if it.reverse {
		if !base.AfterStart(it.cell.Clustering, it.start) {
			it.cur = 0
			return false
		}
	} else if !base.BeforeEnd(it.cell.Clustering, it.end) {
		it.cur = 0
		return false
	}
	return true
}

func (it *Iter) first() uint64 {
	if !it.reverse {
		k := key{table: it.table, partition: it.partition}
		if it.start.Key != nil {
			k.clustering = it.start.Key
		}
		n := it.list.findGreaterOrEqual(&k, nil)
		// An exclusive start skips every column of the start row.
		for it.start.Key != nil && !it.start.Inclusive && it.inPartition(n) && bytes.Equal(it.list.key(n).clustering, it.start.Key) {
			n = it.list.next(n, 0)
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

func (it *Iter) lastOfPartition() uint64 {
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
	list  *skiplist
	table uint32
	cur   uint64
	first bool
	cell  base.Cell
}

// NewTableIter returns an iterator over all of table's cells.
func (m *Memtable) NewTableIter(table uint32) *TableIter {
	k := key{table: table}
	return &TableIter{list: m.list, table: table, cur: m.list.findGreaterOrEqual(&k, nil), first: true}
}

// Next advances to the next cell and reports whether there is one.
func (it *TableIter) Next() bool {
	if it.cur == 0 {
		return false
	}
	if it.first {
		it.first = false
	} else {
		it.cur = it.list.next(it.cur, 0)
	}
	if it.cur == 0 || it.list.table(it.cur) != it.table {
		it.cur = 0
		return false
	}
	it.list.cell(it.cur, &it.cell)
	it.list.prefetchAhead(it.cur)
	return true
}

// Partition returns the current cell's partition key; adjacent cells of a
// partition usually share one slice. Owned by the memtable.
func (it *TableIter) Partition() []byte { return it.list.partition(it.cur) }

// Cell returns the current cell. Its bytes are owned by the memtable.
func (it *TableIter) Cell() *base.Cell { return &it.cell }
