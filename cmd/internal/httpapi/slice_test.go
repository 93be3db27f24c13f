package httpapi

import (
	"strings"
	"testing"
	"time"

	"github.com/eventide/eventide/reader"
)

type sliceBody struct {
	Table     string `json:"table"`
	Partition string `json:"partition"`
	Rows      []struct {
		Clustering map[string]string `json:"clustering"`
		Cells      []struct {
			Column    string `json:"column"`
			Value     string `json:"value"`
			WriteTime string `json:"write_time"`
			Expires   string `json:"expires"`
		} `json:"cells"`
	} `json:"rows"`
	NextPage  string         `json:"next_page"`
	Trace     map[string]any `json:"trace"`
	Freshness *freshnessBody `json:"freshness"`
}

func (b sliceBody) keys(col string) string {
	var out []string
	for _, r := range b.Rows {
		out = append(out, r.Clustering[col])
	}
	return strings.Join(out, " ")
}

// TestSlice: raw slices of the events, counts and fan-out tables, in both
// orders, bounded by value, paged, with the trace as numbers.
func TestSlice(t *testing.T) {
	f := newFixture(t, reader.Options{})
	seedTimelines(t, f.db)
	id := func(i int) string { return eventID(t, base.Add(time.Duration(i)*time.Minute), i).String() }
	var got sliceBody
	// Events are stored newest first: the clustering order.
	get(t, f, "/v1/slice?table=events&partition=22112610%7Cclick&limit=3&trace=1", 200, "application/json", &got)
	if got.keys("event_id") != id(9)+" "+id(8)+" "+id(7) || got.NextPage == "" || got.Trace == nil || got.Trace["rows"].(float64) < 3 {
		t.Fatalf("events, first page: %s (next %q, trace %v)", got.keys("event_id"), got.NextPage, got.Trace)
	}
	if c := got.Rows[0].Cells; len(c) != 1 || c[0].Column != "data" || c[0].Value != "0x"+hexOf(`{"n":9}`) || c[0].WriteTime == "" {
		t.Errorf("event 9's cells: %+v", c)
	}
	get(t, f, "/v1/slice?table=events&partition=22112610%7Cclick&limit=3&page="+got.NextPage, 200, "application/json", &got)
	if got.keys("event_id") != id(6)+" "+id(5)+" "+id(4) || got.Trace != nil {
		t.Errorf("events, second page: %s, trace %v", got.keys("event_id"), got.Trace)
	}
	// start inclusive, end exclusive, by value, whatever the column order.
	get(t, f, "/v1/slice?table=events&partition=22112610%7Cclick&start="+id(2)+"&end="+id(5), 200, "application/json", &got)
	if got.keys("event_id") != id(4)+" "+id(3)+" "+id(2) {
		t.Errorf("events [2, 5): %s", got.keys("event_id"))
	}
	get(t, f, "/v1/slice?table=events&partition=22112610%7Cclick&start="+id(2)+"&end="+id(5)+"&order=desc", 200, "application/json", &got)
	if got.keys("event_id") != id(2)+" "+id(3)+" "+id(4) {
		t.Errorf("events [2, 5) reversed: %s", got.keys("event_id"))
	}
	get(t, f, "/v1/slice?table=event_counts&partition=22112610%7Cclick&start=2026-11-22T10:02:00Z&end=2026-11-22T10:04:00Z", 200, "application/json", &got)
	if got.keys("minute") != "2026-11-22T10:02:00Z 2026-11-22T10:03:00Z" || got.Rows[0].Cells[0].Value != "1" {
		t.Errorf("counts [10:02, 10:04): %s %+v", got.keys("minute"), got.Rows)
	}
	get(t, f, "/v1/slice?table=following&partition=gmason", 200, "application/json", &got)
	if got.keys("name") != "'gwashington' 'phenry'" {
		t.Errorf("following gmason: %s", got.keys("name"))
	}
	get(t, f, "/v1/slice?table=events&partition=21112610%7Cclick", 200, "application/json", &got)
	if len(got.Rows) != 0 || got.NextPage != "" {
		t.Errorf("an empty partition: %+v", got)
	}
	var p problemBody
	for _, bad := range []string{
		"/v1/slice",
		"/v1/slice?table=events",
		"/v1/slice?table=_checkpoints&partition=x",
		"/v1/slice?table=events&partition=click",
		"/v1/slice?table=event_counts&partition=22112610%7Cclick%7C2",
		"/v1/slice?table=events&partition=22112610%7Cclick&start=yesterday",
		"/v1/slice?table=following&partition=gmason&start=gm",
		"/v1/slice?table=events&partition=22112610%7Cclick&order=up",
		"/v1/slice?table=events&partition=22112610%7Cclick&page=nonsense",
		"/v1/slice?table=events&partition=22112610%7Cclick&limit=10001",
		"/v1/slice?table=events&partition=22112610%7Cclick&colour=red",
	} {
		get(t, f, bad, 400, "application/problem+json", &p)
		if p.Detail == "" {
			t.Errorf("%s: no detail", bad)
		}
	}
	// A page token of another partition is refused.
	get(t, f, "/v1/slice?table=events&partition=22112610%7Cclick&limit=1", 200, "application/json", &got)
	get(t, f, "/v1/slice?table=events&partition=22112611%7Cclick&page="+got.NextPage, 400, "application/problem+json", &p)
}

func hexOf(s string) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(s))
	for i := range len(s) {
		out = append(out, digits[s[i]>>4], digits[s[i]&15])
	}
	return string(out)
}
