package base

import (
	"bytes"
	"container/heap"
	"sort"
)

// Range tombstones are kept as fragments: sorted by start, pairwise
// disjoint, each carrying the strongest deletion of the tombstones that
// covered it. Over fragments, "which deletion covers ck" is answered by a
// RangeCursor that moves with a scan in either direction, so a read costs
// O(cells + fragments) however many row and range deletions a partition
// holds (checking every range for every cell cost O(cells x ranges)).
//
// Dropping the weaker deletions where tombstones overlap loses nothing:
// a deletion shadows cells by timestamp, and the strongest one (the latest
// MarkedForDeleteAt) shadows everything a weaker one does. Purging keeps
// this true: a fragment is purged only with every cell it shadows that is
// older than anything outside the compaction, which includes everything
// the weaker deletions shadowed.

// point is a position between clustering keys: just before key (side -1),
// just after it (side +1), or the open ends of the partition.
type point struct {
	key  []byte
	side int8 // -2 before everything, -1 before key, +1 after key, +2 after everything
}

func comparePoints(a, b point) int {
	if a.side == -2 || b.side == -2 || a.side == 2 || b.side == 2 {
		return int(classOf(a)) - int(classOf(b))
	}
	if c := bytes.Compare(a.key, b.key); c != 0 {
		return c
	}
	return int(a.side) - int(b.side)
}

func classOf(p point) int8 {
	switch p.side {
	case -2:
		return -1
	case 2:
		return 1
	}
	return 0
}

func startPoint(b Bound) point {
	switch {
	case b.Key == nil:
		return point{side: -2}
	case b.Inclusive:
		return point{key: b.Key, side: -1}
	}
	return point{key: b.Key, side: 1}
}

func endPoint(b Bound) point {
	switch {
	case b.Key == nil:
		return point{side: 2}
	case b.Inclusive:
		return point{key: b.Key, side: 1}
	}
	return point{key: b.Key, side: -1}
}

func (p point) asStart() Bound {
	if p.side == -2 {
		return Unbounded
	}
	return Bound{Key: p.key, Inclusive: p.side == -1}
}

func (p point) asEnd() Bound {
	if p.side == 2 {
		return Unbounded
	}
	return Bound{Key: p.key, Inclusive: p.side == 1}
}

// IsEmpty reports whether the tombstone's range holds no clustering key
// (its start lies at or after its end).
func (rt *RangeTombstone) IsEmpty() bool {
	return comparePoints(startPoint(rt.Start), endPoint(rt.End)) >= 0
}

// IsFragmented reports whether ranges are fragments: none empty, sorted,
// pairwise disjoint. FragmentRanges returns such lists.
func IsFragmented(ranges []RangeTombstone) bool {
	for i := range ranges {
		if ranges[i].IsEmpty() {
			return false
		}
		if i > 0 && comparePoints(endPoint(ranges[i-1].End), startPoint(ranges[i].Start)) > 0 {
			return false
		}
	}
	return true
}

// FragmentRanges returns ranges as fragments (sorted by start, pairwise
// disjoint, no empty range), each with the strongest deletion (Max) of the
// tombstones that cover it; adjacent fragments with equal deletions are
// joined. Already fragmented input is returned as is. The result's keys
// alias the input's. O(n log n).
func FragmentRanges(ranges []RangeTombstone) []RangeTombstone {
	if IsFragmented(ranges) {
		return ranges
	}
	type span struct {
		start, end point
		del        DeletionTime
	}
	spans := make([]span, 0, len(ranges))
	points := make([]point, 0, 2*len(ranges))
	for i := range ranges {
		s := span{start: startPoint(ranges[i].Start), end: endPoint(ranges[i].End), del: ranges[i].Deletion}
		if comparePoints(s.start, s.end) >= 0 || s.del.IsLive() {
			continue
		}
		spans = append(spans, s)
		points = append(points, s.start, s.end)
	}
	sort.Slice(spans, func(i, j int) bool { return comparePoints(spans[i].start, spans[j].start) < 0 })
	sort.Slice(points, func(i, j int) bool { return comparePoints(points[i], points[j]) < 0 })
	uniq := points[:0]
	for _, p := range points {
		if len(uniq) == 0 || comparePoints(uniq[len(uniq)-1], p) != 0 {
			uniq = append(uniq, p)
		}
	}
	points = uniq

	var out []RangeTombstone
	var active activeSpans
	next := 0
	var lastEnd point
	for i := 0; i+1 < len(points); i++ {
		p := points[i]
		for next < len(spans) && comparePoints(spans[next].start, p) <= 0 {
			heap.Push(&active, activeSpan{end: spans[next].end, del: spans[next].del})
			next++
		}
		// Spans that ended at or before p may still sit below the top;
		// only the top matters, and it is popped once it has ended.
		for len(active) > 0 && comparePoints(active[0].end, p) <= 0 {
			heap.Pop(&active)
		}
		if len(active) == 0 {
			continue
		}
		d := active[0].del
		if n := len(out); n > 0 && comparePoints(lastEnd, p) == 0 && out[n-1].Deletion == d {
			out[n-1].End = points[i+1].asEnd()
		} else {
			out = append(out, RangeTombstone{Start: p.asStart(), End: points[i+1].asEnd(), Deletion: d})
		}
		lastEnd = points[i+1]
	}
	return out
}

