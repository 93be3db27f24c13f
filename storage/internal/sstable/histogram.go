package sstable

import (
	"encoding/binary"
	"math"
	"sort"

	"github.com/eventide/eventide/storage/internal/base"
)

// TimeHistogram counts values (unix seconds) in at most maxHistogramBins
// bins, for estimating how many tombstones of a file may be purged at a
// given time without reading it (Cassandra's tombstone drop-time
// histogram). It is conservative: a bin's time is at or after every value
// counted in it (merged bins keep the later time), so CountBefore never counts a value that is
// not before its argument.
type TimeHistogram struct {
	bins []histogramBin // ascending by at
	last int            // index of the bin the previous Add went to
	// absorbed holds values Add inserted and then at once merged into
	// the next bin (absorbed[i].in), which left the bins' times as they
	// were: until a value is inserted that stays (the times change), an
	// Add of one of them would do exactly the same, and only counts it in
	// that bin. A writer adds the expiry of every expiring cell, with
	// runs of cells per second of event time, alternating between two
	// neighbouring seconds; once the bins were full, a second whose
	// neighbours were the closest pair was inserted and merged again for
	// every cell of its run (a fifth of the all-in-one's flush and
	// compaction CPU at 40,000 events/s, BENCHMARKS.md s12-merge).
	absorbed  [absorbedValues]absorbedValue
	nAbsorbed int
}

// absorbedValues is how many absorbed values a TimeHistogram remembers.
const absorbedValues = 4

type absorbedValue struct {
	at int64
	in int
}

type histogramBin struct {
	at    int64
	count int64
}

const (
	// maxHistogramBins bounds a histogram's size in the properties.
	maxHistogramBins = 64
)

// Add counts one value.
func (h *TimeHistogram) Add(seconds int64) {
	// Whole seconds keep a young file's estimate exact (in immediate mode
	// a deletion counts as droppable from the second it was written);
	// older and wider files merge bins, conservatively.
	at := seconds
	if h.last < len(h.bins) && h.bins[h.last].at == at {
		h.bins[h.last].count++
		return
	}
	for _, a := range h.absorbed[:h.nAbsorbed] {
		if a.at == at {
			h.bins[a.in].count++
			return
		}
	}
	i := sort.Search(len(h.bins), func(i int) bool { return h.bins[i].at >= at })
	if i < len(h.bins) && h.bins[i].at == at {
		h.bins[i].count++
		h.last = i
		return
	}
	h.bins = append(h.bins, histogramBin{})
	copy(h.bins[i+1:], h.bins[i:])
	h.bins[i] = histogramBin{at: at, count: 1}
	h.last = i
	if len(h.bins) <= maxHistogramBins {
		h.nAbsorbed = 0 // the times changed
		return
	}
	if h.mergeClosest() != i {
		h.nAbsorbed = 0
		return
	}
	// Merged into the next bin, now at i: the times are as they were.
	if h.nAbsorbed == absorbedValues {
		copy(h.absorbed[:], h.absorbed[1:])
		h.nAbsorbed--
	}
	h.absorbed[h.nAbsorbed] = absorbedValue{at: at, in: i}
	h.nAbsorbed++
}

// mergeClosest merges the two adjacent bins closest in time into the later
// one's time, and returns the index the earlier one had.
func (h *TimeHistogram) mergeClosest() int {
	best := 0
	for i := 1; i+1 < len(h.bins); i++ {
		if gap(h.bins[i], h.bins[i+1]) < gap(h.bins[best], h.bins[best+1]) {
			best = i
		}
	}
	h.bins[best+1].count += h.bins[best].count
	h.bins = append(h.bins[:best], h.bins[best+1:]...)
	h.last = 0
	return best
}

func gap(a, b histogramBin) uint64 { return uint64(b.at) - uint64(a.at) }

// Total is the number of values counted.
func (h *TimeHistogram) Total() int64 {
	var n int64
	for _, b := range h.bins {
		n += b.count
	}
	return n
}

