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
//
// The query's tombstone budget (Options.FailTombstones) holds for the sum
// over all its partitions, whichever order they are read in: each slice is
// opened with what is left of the budget once the tombstones of the slices
// already open are counted, and the running total is checked after every
// row, so the query fails as soon as the total passes the budget.
func (s *partitionScan) run(emit func(partition []byte, row *storage.Row) bool) error {
	if err := s.query.ctx.Err(); err != nil {
		return fmt.Errorf("cannot slice %s: %w", s.table, err)
	}
	its := make([]storage.Rows, 0, len(s.partitions))
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
	// scanned is the query's tombstones so far, those of open slices
	// included.
	scanned := func() int {
		n := s.query.trace.Tombstones
		for _, it := range its {
			if it != nil {
				n += it.Stats().TombstonesScanned
			}
		}
		return n
	}
	overBudget := func(partition []byte) error {
		if scanned() > s.r.opts.FailTombstones {
			closeAll()
			return s.wrap(partition, storage.ErrTooManyTombstones)
		}
		return nil
	}
	for i, p := range s.partitions {
		s.query.partition = p
		// At most the whole budget is spent here (overBudget failed the
		// query otherwise); 0 would mean no limit.
		budget := max(s.r.opts.FailTombstones-scanned(), 1)
		it, err := s.r.db.Slice(s.query.ctx, storage.SliceQuery{Table: s.table, Partition: p, Start: s.start, End: s.end,
			Reverse: s.reverse, Limit: s.limit, MaxTombstones: budget})
		if err != nil {
			closeAll()
			return fmt.Errorf("slice %s partition %q: %w", s.table, p, err)
		}
		its = append(its, it)
		if it.Next() {
			heads = append(heads, i)
		} else if err := it.Err(); err != nil {
			closeAll()
			return s.wrap(p, err)
		}
		if err := overBudget(p); err != nil {
			return err
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
			if err := overBudget(s.partitions[i]); err != nil {
				return err
			}
			continue
		}
		if err := it.Err(); err != nil {
			closeAll()
			return s.wrap(s.partitions[i], err)
		}
		if err := overBudget(s.partitions[i]); err != nil {
			return err
		}
		heads = append(heads[:best], heads[best+1:]...)
	}
	if err := closeAll(); err != nil {
		return err
	}
	// Closing adds what the slices read past their last row.
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
