package storage

import (
	"bytes"
	"slices"

	"github.com/eventide/eventide/storage/internal/base"
)

// cellSource is a sorted stream of cells of one partition.
type cellSource interface {
	Next() bool
	Cell() *base.Cell
	// Err is the error that ended the stream early, if any.
	Err() error
}

// lazySource is a source whose cells are known to start at a clustering
// key: first is its smallest key, or its largest when iterating in
// reverse.
type lazySource struct {
	src   cellSource
	first []byte
}

// mergingIter merges cell sources that are each sorted in the same
// direction and yields, for every (clustering, column), the Reconcile of
// all its versions. Sources are few (memtables plus the SSTables that hold
// the partition), so a small binary heap keeps each step O(log n).
//
// Lazy sources are positioned only when the merge reaches their first key:
// positioning an SSTable source loads (and, uncached, decompresses) a
// block, and a slice with a limit often ends before it gets to the later
// SSTables of a partition (TimeWindow files hold consecutive stretches of
// time, so their clustering ranges barely overlap).
type mergingIter struct {
	reverse bool
	heap    []cellSource
	lazy    []lazySource // in iteration order of first
	cell    base.Cell
	err     error
	// heapBuf is heap's first array: a read merges few sources.
	heapBuf [2]cellSource
}

func newMergingIter(sources []cellSource, lazy []lazySource, reverse bool) *mergingIter {
	m := new(mergingIter)
	m.init(sources, lazy, reverse)
	return m
}

// init sets m up as newMergingIter does, in memory the caller provides (a
// read embeds its merge, so that opening a slice allocates less).
func (m *mergingIter) init(sources []cellSource, lazy []lazySource, reverse bool) {
	m.initWith(sources, lazy, reverse, nil)
}

// initWith is init with spare, an empty array to use for the heap if the
// sources do not fit its first one.
func (m *mergingIter) initWith(sources []cellSource, lazy []lazySource, reverse bool, spare []cellSource) {
	*m = mergingIter{reverse: reverse, lazy: lazy}
	m.heap = m.heapBuf[:0]
	if n := len(sources) + len(lazy); n > len(m.heapBuf) {
		if m.heap = spare[:0]; cap(m.heap) < n {
			m.heap = make([]cellSource, 0, n)
		}
	}
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
	sortLazy(m.lazy, reverse)
}

// sortLazy sorts lazy sources by their first key in iteration order,
// stably. A read lists a partition's SSTables by file number, mostly
// oldest first, and in a time series each newer SSTable starts at a newer
// key: for a DESC clustering (or a reverse read of an ASC one) the list
// comes exactly backwards, which an insertion sort (what SortStableFunc
// does for up to 20 items, and in runs of 20 beyond) handles in its
// slowest, quadratic way, moving each source across all the others. A
// list strictly in the opposite order has no equal keys, so reversing it
// is the stable sort.
func sortLazy(lazy []lazySource, reverse bool) {
	if len(lazy) < 2 {
		return
	}
	cmp := func(a, b lazySource) int {
		if reverse {
			return bytes.Compare(b.first, a.first)
		}
		return bytes.Compare(a.first, b.first)
	}
	backwards := true
	for i := 1; i < len(lazy) && backwards; i++ {
		backwards = cmp(lazy[i-1], lazy[i]) > 0
	}
	if backwards {
		slices.Reverse(lazy)
		return
	}
	slices.SortStableFunc(lazy, cmp)
}

// keyBefore reports whether clustering key a comes strictly before b in
// iteration order.
func (m *mergingIter) keyBefore(a, b []byte) bool {
	if m.reverse {
		return bytes.Compare(a, b) > 0
	}
	return bytes.Compare(a, b) < 0
}

// activate positions every lazy source whose first key is at or before the
// heap's top, so that the top is the next cell of all sources; with an
// empty heap it positions the next lazy source, until one yields a cell.
func (m *mergingIter) activate() {
	for len(m.lazy) > 0 && m.err == nil {
		if len(m.heap) > 0 && m.keyBefore(m.heap[0].Cell().Clustering, m.lazy[0].first) {
			return
		}
		s := m.lazy[0].src
		m.lazy[0] = lazySource{}
		m.lazy = m.lazy[1:]
		if s.Next() {
			m.heap = append(m.heap, s)
			m.up(len(m.heap) - 1)
		} else if err := s.Err(); err != nil {
			m.err = err
		}
	}
}

// unopened is the number of lazy sources never positioned.
func (m *mergingIter) unopened() int { return len(m.lazy) }

func (m *mergingIter) less(a, b cellSource) bool {
	ca, cb := a.Cell(), b.Cell()
	c := base.CompareCellKeys(ca.Clustering, ca.Column, cb.Clustering, cb.Column)
	if m.reverse {
		return c > 0
	}
	return c < 0
}

func (m *mergingIter) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !m.less(m.heap[i], m.heap[parent]) {
			return
		}
		m.heap[i], m.heap[parent] = m.heap[parent], m.heap[i]
		i = parent
	}
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
	m.activate()
	if len(m.heap) == 0 || m.err != nil {
		return false
	}
	m.cell = *m.heap[0].Cell()
	if len(m.heap) == 1 && len(m.lazy) == 0 {
		// One source left: its cells are strictly ascending, so its
		// next cannot have the same key (the usual case: one SSTable
		// holds the slice).
		m.advanceTop()
		return true
	}
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

// top returns the source the next cell comes from, or nil: a compaction
// asks whether a whole block of it comes before every other source's
// next cell (otherNext), to copy the block (copyBlock). Not with lazy
// sources.
func (m *mergingIter) top() cellSource {
	if len(m.heap) == 0 || m.err != nil || len(m.lazy) > 0 {
		return nil
	}
	return m.heap[0]
}

// otherNext returns the smallest next cell of the sources but the top
// one, or nil if there is none.
func (m *mergingIter) otherNext() *base.Cell {
	switch {
	case len(m.heap) <= 1:
		return nil
	case len(m.heap) == 2 || !m.less(m.heap[2], m.heap[1]):
		return m.heap[1].Cell()
	default:
		return m.heap[2].Cell()
	}
}

// skipTop moves the top source past what the caller took from it
// directly (a copied block): its Next yields the cell after.
func (m *mergingIter) skipTop() { m.advanceTop() }

// Cell returns the current reconciled cell.
func (m *mergingIter) Cell() *base.Cell { return &m.cell }

// Err returns the first error any source reported; iteration stops at it.
func (m *mergingIter) Err() error { return m.err }
