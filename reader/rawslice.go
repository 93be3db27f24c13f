package reader

import (
	"encoding/hex"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"context"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

// RawSliceQuery reads one partition of a built-in or fan-out table as the
// engine holds it, for looking at what queries read: the partition in its
// text form, a value range on the first clustering column as CQL
// literals.
type RawSliceQuery struct {
	// Table is one of RawSliceTables.
	Table string
	// Partition is the partition key's text form: "ddmmyyhh|type" (or
	// "ddmmyyhh|type|n") for events and event_counts, a user name for
	// the fan-out tables.
	Partition string
	// Start (inclusive) and End (exclusive) bound the first clustering
	// column's value, as literals of its type (schema.ParseLiteral); empty
	// means unbounded.
	Start, End string
	// Reverse walks the partition against its clustering order.
	Reverse bool
	// Limit is the page size: 0 means DefaultLimit, at most MaxLimit.
	Limit     int
	PageToken string
}

// RawSliceTables are the tables RawSlice reads, with their clustering
// layouts.
var RawSliceTables = map[string]bucket.ClusteringLayout{
	schema.EventsTable:    schema.EventsClustering,
	schema.CountsTable:    schema.CountsClustering,
	schema.FollowersTable: catalog.NameClustering,
	schema.FollowingTable: catalog.NameClustering,
	schema.UserlineTable:  catalog.PostClustering,
	schema.TimelineTable:  catalog.PostClustering,
}

// RawRow is one row as the engine holds it.
type RawRow struct {
	// Clustering holds the clustering values as literals, in layout order.
	Clustering []RawValue
	Cells      []RawCell
}

// RawValue is a named value as a literal.
type RawValue struct {
	Name, Value string
}

// RawCell is one live cell.
type RawCell struct {
	// Column is the column name; empty for a row marker.
	Column string
	// Value is the value as a literal; a counter's sum for a counter.
	Value     string
	WriteTime time.Time
	// Expires is when the cell expires; zero if never.
	Expires time.Time
}

// RawSlicePage is one page of a raw slice; its Trace is always set.
type RawSlicePage struct {
	Rows     []RawRow
	NextPage string
	Trace    *Trace
}

// RawSlice runs a raw slice. Every client mistake wraps ErrInvalidQuery.
func (r *Reader) RawSlice(ctx context.Context, q RawSliceQuery) (page *RawSlicePage, err error) {
	start := time.Now()
	defer func() { r.metrics.observe("raw_slice", start, err) }()
	layout, ok := RawSliceTables[q.Table]
	if !ok {
		return nil, fmt.Errorf("%w: table %.64q cannot be sliced; use events, event_counts, followers, following, userline or timeline", ErrInvalidQuery, q.Table)
	}
	partition, err := rawPartition(q.Table, q.Partition)
	if err != nil {
		return nil, err
	}
	limit, err := checkLimit(q.Limit)
	if err != nil {
		return nil, err
	}
	lo, hi, err := rawBounds(layout, q.Start, q.End)
	if errors.Is(err, errEmptyRange) {
		return &RawSlicePage{Trace: &Trace{}}, nil
	}
	if err != nil {
		return nil, err
	}
	fp := fingerprint("raw", q.Table, string(partition), fmt.Sprint(q.Reverse))
	if q.PageToken != "" {
		last, err := decodeToken(q.PageToken, tokenKindSlice, fp)
		if err != nil {
			return nil, err
		}
		if _, err := layout.Decode(last); err != nil {
			return nil, fmt.Errorf("%w: page token %.40q does not hold a key of table %s; pass the next_page value of the previous page unchanged", ErrInvalidQuery, q.PageToken, q.Table)
		}
		if q.Reverse {
			hi = storage.Bound{Key: last, Inclusive: false}
		} else {
			lo = storage.Bound{Key: last, Inclusive: false}
		}
	}
	qs := &queryState{ctx: ctx}
	page = &RawSlicePage{}
	var lastKey []byte
	more := false
	var decodeErr error
	scan := partitionScan{r: r, query: qs, table: q.Table, partitions: [][]byte{partition},
		start: lo, end: hi, reverse: q.Reverse, limit: limit + 1}
	err = scan.run(func(_ []byte, row *storage.Row) bool {
		if len(page.Rows) == limit {
			more = true
			return false
		}
		vals, err := layout.Decode(row.Clustering)
		if err != nil {
			decodeErr = fmt.Errorf("table %s partition %q: %w", q.Table, partition, err)
			return false
		}
		rr := RawRow{Clustering: make([]RawValue, len(vals)), Cells: make([]RawCell, 0, len(row.Cells))}
		for i, v := range vals {
			rr.Clustering[i] = RawValue{Name: layout[i].Name, Value: schema.FormatValue(v)}
		}
		for _, c := range row.Cells {
			rc := RawCell{Column: string(c.Column), WriteTime: time.UnixMicro(c.WriteTimeMicros).UTC()}
			if c.ExpiresAt != 0 {
				rc.Expires = time.Unix(c.ExpiresAt, 0).UTC()
			}
			switch v, err := schema.DecodeValue(c.Value); {
			case c.Counter:
				rc.Value = fmt.Sprint(c.CounterValue)
			case len(c.Value) == 0:
				rc.Value = ""
			case err == nil:
				rc.Value = schema.FormatValue(v)
			default:
				rc.Value = "0x" + hex.EncodeToString(c.Value)
			}
			rr.Cells = append(rr.Cells, rc)
		}
		page.Rows = append(page.Rows, rr)
		lastKey = append(lastKey[:0], row.Clustering...)
		return true
	})
	if err == nil {
		err = decodeErr
	}
	if err != nil {
		return nil, err
	}
	if more {
		page.NextPage = encodeToken(tokenKindSlice, fp, lastKey)
	}
	r.finishQuery(qs, "raw_slice", q.Table)
	page.Trace = &qs.trace
	return page, nil
}

// rawPartition checks and encodes a partition's text form.
func rawPartition(table, text string) ([]byte, error) {
	switch table {
	case schema.EventsTable, schema.CountsTable:
		pk, err := bucket.ParsePartitionKey(text)
		if err != nil {
			return nil, fmt.Errorf("%w: partition %.80q of table %s: %w; write it as ddmmyyhh|type, e.g. 22112610|click", ErrInvalidQuery, text, table, err)
		}
		if _, sub := pk.SubPartition(); sub && table == schema.CountsTable {
			return nil, fmt.Errorf("%w: partition %.80q: event_counts partitions have no sub-partition; write ddmmyyhh|type", ErrInvalidQuery, text)
		}
		return []byte(pk.String()), nil
	}
	if text == "" || len(text) > 4096 || !utf8.ValidString(text) {
		return nil, fmt.Errorf("%w: partition of table %s: %.80q is not a user name (valid UTF-8, 1 to 4096 bytes)", ErrInvalidQuery, table, text)
	}
	return []byte(text), nil
}

// rawBounds maps a value range [start, end) of the first clustering
// column to key bounds, whatever the column's order.
func rawBounds(layout bucket.ClusteringLayout, start, end string) (lo, hi storage.Bound, err error) {
	col := layout[0]
	key := func(what, lit string) ([]byte, error) {
		v, err := schema.ParseLiteral(col.Type, lit)
		if err != nil {
			return nil, fmt.Errorf("%w: parameter %s: %w", ErrInvalidQuery, what, err)
		}
		k, err := layout.EncodePrefix(nil, v)
		if err != nil {
			return nil, fmt.Errorf("%w: parameter %s: %w", ErrInvalidQuery, what, err)
		}
		return k, nil
	}
	desc := col.Order == bucket.Desc
	if start != "" {
		k, err := key("start", start)
		if err != nil {
			return lo, hi, err
		}
		if desc {
			// The rows of value start are the last ones it may have.
			if end := bucket.PrefixEnd(k); end != nil {
				hi = storage.Bound{Key: end}
			}
		} else {
			lo = storage.Bound{Key: k, Inclusive: true}
		}
	}
	if end != "" {
		k, err := key("end", end)
		if err != nil {
			return lo, hi, err
		}
		if desc {
			after := bucket.PrefixEnd(k)
			if after == nil {
				return lo, hi, errEmptyRange
			}
			lo = storage.Bound{Key: after, Inclusive: true}
		} else {
			hi = storage.Bound{Key: k}
		}
	}
	return lo, hi, nil
}
