package base

import (
	"bytes"
	"math"
)

// LiveMarkedForDeleteAt is the MarkedForDeleteAt of a DeletionTime that
// deletes nothing.
const LiveMarkedForDeleteAt int64 = math.MinInt64

// DeletionTime is a row, range or partition deletion: it shadows every cell
// whose timestamp is <= MarkedForDeleteAt.
type DeletionTime struct {
	// MarkedForDeleteAt is the deletion's write timestamp in microseconds.
	MarkedForDeleteAt int64
	// LocalDeletionTime is when the deletion happened, in unix seconds;
	// gc_grace is counted from it.
	LocalDeletionTime int64
}

// LiveDeletion deletes nothing.
var LiveDeletion = DeletionTime{MarkedForDeleteAt: LiveMarkedForDeleteAt, LocalDeletionTime: NoDeletionTime}

// IsLive reports whether d deletes nothing.
func (d DeletionTime) IsLive() bool { return d.MarkedForDeleteAt == LiveMarkedForDeleteAt }

// Deletes reports whether d shadows a cell written at timestampMicros.
func (d DeletionTime) Deletes(timestampMicros int64) bool {
	return !d.IsLive() && timestampMicros <= d.MarkedForDeleteAt
}

// Supersedes reports whether d wins over o: the later MarkedForDeleteAt,
// then the later LocalDeletionTime (Cassandra's DeletionTime.supersedes).
func (d DeletionTime) Supersedes(o DeletionTime) bool {
	if d.MarkedForDeleteAt != o.MarkedForDeleteAt {
		return d.MarkedForDeleteAt > o.MarkedForDeleteAt
	}
	return d.LocalDeletionTime > o.LocalDeletionTime
}

// Max returns whichever of d and o supersedes the other.
func (d DeletionTime) Max(o DeletionTime) DeletionTime {
	if o.Supersedes(d) {
		return o
	}
	return d
}

// Bound is one end of a clustering range. A nil Key means unbounded (the
// start or end of the partition).
type Bound struct {
	Key       []byte
	Inclusive bool
}

// Unbounded is the open end of a range.
var Unbounded = Bound{}

// IsUnbounded reports whether b has no key.
func (b Bound) IsUnbounded() bool { return b.Key == nil }

// AfterStart reports whether clustering key ck is at or after start.
func AfterStart(ck []byte, start Bound) bool {
	if start.Key == nil {
		return true
	}
	c := bytes.Compare(ck, start.Key)
	return c > 0 || (c == 0 && start.Inclusive)
}

// BeforeEnd reports whether clustering key ck is at or before end.
func BeforeEnd(ck []byte, end Bound) bool {
	if end.Key == nil {
		return true
	}
	c := bytes.Compare(ck, end.Key)
	return c < 0 || (c == 0 && end.Inclusive)
}

// InRange reports whether ck lies within [start, end] with their
// inclusiveness.
func InRange(ck []byte, start, end Bound) bool { return AfterStart(ck, start) && BeforeEnd(ck, end) }

// RangeTombstone deletes every cell whose clustering key lies between Start
// and End (with their inclusiveness) and whose timestamp is <= the
// deletion's. A row deletion is a RangeTombstone whose Start and End are the
// same key, both inclusive.
type RangeTombstone struct {
	Start, End Bound
	Deletion   DeletionTime
}

// Covers reports whether ck lies in the tombstone's range.
func (rt *RangeTombstone) Covers(ck []byte) bool { return InRange(ck, rt.Start, rt.End) }

// Overlaps reports whether the tombstone's range intersects [start, end].
func (rt *RangeTombstone) Overlaps(start, end Bound) bool {
	return !endsBefore(rt.End, start) && !endsBefore(end, rt.Start)
}

// endsBefore reports whether a range ending at end lies wholly before a range
// starting at start.
func endsBefore(end, start Bound) bool {
	if end.Key == nil || start.Key == nil {
		return false
	}
	c := bytes.Compare(end.Key, start.Key)
	return c < 0 || (c == 0 && !(end.Inclusive && start.Inclusive))
}

// Clone returns a deep copy of rt.
func (rt RangeTombstone) Clone() RangeTombstone {
	if rt.Start.Key != nil {
		rt.Start.Key = bytes.Clone(rt.Start.Key)
	}
	if rt.End.Key != nil {
		rt.End.Key = bytes.Clone(rt.End.Key)
	}
	return rt
}

// PartitionDeletions is everything that deletes more than one cell in a
// partition: the partition-level deletion and the range (and row)
// tombstones.
type PartitionDeletions struct {
	Partition DeletionTime
	// Ranges are fragments (FragmentRanges) wherever the engine hands
	// them out: memtables, SSTable readers; a writer fragments what it
	// is given. Find the deletion covering a key with a RangeCursor.
	Ranges []RangeTombstone
}

// IsEmpty reports whether pd deletes nothing.
func (pd *PartitionDeletions) IsEmpty() bool { return pd.Partition.IsLive() && len(pd.Ranges) == 0 }
