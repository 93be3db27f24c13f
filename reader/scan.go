package reader

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/eventide/eventide/storage"
)

// partitionScan slices several partitions of one table with the same bounds
// and merges their rows in clustering order: the sub-partitions of one hour
// bucket of a hot event type. With one partition it is a plain slice.
type partitionScan struct {
	r          *Reader
	query      *queryState
	table      string
	partitions [][]byte
	start, end storage.Bound
	reverse    bool
	// limit is the most rows any one partition can contribute.
	limit int
}

// queryState is what one query accumulates over all its partitions.
type queryState struct {
	ctx   context.Context
	trace Trace
	// partition is the last partition sliced, named by tombstone errors.
	partition []byte
}

// run calls emit with each row in merged order until emit returns false or
// the partitions are exhausted. The row is only valid during the call.
func (s *partitionScan) run(emit func(partition []byte, row *storage.Row) bool) error {
	if err := s.query.ctx.Err(); err != nil {
		return err
	}
	its := make([]*storage.RowIterator, 0, len(s.partitions))
	heads := make([]int, 0, len(s.partitions)) // indexes of iterators holding a row
	closeAll := func() error {
		var first error
		for i, it := range its {
			if it == nil {
				continue
			}
			err := it.Close()
			s.query.trace.add(it.Stats())
			its[i] = nil
			if err != nil && first == nil {
				first = s.wrap(s.partitions[i], err)
			}
		}
		return first
	}
	for i, p := range s.partitions {
		budget := s.r.opts.FailTombstones - s.query.trace.Tombstones
		if budget < 1 {
			budget = 1
		}
		it, err := s.r.db.Slice(storage.SliceQuery{Table: s.table, Partition: p, Start: s.start, End: s.end,
			Reverse: s.reverse, Limit: s.limit, MaxTombstones: budget})
		if err != nil {
			closeAll()
			return fmt.Errorf("slice %s partition %q: %w", s.table, p, err)
		}
		its = append(its, it)
		s.query.partition = p
		if it.Next() {
			heads = append(heads, i)
		} else if err := it.Err(); err != nil {
			closeAll()
			return s.wrap(p, err)
		}
	}
	for len(heads) > 0 {
		// Pick the head that comes first in the scan order.
		best := 0
		for j := 1; j < len(heads); j++ {
			c := bytes.Compare(its[heads[j]].Row().Clustering, its[heads[best]].Row().Clustering)
			if (c < 0) != s.reverse && c != 0 {
				best = j
			}
		}
		i := heads[best]
		it := its[i]
		if !emit(s.partitions[i], it.Row()) {
			break
		}
		if it.Next() {
			continue
		}
		if err := it.Err(); err != nil {
			closeAll()
			return s.wrap(s.partitions[i], err)
		}
		heads = append(heads[:best], heads[best+1:]...)
	}
	if err := closeAll(); err != nil {
		return err
	}
	// Each partition was opened with the budget left at that moment, so
	// several merged partitions can together pass it: check the total.
	if s.query.trace.Tombstones > s.r.opts.FailTombstones {
		return s.wrap(s.partitions[len(s.partitions)-1], storage.ErrTooManyTombstones)
	}
	return nil
}

func (s *partitionScan) wrap(partition []byte, err error) error {
	if errors.Is(err, storage.ErrTooManyTombstones) {
		return fmt.Errorf("%w: more than %d tombstones scanned by this query, the last in partition %q of table %s; bound the query more tightly (for events: a later from or an earlier to), or delete less",
			storage.ErrTooManyTombstones, s.r.opts.FailTombstones, partition, s.table)
	}
	return fmt.Errorf("slice %s partition %q: %w", s.table, partition, err)
}
