package queryrpc

import (
	"bytes"
	"context"
	"slices"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/storage"
)

// IsScattered says whether every node holds a part of each partition of
// table, to be merged: the type index (schema.TypeHoursTable). Each node
// counts the events it stores, so with the events sharded by type each
// holds the types of its own shards for every hour; a slice asks every
// node and takes each type's row from the node that owns the type's
// shard now. A node keeps the rows of a shard it no longer owns (a shard
// moved away: its new owner rebuilt them from the stream or a snapshot),
// so rows from other nodes are stale copies, not parts to add.
func IsScattered(table string) bool { return table == schema.TypeHoursTable }

// sliceEveryNode runs q on every node and merges the replies, in
// clustering order, cut at q.Limit: each node's rows of the types its
// shards hold (ownsRow), rows of the same clustering key adding their
// counter cells (other cells: the first node's). Asking each node for
// the first q.Limit rows is enough when it owns all of them: the first
// Limit keys of the union are among each node's first Limit owned keys;
// a node whose first Limit rows included others' is asked again without
// a limit. A node that does not answer is missed (its shards, under
// TrackMisses) or fails the slice.
func (c *Client) sliceEveryNode(ctx context.Context, q storage.SliceQuery) (storage.Rows, error) {
	var rows []storage.Row
	var stats storage.ReadStats
	owners := c.Owners()
	for _, node := range c.Nodes() {
		nodeRows, st, err := c.sliceOwnedRows(ctx, q, node, owners)
		if err != nil {
			return nil, err
		}
		for i, v := range statsValues(&stats) {
			*v += *statsValues(&st)[i]
		}
		for k := range nodeRows {
			row := &nodeRows[k]
			i, found := slices.BinarySearchFunc(rows, row.Clustering, func(have storage.Row, key []byte) int {
				if q.Reverse {
					return bytes.Compare(key, have.Clustering)
				}
				return bytes.Compare(have.Clustering, key)
			})
			if !found {
				rows = slices.Insert(rows, i, *row)
				continue
			}
			for _, cell := range row.Cells {
				j := slices.IndexFunc(rows[i].Cells, func(have storage.Cell) bool { return bytes.Equal(have.Column, cell.Column) })
				switch {
				case j < 0:
					rows[i].Cells = append(rows[i].Cells, cell)
				case cell.Counter && rows[i].Cells[j].Counter:
					rows[i].Cells[j].CounterValue += cell.CounterValue
					rows[i].Cells[j].WriteTimeMicros = max(rows[i].Cells[j].WriteTimeMicros, cell.WriteTimeMicros)
				}
			}
		}
	}
	if q.Limit > 0 && len(rows) > q.Limit {
		rows = rows[:q.Limit]
	}
	stats.Rows = len(rows)
	return &mergedRows{rows: rows, idx: -1, stats: stats}, nil
}

// sliceOwnedRows runs q on node and returns the rows of the types node
// owns in owners (cloned), in the order the node sent them, and what the
// reads touched. When the node's first q.Limit rows held rows of types
// it does not own, owned rows may follow them: it asks again without a
// limit (a type index partition holds one row per type of its hour).
func (c *Client) sliceOwnedRows(ctx context.Context, q storage.SliceQuery, node string, owners []string) ([]storage.Row, storage.ReadStats, error) {
	var out []storage.Row
	var stats storage.ReadStats
	for {
		out = out[:0]
		r := &remoteRows{c: c, ctx: ctx, q: q, node: node, idx: -1}
		if err := r.fetch(); err != nil {
			return nil, stats, err
		}
		seen, skipped := 0, 0
		for r.Next() {
			row := r.Row()
			seen++
			if !c.ownsRow(node, owners, row) {
				skipped++
				continue
			}
			out = append(out, storage.Row{Clustering: slices.Clone(row.Clustering), Cells: slices.Clone(row.Cells)})
		}
		if err := r.Close(); err != nil {
			return nil, stats, err
		}
		st := r.Stats()
		for i, v := range statsValues(&stats) {
			*v += *statsValues(&st)[i]
		}
		if skipped == 0 || q.Limit == 0 || seen < q.Limit {
			return out, stats, nil
		}
		q.Limit = 0
	}
}

// ownsRow says whether row of the type index is node's to report: the
// shard of the row's event type is node's in owners. A row whose key does
// not decode is kept, for the reader to report.
func (c *Client) ownsRow(node string, owners []string, row *storage.Row) bool {
	vals, err := schema.TypeHoursClustering.Decode(row.Clustering)
	if err != nil || len(owners) == 0 {
		return true
	}
	typ, ok := vals[0].(string)
	if !ok {
		return true
	}
	return owners[bucket.EventShard(c.cfg.EventSubjectPrefix, typ, len(owners))] == node
}

// mergedRows is storage.Rows over rows already merged in memory.
type mergedRows struct {
	rows  []storage.Row
	idx   int
	stats storage.ReadStats
}

func (m *mergedRows) Next() bool {
	if m.idx+1 >= len(m.rows) {
		m.idx = len(m.rows)
		return false
	}
	m.idx++
	return true
}

func (m *mergedRows) Row() *storage.Row        { return &m.rows[m.idx] }
func (m *mergedRows) Err() error               { return nil }
func (m *mergedRows) Stats() storage.ReadStats { return m.stats }
func (m *mergedRows) Close() error             { m.rows = nil; return nil }
