package reader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
	"github.com/google/uuid"
)

// SliceQuery reads rows of one partition of a schema table, as CQL's
//
//	SELECT * FROM table WHERE pk = ... AND c1 = ... AND c2 >= ... AND c2 < ...
//	ORDER BY ... LIMIT n
//
// Equalities restrict a prefix of the clustering columns; Lower and Upper
// restrict the next clustering column by value (whatever its clustering
// order).
type SliceQuery struct {
	Table string
	// Partition holds the partition key values, in partition key order.
	Partition []any
	// Equal holds values for the first len(Equal) clustering columns.
	Equal []any
	// Lower and Upper bound the value of clustering column len(Equal);
	// nil means unbounded.
	Lower, Upper *ValueBound
	// Reverse returns rows in the reverse of the clustering order (CQL's
	// ORDER BY opposite to CLUSTERING ORDER BY).
	Reverse bool
	// Limit is the page size: 0 means DefaultLimit, at most MaxLimit.
	Limit     int
	PageToken string
	Trace     bool
}

// ValueBound is one end of a range on a clustering column's value.
type ValueBound struct {
	Value     any
	Inclusive bool
}

// SlicePage is one page of a slice.
type SlicePage struct {
	Rows     []schema.Row
	NextPage string
	Trace    *Trace
}

// Slice runs a slice query against a schema table of Options.Catalog.
func (r *Reader) Slice(ctx context.Context, q SliceQuery) (page *SlicePage, err error) {
	start := time.Now()
	defer func() { r.metrics.observe("slice", start, err) }()
	if r.opts.Catalog == nil {
		return nil, fmt.Errorf("%w: table %q: this reader has no schema catalog", ErrInvalidQuery, q.Table)
	}
	t, err := r.opts.Catalog.Table(q.Table)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidQuery, err)
	}
	limit, err := checkLimit(q.Limit)
	if err != nil {
		return nil, err
	}
	partition, err := t.EncodePartition(q.Partition...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidQuery, err)
	}
	q.Lower = r.clampToTTL(t, q)
	lo, hi, err := clusteringRange(t, q)
	if errors.Is(err, errEmptyRange) {
		return &SlicePage{Trace: &Trace{}}, nil
	}
	if err != nil {
		return nil, err
	}
	fp := fingerprint("slice", t.Name, string(partition), fmt.Sprint(q.Reverse))
	if q.PageToken != "" {
		last, err := decodeToken(q.PageToken, tokenKindSlice, fp)
		if err != nil {
			return nil, err
		}
		if _, err := t.Clustering.Decode(last); err != nil {
			return nil, fmt.Errorf("%w: page token %.40q does not hold a key of table %s; pass the next_page value of the previous page unchanged", ErrInvalidQuery, q.PageToken, t.Name)
		}
		if q.Reverse {
			hi = storage.Bound{Key: last, Inclusive: false}
		} else {
			lo = storage.Bound{Key: last, Inclusive: false}
		}
	}
	qs := &queryState{ctx: ctx}
	page = &SlicePage{}
	var lastKey []byte
	more := false
	var decodeErr error
	scan := partitionScan{r: r, query: qs, table: t.Name, partitions: [][]byte{partition},
		start: lo, end: hi, reverse: q.Reverse, limit: limit + 1}
	err = scan.run(func(_ []byte, row *storage.Row) bool {
		if len(page.Rows) == limit {
			more = true
			return false
		}
		decoded, err := catalog.DecodeRow(t, row)
		if err != nil {
			decodeErr = err
			return false
		}
		page.Rows = append(page.Rows, decoded)
		lastKey = append(lastKey[:0], row.Clustering...)
		return true
	})
	if err == nil {
		err = decodeErr
	}
	if err != nil {
		if errors.Is(err, storage.ErrTooManyTombstones) {
			return nil, fmt.Errorf("%w (bound the clustering range of the query, or page with a smaller limit)", err)
		}
		return nil, err
	}
	if more {
		page.NextPage = encodeToken(tokenKindSlice, fp, lastKey)
	}
	r.finishQuery(qs, "slice", t.Name)
	if q.Trace {
		page.Trace = &qs.trace
	}
	return page, nil
}