// CountBefore is how many values are certainly before t (strictly).
func (h *TimeHistogram) CountBefore(t int64) int64 {
	var n int64
	for _, b := range h.bins {
		if b.at >= t {
			break
		}
		n += b.count
	}
	return n
}

// appendHistogram appends h: bins uvarint, then per bin its time (the
// first a varint, the others the uvarint distance from the previous) and
// its count uvarint (>= 1).
func appendHistogram(dst []byte, h *TimeHistogram) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(h.bins)))
	for i, b := range h.bins {
		if i == 0 {
			dst = binary.AppendVarint(dst, b.at)
		} else {
			dst = binary.AppendUvarint(dst, uint64(b.at)-uint64(h.bins[i-1].at))
		}
		dst = binary.AppendUvarint(dst, uint64(b.count))
	}
	return dst
}

func (c *cursor) histogram(what string) TimeHistogram {
	var h TimeHistogram
	n := c.uvarint(what + " bins")
	if c.err == nil && n > maxHistogramBins {
		c.fail(what, "got %d bins, want at most %d", n, maxHistogramBins)
	}
	if c.err != nil || n == 0 {
		return h
	}
	h.bins = make([]histogramBin, n)
	for i := range h.bins {
		if i == 0 {
			h.bins[i].at = c.varint(what + " time")
		} else {
			d := c.uvarint(what + " time delta")
			if c.err == nil && (d == 0 || d > uint64(math.MaxInt64-h.bins[i-1].at)) {
				c.fail(what, "bin %d: got time delta %d after %d", i, d, h.bins[i-1].at)
			}
			h.bins[i].at = h.bins[i-1].at + int64(d)
		}
		cnt := c.uvarint(what + " count")
		if c.err == nil && (cnt == 0 || cnt > math.MaxInt64/4) {
			c.fail(what, "bin %d: got count %d", i, cnt)
		}
		h.bins[i].count = int64(cnt)
		if c.err != nil {
			return TimeHistogram{}
		}
	}
	return h
}

// TombstoneStats are what a file says about its tombstones, for the
// compaction picker (format version 3; zero in older files).
type TombstoneStats struct {
	// CreatedAt is when the file was written, in unix seconds by the
	// engine's clock; 0 if unknown.
	CreatedAt int64
	// Deletions counts tombstone cells, range tombstones and partition
	// deletions by their local deletion time, from which gc_grace counts.
	Deletions TimeHistogram
	// Expiring counts expiring cells by their expiry, and ExpiringWritten
	// the same cells by the second they were written (expiry - TTL), from
	// which gc_grace counts for an expired cell.
	Expiring, ExpiringWritten TimeHistogram
}

// Droppable estimates how many of the file's tombstones, expired cells and
// deletions a compaction at nowSeconds could purge by gc_grace alone (a
// purge also needs nothing older elsewhere, which the file cannot know):
// deletions dated before gcBefore, and expiring cells both expired and
// written before gcBefore. It never counts a tombstone that could not be
// purged on time grounds.
func (s *TombstoneStats) Droppable(nowSeconds, gcBefore int64) int64 {
	expired := s.Expiring.CountBefore(nowSeconds + 1)
	written := s.ExpiringWritten.CountBefore(gcBefore)
	return s.Deletions.CountBefore(gcBefore) + min(expired, written)
}

// clearHints drops the histograms' insertion hints, so that equal stats
// compare equal whatever was added last.
func (s *TombstoneStats) clearHints() {
	for _, h := range []*TimeHistogram{&s.Deletions, &s.Expiring, &s.ExpiringWritten} {
		h.last, h.absorbed, h.nAbsorbed = 0, [absorbedValues]absorbedValue{}, 0
	}
}

// noteCell adds a cell to the stats.
func (s *TombstoneStats) noteCell(c *base.Cell) {
	switch c.Kind {
	case base.KindTombstone:
		s.Deletions.Add(c.LocalDeletionTime)
	case base.KindExpiring:
		s.Expiring.Add(c.LocalDeletionTime)
		s.ExpiringWritten.Add(c.PurgeTime())
	}
}
