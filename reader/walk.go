package reader

import (
	"context"
	"errors"
	"math"

	"github.com/eventide/eventide/storage"
)

// Walk is a limit-bounded read across groups of partitions of one table:
// the groups in order, the partitions of each group merged in clustering
// order (partitionScan), all with the same bounds, stopping after Limit
// rows in total. An event query is one: each hour bucket a group of its
// sub-partitions, newest hour first; a count query too: each hour's
// counts partition a group, oldest first, no limit.
//
// The groups must follow the walk's order with key ranges that do not
// overlap: every key of group i comes before (in the walk's order) every
// key of group i+1, as each hour's event ids lie in that hour. A walk cut
// short (a remote reply's byte budget) then resumes from the group of the
// last row with the bound moved past its key. A group of several
// partitions has read ahead to each one's next row when the walk is cut
// there, so the resumed walk reads those rows and the tombstones before
// them again, and the trace and the tombstone limit count them twice.
// A remote reply is cut right after the row that spends its budget, so
// with one partition per group nothing is read twice.
type Walk struct {
	Table  string
	Groups [][][]byte
	// Start, End and Reverse bound and order every slice, as in
	// storage.SliceQuery.
	Start, End storage.Bound
	Reverse    bool
	// Limit is the most rows of the whole walk; 0: no limit.
	Limit int
	// MaxTombstones is the most tombstones the whole walk may scan (past
	// it, an error wrapping storage.ErrTooManyTombstones); 0: no limit.
	MaxTombstones int
}

// GroupWalker is implemented by a Store that runs a whole Walk where the
// data is: a client of a remote storage node asks the node once for the
// walk rather than once per partition (queryrpc.Client). WalkGroups calls emit with
// each row in walk order, and the index of its group, until emit returns
// false, the limit is met or the groups end; the row is valid only during
// the call. The returned trace is what the walk read. Errors follow
// RunWalk's: a tombstone failure is a *WalkGroupError. An error wrapping
// ErrWalkUnsupported, returned before any row, means this walk cannot run
// remotely; the reader then slices partition by partition.
type GroupWalker interface {
	WalkGroups(ctx context.Context, w *Walk, emit func(group int, row *storage.Row) bool) (Trace, error)
}

// ErrWalkUnsupported is wrapped by a GroupWalker that cannot run a walk
// (its partitions are on several nodes, or the node is of a release
// without walks).
var ErrWalkUnsupported = errors.New("walk unsupported")

// WalkGroupError is a walk's failure in one of its groups: too many
// tombstones, for which an event query names the hour.
type WalkGroupError struct {
	Group int
	Err   error
}

func (e *WalkGroupError) Error() string { return e.Err.Error() }
func (e *WalkGroupError) Unwrap() error { return e.Err }

// RunWalk runs w against db partition by partition: what a storage node
// does for a remote GroupWalker, and what a Reader does over a local
// store. A tombstone failure (more than w.MaxTombstones over the whole
// walk) is a *WalkGroupError naming the group.
func RunWalk(ctx context.Context, db Store, w *Walk, emit func(group int, row *storage.Row) bool) (Trace, error) {
	fail := w.MaxTombstones
	if fail <= 0 {
		fail = math.MaxInt
	}
	r := &Reader{db: db, opts: Options{FailTombstones: fail}}
	qs := &queryState{ctx: ctx}
	err := r.runWalk(qs, w, emit)
	return qs.trace, err
}

// runWalk runs w over r's store, partition by partition, into qs.
func (r *Reader) runWalk(qs *queryState, w *Walk, emit func(group int, row *storage.Row) bool) error {
	rows := 0
	for g, partitions := range w.Groups {
		limit := 0
		if w.Limit > 0 {
			limit = w.Limit - rows
		}
		stopped := false
		scan := partitionScan{r: r, query: qs, table: w.Table, partitions: partitions,
			start: w.Start, end: w.End, reverse: w.Reverse, limit: limit}
		err := scan.run(func(_ []byte, row *storage.Row) bool {
			rows++
			if !emit(g, row) || w.Limit > 0 && rows >= w.Limit {
				stopped = true
				return false
			}
			return true
		})
		if err != nil {
			if errors.Is(err, storage.ErrTooManyTombstones) {
				return &WalkGroupError{Group: g, Err: err}
			}
			return err
		}
		if stopped {
			return nil
		}
	}
	return nil
}

// walk runs w through the store's GroupWalker when it has one, else (or
// when it cannot run this walk) partition by partition.
func (r *Reader) walk(qs *queryState, w *Walk, emit func(group int, row *storage.Row) bool) error {
	if gw, ok := r.db.(GroupWalker); ok && len(w.Groups) > 0 {
		w.MaxTombstones = max(r.opts.FailTombstones-qs.trace.Tombstones, 1)
		tr, err := gw.WalkGroups(qs.ctx, w, emit)
		qs.trace.Merge(&tr)
		if len(w.Groups[len(w.Groups)-1]) > 0 {
			qs.partition = w.Groups[len(w.Groups)-1][0]
		}
		if !errors.Is(err, ErrWalkUnsupported) {
			return err
		}
	}
	return r.runWalk(qs, w, emit)
}
