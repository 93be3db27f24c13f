package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/eventide/eventide/reader"
)

var sliceParams = []string{"table", "partition", "start", "end", "limit", "order", "page", "trace", "timeout", "complete"}

type sliceCellJSON struct {
	Column    string `json:"column"`
	Value     string `json:"value"`
	WriteTime string `json:"write_time"`
	Expires   string `json:"expires,omitempty"`
}

type sliceRowJSON struct {
	Clustering map[string]string `json:"clustering"`
	Cells      []sliceCellJSON   `json:"cells"`
}

// traceJSON is a read trace as numbers, with its one-line text.
type traceJSON struct {
	Text                   string `json:"text"`
	LiveCells              int    `json:"live_cells"`
	Tombstones             int    `json:"tombstones"`
	SSTables               int    `json:"sstables"`
	SSTablesSkipped        int    `json:"sstables_skipped"`
	SSTablesSkippedByBloom int    `json:"sstables_skipped_by_bloom"`
	SSTablesSkippedExpired int    `json:"sstables_skipped_expired"`
	Blocks                 int    `json:"blocks"`
	BlocksSkipped          int    `json:"blocks_skipped"`
	Memtables              int    `json:"memtables"`
	Partitions             int    `json:"partitions"`
	Rows                   int    `json:"rows"`
}

type sliceResponse struct {
	Table     string         `json:"table"`
	Partition string         `json:"partition"`
	Rows      []sliceRowJSON `json:"rows"`
	NextPage  string         `json:"next_page,omitempty"`
	Trace     *traceJSON     `json:"trace,omitempty"`
	Freshness *freshnessJSON `json:"freshness,omitempty"`
}

// slice answers /v1/slice: a raw slice of one partition.
func (a *api) slice(w http.ResponseWriter, r *http.Request) {
	p, pr := parseParams(r.URL.RawQuery, sliceParams)
	if pr != nil {
		writeProblem(w, *pr)
		return
	}
	q := reader.RawSliceQuery{Table: p.get("table"), Partition: p.get("partition"), Start: p.get("start"), End: p.get("end"), PageToken: p.get("page")}
	if q.Table == "" || q.Partition == "" {
		writeProblem(w, badParameter("parameters table and partition are required, e.g. table=events&partition=22112610|click (the hour bucket ddmmyyhh and the type)"))
		return
	}
	if q.Limit, pr = p.intParam("limit", reader.DefaultLimit, 1, reader.MaxLimit); pr != nil {
		writeProblem(w, *pr)
		return
	}
	switch strings.ToLower(p.get("order")) {
	case "", "asc":
	case "desc":
		q.Reverse = true
	default:
		writeProblem(w, badParameter(fmt.Sprintf("parameter order: %q is not asc or desc", p.get("order"))))
		return
	}
	trace, pr := p.boolParam("trace")
	if pr != nil {
		writeProblem(w, *pr)
		return
	}
	fresh := a.freshMemo.of(a.freshness)
	page, err := a.reader.RawSlice(r.Context(), q)
	if err != nil {
		a.queryFailed(w, r, err)
		return
	}
	resp := sliceResponse{Table: q.Table, Partition: q.Partition, Rows: make([]sliceRowJSON, 0, len(page.Rows)), NextPage: page.NextPage, Freshness: fresh}
	for _, row := range page.Rows {
		j := sliceRowJSON{Clustering: make(map[string]string, len(row.Clustering)), Cells: make([]sliceCellJSON, 0, len(row.Cells))}
		for _, v := range row.Clustering {
			j.Clustering[v.Name] = v.Value
		}
		for _, c := range row.Cells {
			cj := sliceCellJSON{Column: c.Column, Value: c.Value, WriteTime: c.WriteTime.Format(time.RFC3339Nano)}
			if !c.Expires.IsZero() {
				cj.Expires = c.Expires.Format(time.RFC3339Nano)
			}
			j.Cells = append(j.Cells, cj)
		}
		resp.Rows = append(resp.Rows, j)
	}
	if trace && page.Trace != nil {
		t := page.Trace
		resp.Trace = &traceJSON{Text: t.String(), LiveCells: t.LiveCells, Tombstones: t.Tombstones, SSTables: t.SSTables,
			SSTablesSkipped: t.SSTablesSkipped, SSTablesSkippedByBloom: t.SSTablesSkippedByBloom, SSTablesSkippedExpired: t.SSTablesSkippedExpired,
			Blocks: t.Blocks, BlocksSkipped: t.BlocksSkipped, Memtables: t.Memtables, Partitions: t.Partitions, Rows: t.Rows}
	}
	a.writeJSON(w, r, resp)
}
