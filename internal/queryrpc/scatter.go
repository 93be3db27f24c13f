package queryrpc

import (
	"bytes"
	"context"
	"slices"

	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/storage"
)

// IsScattered says whether every node holds a part of each partition of
// table, to be summed: the type index (schema.TypeHoursTable). Each node
// adds the counts of the events it stores, so with the events sharded
// by type each holds the types of its own shards for every hour; a slice
// asks every node and adds their counters row by row.
func IsScattered(table string) bool { return table == schema.TypeHoursTable }

// sliceEveryNode runs q on every node and merges the replies: rows of the
// same clustering key add their counter cells (other cells: the first
// node's), in clustering order, cut at q.Limit. Asking each node for the
// first q.Limit rows is enough: the first Limit keys of the union are
// among each node's first Limit keys. A node that does not answer is
// missed (its shards, under TrackMisses) or fails the slice.
func (c *Client) sliceEveryNode(ctx context.Context, q storage.SliceQuery) (storage.Rows, error) {
	var rows []storage.Row
	var stats storage.ReadStats
	for _, node := range c.Nodes() {
		r := &remoteRows{c: c, ctx: ctx, q: q, node: node, idx: -1}
		if err := r.fetch(); err != nil {
			return nil, err
		}
		for r.Next() {
			row := r.Row()
			i, found := slices.BinarySearchFunc(rows, row.Clustering, func(have storage.Row, key []byte) int {
				if q.Reverse {
					return bytes.Compare(key, have.Clustering)
				}
				return bytes.Compare(have.Clustering, key)
			})
			if !found {
				rows = slices.Insert(rows, i, storage.Row{Clustering: row.Clustering, Cells: slices.Clone(row.Cells)})
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
		if err := r.Close(); err != nil {
			return nil, err
		}
		st := r.Stats()
		for i, v := range statsValues(&stats) {
			*v += *statsValues(&st)[i]
		}
	}
	if q.Limit > 0 && len(rows) > q.Limit {
		rows = rows[:q.Limit]
	}
	stats.Rows = len(rows)
	return &mergedRows{rows: rows, idx: -1, stats: stats}, nil
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
