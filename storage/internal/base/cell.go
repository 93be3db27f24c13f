package base

import (
	"bytes"
	"encoding/binary"
	"math"
)

// Kind says what a cell version is.
type Kind uint8

// Cell kinds. The numeric values are stored on disk (WAL and SSTables) and
// must never be reused or renumbered.
const (
	// KindLive is a plain cell with no expiry.
	KindLive Kind = 1
	// KindExpiring is a cell with a TTL; it is live until LocalDeletionTime
	// (its expiry, unix seconds) and a tombstone from then on.
	KindExpiring Kind = 2
	// KindTombstone is a cell deletion; LocalDeletionTime is when it was
	// deleted (unix seconds), used for gc_grace.
	KindTombstone Kind = 3
	// KindCounter is a counter: Value holds the sum of the deltas merged so
	// far as 8 bytes big-endian two's complement. Counters add instead of
	// replacing each other.
	KindCounter Kind = 4
)

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { return k >= KindLive && k <= KindCounter }

func (k Kind) String() string {
	switch k {
	case KindLive:
		return "live"
	case KindExpiring:
		return "expiring"
	case KindTombstone:
		return "tombstone"
	case KindCounter:
		return "counter"
	}
	return "unknown"
}

// NoDeletionTime is the LocalDeletionTime of cells that never expire.
const NoDeletionTime int64 = math.MaxInt64

// Cell is one version of one cell of a row: (clustering key, column) within
// a partition. Byte slices may alias buffers owned by the producer; copy them
// to keep them past the producer's next call.
type Cell struct {
	Clustering []byte
	Column     []byte
	Kind       Kind
	// Timestamp is the write time in microseconds since the Unix epoch;
	// the highest wins.
	Timestamp int64
	// TTL is the time to live in seconds (KindExpiring only).
	TTL int32
	// LocalDeletionTime is, in unix seconds, the expiry of an expiring cell
	// or the deletion time of a tombstone; NoDeletionTime otherwise.
	LocalDeletionTime int64
	// Value is the cell's value (empty for tombstones).
	Value []byte
}

// IsLive reports whether the cell is visible at nowSeconds.
func (c *Cell) IsLive(nowSeconds int64) bool {
	switch c.Kind {
	case KindLive, KindCounter:
		return true
	case KindExpiring:
		return nowSeconds < c.LocalDeletionTime
	}
	return false
}

// IsTombstoneAt reports whether the cell counts as a tombstone at
// nowSeconds: a deletion, or an expiring cell past its expiry.
func (c *Cell) IsTombstoneAt(nowSeconds int64) bool { return !c.IsLive(nowSeconds) }

// PurgeTime is the unix second from which gc_grace is counted for a cell
// that is (or becomes) a tombstone: the deletion time for a tombstone and,
// for an expired cell, its write time (expiry - TTL), as Cassandra does when
// it turns an expired cell into a tombstone.
func (c *Cell) PurgeTime() int64 {
	if c.Kind == KindExpiring {
		return c.LocalDeletionTime - int64(c.TTL)
	}
	return c.LocalDeletionTime
}

// CounterValue decodes the counter sum of a KindCounter cell.
func (c *Cell) CounterValue() int64 {
	if len(c.Value) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(c.Value))
}

// EncodeCounter returns the 8-byte value of a counter cell holding v.
func EncodeCounter(v int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(v))
}

// Clone returns a deep copy of c.
func (c Cell) Clone() Cell {
	c.Clustering = bytes.Clone(c.Clustering)
	c.Column = bytes.Clone(c.Column)
	c.Value = bytes.Clone(c.Value)
	return c
}

// Reconcile returns the version of a cell that wins between a and b, both
// versions of the same (partition, clustering, column). It follows
// Cassandra's Cells.reconcile exactly:
//   - the higher timestamp wins;
//   - on equal timestamps an expiring cell or tombstone beats a plain live
//     cell, a tombstone beats an expiring cell, between two expiring cells or
//     two tombstones the later local deletion time wins, and otherwise the
//     greater value bytes win.
//
// Counters are the exception: two counter versions merge into one whose
// value is the sum and whose timestamp is the larger. A counter against a
// tombstone follows the timestamp rule (ties to the tombstone); as in
// Cassandra, a counter cell that was deleted must not be incremented again.
//
// The result is a Cell that may alias a's or b's bytes, except for merged
// counters whose Value is newly allocated.
func Reconcile(a, b Cell) Cell {
	if a.Kind == KindCounter && b.Kind == KindCounter {
		merged := a
		if b.Timestamp > merged.Timestamp {
			merged.Timestamp = b.Timestamp
		}
		merged.Value = EncodeCounter(a.CounterValue() + b.CounterValue())
		return merged
	}
	if a.Timestamp != b.Timestamp {
		if a.Timestamp > b.Timestamp {
			return a
		}
		return b
	}
	aDel := a.Kind == KindExpiring || a.Kind == KindTombstone
	bDel := b.Kind == KindExpiring || b.Kind == KindTombstone
	if aDel || bDel {
		if aDel != bDel {
			if aDel {
				return a
			}
			return b
		}
		aTomb := a.Kind == KindTombstone
		bTomb := b.Kind == KindTombstone
		if aTomb != bTomb {
			if aTomb {
				return a
			}
			return b
		}
		if a.LocalDeletionTime != b.LocalDeletionTime {
			if a.LocalDeletionTime > b.LocalDeletionTime {
				return a
			}
			return b
		}
	}
	if a.Kind != b.Kind {
		// Only a counter against a live cell reaches here; it cannot
		// happen in a well-typed table, but the choice must still be
		// order-independent.
		if a.Kind > b.Kind {
			return a
		}
		return b
	}
	if bytes.Compare(a.Value, b.Value) >= 0 {
		return a
	}
	return b
}
