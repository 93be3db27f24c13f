package storage

import (
	"github.com/eventide/eventide/storage/internal/base"
)

// cellSource is a sorted stream of cells of one partition.
type cellSource interface {
	Next() bool
	Cell() *base.Cell
	// Err is the error that ended the stream early, if any.
	Err() error
}

// mergingIter merges cell sources that are each sorted in the same
// direction and yields, for every (clustering, column), the Reconcile of
// all its versions. Sources are few (memtables plus the SSTables that hold
// the partition), so a small binary heap keeps each step O(log n).
type mergingIter struct {
	reverse bool
	heap    []cellSource
	cell    base.Cell
	err     error
}

func newMergingIter(sources []cellSource, reverse bool) *mergingIter {
	m := &mergingIter{reverse: reverse, heap: make([]cellSource, 0, len(sources))}
	for _, s := range sources {
		if s.Next() {
			m.heap = append(m.heap, s)
		} else if err := s.Err(); err != nil && m.err == nil {
			m.err = err
		}
	}
	for i := len(m.heap)/2 - 1; i >= 0; i-- {
		m.down(i)
	}
	return m
}

func (m *mergingIter) less(a, b cellSource) bool {
	ca, cb := a.Cell(), b.Cell()
	c := base.CompareCellKeys(ca.Clustering, ca.Column, cb.Clustering, cb.Column)
	if m.reverse {
		return c > 0
	}
	return c < 0
}

func (m *mergingIter) down(i int) {
	n := len(m.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		smallest := l
		if r := l + 1; r < n && m.less(m.heap[r], m.heap[l]) {
			smallest = r
		}
		if !m.less(m.heap[smallest], m.heap[i]) {
			return
		}
		m.heap[i], m.heap[smallest] = m.heap[smallest], m.heap[i]
		i = smallest
	}
}

// advanceTop moves the top source forward, dropping it when exhausted.
func (m *mergingIter) advanceTop() {
	if m.heap[0].Next() {
		m.down(0)
		return
	}
	if err := m.heap[0].Err(); err != nil && m.err == nil {
		m.err = err
	}
	last := len(m.heap) - 1
	m.heap[0] = m.heap[last]
	m.heap[last] = nil
	m.heap = m.heap[:last]
	if len(m.heap) > 0 {
		m.down(0)
	}
}

// Next moves to the next distinct cell key and reports whether there is
// one. Cell then holds its reconciled version, which aliases source
// buffers that stay valid (blocks and memtable cells are immutable).
func (m *mergingIter) Next() bool {
	if len(m.heap) == 0 || m.err != nil {
		return false
	}
	m.cell = *m.heap[0].Cell()
	m.advanceTop()
	for len(m.heap) > 0 {
		c := m.heap[0].Cell()
		if base.CompareCellKeys(c.Clustering, c.Column, m.cell.Clustering, m.cell.Column) != 0 {
			break
		}
		m.cell = base.Reconcile(m.cell, *c)
		m.advanceTop()
	}
	return true
}

// Cell returns the current reconciled cell.
func (m *mergingIter) Cell() *base.Cell { return &m.cell }

// Err returns the first error any source reported; iteration stops at it.
func (m *mergingIter) Err() error { return m.err }