type activeSpan struct {
	end point
	del DeletionTime
}

// activeSpans is a max-heap of deletions.
type activeSpans []activeSpan

func (h activeSpans) Len() int           { return len(h) }
func (h activeSpans) Less(i, j int) bool { return h[i].del.Supersedes(h[j].del) }
func (h activeSpans) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *activeSpans) Push(x any)        { *h = append(*h, x.(activeSpan)) }
func (h *activeSpans) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// RangeCursor answers which fragment covers a clustering key, for keys
// asked in scan order: ascending, or descending when reverse. Each call
// moves forward from where the previous one stopped (a binary search when
// the scan jumps far), so a whole scan costs O(keys + fragments).
type RangeCursor struct {
	frags   []RangeTombstone
	reverse bool
	i       int
	// covers says whether frags[i] covered the last key asked.
	covers bool
}

// NewRangeCursor returns a cursor over frags, which must be fragmented
// (IsFragmented).
func NewRangeCursor(frags []RangeTombstone, reverse bool) RangeCursor {
	c := RangeCursor{frags: frags, reverse: reverse}
	if reverse {
		c.i = len(frags) - 1
	}
	return c
}

// cursorGallop is how many fragments a cursor steps over one by one
// before it binary-searches the rest.
const cursorGallop = 4

// Deletion returns the deletion of the fragment covering ck, or
// LiveDeletion if none does. ck must not move against the scan direction
// between calls.
func (c *RangeCursor) Deletion(ck []byte) DeletionTime {
	if !c.reverse {
		// Skip fragments that end before ck.
		for n := 0; c.i < len(c.frags) && !BeforeEnd(ck, c.frags[c.i].End); n++ {
			if n == cursorGallop {
				rest := c.frags[c.i:]
				c.i += sort.Search(len(rest), func(j int) bool { return BeforeEnd(ck, rest[j].End) })
				break
			}
			c.i++
		}
		c.covers = c.i < len(c.frags) && AfterStart(ck, c.frags[c.i].Start)
		if c.covers {
			return c.frags[c.i].Deletion
		}
		return LiveDeletion
	}
	// Skip fragments that start after ck.
	for n := 0; c.i >= 0 && !AfterStart(ck, c.frags[c.i].Start); n++ {
		if n == cursorGallop {
			c.i = sort.Search(c.i+1, func(j int) bool { return !AfterStart(ck, c.frags[j].Start) }) - 1
			break
		}
		c.i--
	}
	c.covers = c.i >= 0 && BeforeEnd(ck, c.frags[c.i].End)
	if c.covers {
		return c.frags[c.i].Deletion
	}
	return LiveDeletion
}

// Reached returns how many fragments the scan has reached by the last key
// asked of Deletion: those it passed, and the one covering the key. A
// slice counts a range or row deletion as scanned once its walk reaches
// it, so a read that stops early does not count the deletions beyond.
func (c *RangeCursor) Reached() int {
	n := c.i
	if c.reverse {
		n = len(c.frags) - 1 - c.i
	}
	if c.covers {
		n++
	}
	return n
}

// Len returns the number of fragments of the cursor.
func (c *RangeCursor) Len() int { return len(c.frags) }

// OverlappingFragments returns the run of frags (fragmented, see
// IsFragmented) that intersect [start, end], as a subslice of frags.
func OverlappingFragments(frags []RangeTombstone, start, end Bound) []RangeTombstone {
	lo := sort.Search(len(frags), func(i int) bool { return !endsBefore(frags[i].End, start) })
	hi := lo + sort.Search(len(frags)-lo, func(i int) bool { return endsBefore(end, frags[lo+i].Start) })
	return frags[lo:hi]
}