// clampToTTL returns the lower bound of a slice of a table with a default
// TTL whose first clustering column is a time (timeuuid or timestamp):
// rows older than now - TTL were written more than TTL ago, so their cells
// have expired and the slice need not walk them. Other queries keep their
// bound.
func (r *Reader) clampToTTL(t *schema.Table, q SliceQuery) *ValueBound {
	if t.DefaultTTLSeconds <= 0 || len(q.Equal) > 0 || len(t.Clustering) == 0 {
		return q.Lower
	}
	floor := r.opts.Now().Add(-time.Duration(t.DefaultTTLSeconds) * time.Second)
	switch t.Clustering[0].Type {
	case bucket.TypeTimeUUID:
		u, err := bucket.MinTimeUUID(floor)
		if err != nil {
			return q.Lower
		}
		if q.Lower != nil {
			if cur, ok := q.Lower.Value.(uuid.UUID); !ok || bucket.CompareTimeUUID(cur, u) >= 0 {
				return q.Lower
			}
		}
		return &ValueBound{Value: u, Inclusive: true}
	case bucket.TypeTimestamp:
		floor = floor.Truncate(time.Millisecond)
		if q.Lower != nil {
			if cur, ok := q.Lower.Value.(time.Time); !ok || !cur.Before(floor) {
				return q.Lower
			}
		}
		return &ValueBound{Value: floor, Inclusive: true}
	}
	return q.Lower
}

// errEmptyRange says no key can satisfy the bounds: every key after the
// bound's would need to start with more than 0xff bytes.
var errEmptyRange = errors.New("empty range")

// clusteringRange turns the equalities and value bounds of q into a range
// of encoded clustering keys. A DESC column stores larger values first, so
// a lower value bound becomes an upper key bound.
func clusteringRange(t *schema.Table, q SliceQuery) (lo, hi storage.Bound, err error) {
	n := len(q.Equal)
	if n > len(t.Clustering) {
		return lo, hi, fmt.Errorf("%w: table %s has %d clustering columns, the query restricts %d", ErrInvalidQuery, t.Name, len(t.Clustering), n)
	}
	if (q.Lower != nil || q.Upper != nil) && n == len(t.Clustering) {
		return lo, hi, fmt.Errorf("%w: table %s: a range needs a clustering column after the %d restricted by equality", ErrInvalidQuery, t.Name, n)
	}
	prefix, err := t.Clustering.EncodePrefix(nil, q.Equal...)
	if err != nil {
		return lo, hi, fmt.Errorf("%w: table %s: %w", ErrInvalidQuery, t.Name, err)
	}
	if len(prefix) > 0 {
		lo = storage.Bound{Key: prefix, Inclusive: true}
	}
	if end := bucket.PrefixEnd(prefix); end != nil {
		hi = storage.Bound{Key: end, Inclusive: false}
	}
	encode := func(b *ValueBound) ([]byte, error) {
		vals := append(append([]any(nil), q.Equal...), b.Value)
		k, err := t.Clustering.EncodePrefix(nil, vals...)
		if err != nil {
			return nil, fmt.Errorf("%w: table %s bound: %w", ErrInvalidQuery, t.Name, err)
		}
		return k, nil
	}
	desc := n < len(t.Clustering) && t.Clustering[n].Order == bucket.Desc
	// atLeast(k): keys whose column value is >= (ASC) the bound value.
	keyFrom := func(k []byte) storage.Bound { return storage.Bound{Key: k, Inclusive: true} }
	keyBefore := func(k []byte) storage.Bound {
		if k == nil {
			return storage.Bound{}
		}
		return storage.Bound{Key: k, Inclusive: false}
	}
	if q.Lower != nil {
		k, err := encode(q.Lower)
		if err != nil {
			return lo, hi, err
		}
		switch {
		case !desc && q.Lower.Inclusive:
			lo = keyFrom(k)
		case !desc:
			if bucket.PrefixEnd(k) == nil {
				return lo, hi, errEmptyRange
			}
			lo = keyFrom(bucket.PrefixEnd(k))
		case q.Lower.Inclusive:
			hi = keyBefore(bucket.PrefixEnd(k))
		default:
			hi = keyBefore(k)
		}
	}
	if q.Upper != nil {
		k, err := encode(q.Upper)
		if err != nil {
			return lo, hi, err
		}
		switch {
		case !desc && q.Upper.Inclusive:
			hi = keyBefore(bucket.PrefixEnd(k))
		case !desc:
			hi = keyBefore(k)
		case q.Upper.Inclusive:
			lo = keyFrom(k)
		default:
			if bucket.PrefixEnd(k) == nil {
				return lo, hi, errEmptyRange
			}
			lo = keyFrom(bucket.PrefixEnd(k))
		}
	}
	return lo, hi, nil
}
