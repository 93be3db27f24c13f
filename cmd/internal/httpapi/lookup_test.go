package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/reader"
	"github.com/eventide/eventide/storage"
)

// addEvents stores n events of typ, one a minute from at, counted as the
// writer counts them (catalog.AddCount, which also fills the type index).
func addEvents(t *testing.T, db *storage.DB, typ string, at time.Time, n, sub int) []string {
	t.Helper()
	var b storage.Batch
	var ids []string
	for i := range n {
		when := at.Add(time.Duration(i) * time.Minute)
		e := schema.Event{ID: eventID(t, when, 100+i), Type: typ, Data: fmt.Appendf(nil, `{"%s":%d}`, typ, i)}
		if err := catalog.PutEvent(&b, &e, sub, 0, db.NowMicros()); err != nil {
			t.Fatal(err)
		}
		if err := catalog.AddCount(&b, typ, when, 1); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID.String())
	}
	if err := db.Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestEventByID: an event is found by its id alone (the type index of its
// hour names the types to try, the type's sub-partition count its
// partition), or with its type; a missing one is 404, a bad id 400.
func TestEventByID(t *testing.T) {
	types, err := schema.ParseEventTypes("view:sub=4")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureWith(t, reader.Options{Types: types}, func(c *Config) { c.Freshness = fixedFreshness })
	views := addEvents(t, f.db, "view", base.Add(30*time.Second), 5, 4)
	click := eventID(t, base.Add(3*time.Minute), 3).String()

	var got struct {
		Event struct {
			ID   string         `json:"id"`
			Type string         `json:"type"`
			Time string         `json:"time"`
			User string         `json:"user"`
			Data map[string]int `json:"data"`
		} `json:"event"`
		Trace     string         `json:"trace"`
		Freshness *freshnessBody `json:"freshness"`
	}
	get(t, f, "/v1/events/"+click, 200, "application/json", &got)
	if got.Event.ID != click || got.Event.Type != "click" || got.Event.Data["n"] != 3 || got.Freshness == nil || got.Trace != "" {
		t.Fatalf("GET click %s: %+v", click, got)
	}
	get(t, f, "/v1/events/"+views[2]+"?type=view&trace=1", 200, "application/json", &got)
	if got.Event.ID != views[2] || got.Event.Type != "view" || got.Event.Data["view"] != 2 || got.Trace == "" {
		t.Fatalf("GET view %s with its type: %+v", views[2], got)
	}
	get(t, f, "/v1/events/"+views[4], 200, "application/json", &got)
	if got.Event.ID != views[4] || got.Event.Type != "view" {
		t.Fatalf("GET view %s without its type: %+v", views[4], got)
	}

	var p problemBody
	// The right hour, no such event; and a type that is not the event's.
	missing := eventID(t, base.Add(3*time.Minute), 99).String()
	get(t, f, "/v1/events/"+missing, 404, "application/problem+json", &p)
	if !strings.Contains(p.Detail, missing) {
		t.Errorf("404 detail %q does not name the id", p.Detail)
	}
	get(t, f, "/v1/events/"+click+"?type=view", 404, "application/problem+json", &p)
	// An hour with no events at all.
	get(t, f, "/v1/events/"+eventID(t, base.Add(-48*time.Hour), 1).String(), 404, "application/problem+json", &p)
	for _, bad := range []string{"nonsense", "6ba7b810-9dad-41d1-80b4-00c04fd430c8" /* version 4 */, strings.ToUpper(click) + "0"} {
		get(t, f, "/v1/events/"+bad, 400, "application/problem+json", &p)
		if p.Type != ProblemInvalidParameter || !strings.Contains(p.Detail, "version 1") {
			t.Errorf("GET %s: %+v, want invalid-parameter naming version 1 UUIDs", bad, p)
		}
	}
	get(t, f, "/v1/events/"+click+"?type=Bad", 400, "application/problem+json", &p)
	get(t, f, "/v1/events/"+click+"?limit=1", 400, "application/problem+json", &p)
	if p.Type != ProblemUnknownParameter {
		t.Errorf("unknown parameter: %+v", p)
	}
	get(t, f, "/v1/events/"+click+"?type=click&type=click", 400, "application/problem+json", &p)
}

// TestCountsSeveralTypes: type repeated gives one series per type, in the
// order asked, with the same points; one type keeps "points"; the points
// limit is over all series.
func TestCountsSeveralTypes(t *testing.T) {
	f := newFixture(t, reader.Options{})
	addEvents(t, f.db, "view", base.Add(5*time.Minute), 3, 0)
	from, to := base.Format(time.RFC3339), base.Add(10*time.Minute).Format(time.RFC3339)
	var got countsBody
	get(t, f, "/v1/counts?type=view&type=click&step=5m&trace=1&from="+from+"&to="+to, 200, "application/json", &got)
	if got.Points != nil || len(got.Series) != 2 || got.Trace == "" {
		t.Fatalf("two types: %+v, want two series, no points, a trace", got)
	}
	if s := got.Series[0]; s.Type != "view" || len(s.Points) != 2 || s.Points[0].Count != 0 || s.Points[1].Count != 3 {
		t.Errorf("series 0: %+v, want view 0, 3", s)
	}
	if s := got.Series[1]; s.Type != "click" || len(s.Points) != 2 || s.Points[0].Count != 5 || s.Points[1].Count != 5 {
		t.Errorf("series 1: %+v, want click 5, 5", s)
	}
	get(t, f, "/v1/counts?type=click&step=5m&from="+from+"&to="+to, 200, "application/json", &got)
	if len(got.Points) != 2 || len(got.Series) != 1 || got.Series[0].Type != "click" || len(got.Series[0].Points) != 2 {
		t.Errorf("one type: %+v, want points and one series", got)
	}
	var p problemBody
	get(t, f, "/v1/counts?type=click&type=click", 400, "application/problem+json", &p)
	if !strings.Contains(p.Detail, "given twice") {
		t.Errorf("repeated type: %+v", p)
	}
	get(t, f, "/v1/counts?type=click&step=1m&step=2m", 400, "application/problem+json", &p)
	// 6000 minutes is within the limit for one type, not for two.
	week := "&from=2026-11-18T00:00:00Z&to=2026-11-22T04:00:00Z"
	get(t, f, "/v1/counts?type=click"+week, 200, "application/json", &got)
	get(t, f, "/v1/counts?type=click&type=view"+week, 400, "application/problem+json", &p)
	if p.Type != ProblemInvalidQuery || !strings.Contains(p.Detail, "for each of 2 types, 12000 in all, more than the limit of 11000") {
		t.Errorf("points of two types: %+v", p)
	}
	many := strings.Repeat("type=a&", MaxCountTypes+1)
	get(t, f, "/v1/counts?"+many, 400, "application/problem+json", &p)
}

type topBody struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Types []struct {
		Type  string `json:"type"`
		Count int64  `json:"count"`
	} `json:"types"`
	Trace     string         `json:"trace"`
	Freshness *freshnessBody `json:"freshness"`
}

func (b topBody) String() string {
	var parts []string
	for _, t := range b.Types {
		parts = append(parts, fmt.Sprintf("%s=%d", t.Type, t.Count))
	}
	return strings.Join(parts, " ")
}

// TestTopTypes: counts per type in the window, whole hours from the type
// index and partial hours minute by minute, descending, ties by name.
func TestTopTypes(t *testing.T) {
	f := newFixture(t, reader.Options{})                         // click: 10 events from base, one a minute
	addEvents(t, f.db, "view", base.Add(-50*time.Minute), 60, 0) // 09:10 .. 10:09
	addEvents(t, f.db, "buy", base.Add(5*time.Minute), 10, 0)    // 10:05 .. 10:14
	addEvents(t, f.db, "alpha", base.Add(2*time.Hour), 1, 0)     // outside the windows below
	for _, tt := range []struct{ query, want string }{
		{"from=2026-11-22T09:00:00Z&to=2026-11-22T11:00:00Z", "view=60 buy=10 click=10"},
		{"from=2026-11-22T09:00:00Z&to=2026-11-22T11:00:00Z&limit=2", "view=60 buy=10"},
		{"from=2026-11-22T10:00:00Z&to=2026-11-22T10:05:00Z", "click=5 view=5"},
		// Partial minutes count whole, as /v1/counts counts them.
		{"from=2026-11-22T10:04:30Z&to=2026-11-22T10:05:01Z", "click=2 view=2 buy=1"},
		{"from=2026-11-22T09:30:00Z&to=2026-11-22T09:31:00Z", "view=1"},
		{"from=2026-11-21T00:00:00Z&to=2026-11-21T05:00:00Z", ""},
	} {
		var got topBody
		get(t, f, "/v1/types/top?trace=1&"+tt.query, 200, "application/json", &got)
		if got.String() != tt.want || got.Trace == "" {
			t.Errorf("%s: %q (trace %q), want %q", tt.query, got, got.Trace, tt.want)
		}
	}
	var got topBody
	get(t, f, "/v1/types/top", 200, "application/json", &got) // the last hour: 09:30 to 10:30
	if got.String() != "view=40 buy=10 click=10" {
		t.Errorf("default window: %q", got)
	}
	var p problemBody
	get(t, f, "/v1/types/top?limit=0", 400, "application/problem+json", &p)
	get(t, f, "/v1/types/top?limit=1001", 400, "application/problem+json", &p)
	get(t, f, "/v1/types/top?type=click", 400, "application/problem+json", &p)
	get(t, f, "/v1/types/top?from=2026-01-01T00:00:00Z&to=2026-11-22T00:00:00Z", 400, "application/problem+json", &p)
	if p.Type != ProblemInvalidQuery || !strings.Contains(p.Detail, "hour buckets") {
		t.Errorf("too wide a window: %+v", p)
	}
	get(t, f, "/v1/types/top?from=0001-01-01T00:00:00Z&to=9999-12-31T23:59:59Z", 400, "application/problem+json", &p)
	if p.Type != ProblemInvalidQuery || !strings.Contains(p.Detail, "hour buckets, more than the limit of 744; narrow from and to") {
		t.Errorf("the widest window: %+v", p)
	}
}

type statsBody struct {
	Storage struct {
		Tables []struct {
			Name     string `json:"name"`
			SSTables int    `json:"sstables"`
			Bytes    int64  `json:"bytes"`
			Cells    int64  `json:"cells"`
			Windows  []struct {
				Start    string `json:"start"`
				SSTables int    `json:"sstables"`
			} `json:"windows"`
		} `json:"tables"`
		MemtableBytes int64 `json:"memtable_bytes"`
		Flushes       int64 `json:"flushes"`
	} `json:"storage"`
	Consumers []struct {
		Name        string `json:"name"`
		AppliedSeq  uint64 `json:"applied_seq"`
		AppliedTime string `json:"applied_time"`
	} `json:"consumers"`
}

// TestStats: /v1/stats reports the real store's tables, and 404 without a
// source.
func TestStats(t *testing.T) {
	var db *storage.DB
	f := newFixtureWith(t, reader.Options{}, func(c *Config) {
		c.Stats = StatsFunc(func(ctx context.Context) (Stats, error) {
			return Stats{Storage: StorageStatsOf(db.Metrics()),
				Consumers: []ConsumerStats{ConsumerStatsOf("writer", fixedFreshness()[0])}}, nil
		})
	})
	db = f.db
	if err := f.db.Flush(); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	get(t, f, "/v1/stats", 200, "application/json", &got)
	var st statsBody
	getLoose(t, f, "/v1/stats", &st)
	tables := map[string]int64{}
	for _, tb := range st.Storage.Tables {
		if tb.SSTables > 0 {
			tables[tb.Name] = tb.Cells
		}
		inWindows := 0
		for _, w := range tb.Windows {
			inWindows += w.SSTables
		}
		switch {
		case tb.Name == schema.EventsTable && (len(tb.Windows) == 0 || inWindows != tb.SSTables):
			t.Errorf("events (time window): %d SSTables, %d in windows %+v", tb.SSTables, inWindows, tb.Windows)
		case tb.Name == schema.CountsTable && tb.Windows != nil:
			t.Errorf("event_counts (size tiered) has windows %+v", tb.Windows)
		}
	}
	if tables[schema.EventsTable] == 0 || tables[schema.CountsTable] == 0 || tables[schema.TypeHoursTable] == 0 || st.Storage.Flushes == 0 {
		t.Errorf("after a flush: tables with SSTables %v, flushes %d; want events, counts and the type index", tables, st.Storage.Flushes)
	}
	if len(st.Consumers) != 1 || st.Consumers[0].Name != "writer" || st.Consumers[0].AppliedSeq != 1234 || st.Consumers[0].AppliedTime == "" {
		t.Errorf("consumers: %+v", st.Consumers)
	}
	var p problemBody
	get(t, f, "/v1/stats?x=1", 400, "application/problem+json", &p)

	failing := newFixtureWith(t, reader.Options{}, func(c *Config) {
		c.Stats = StatsFunc(func(ctx context.Context) (Stats, error) { return Stats{}, errors.New("disk on fire") })
	})
	get(t, failing, "/v1/stats", 500, "application/problem+json", &p)
	if strings.Contains(p.Detail, "fire") {
		t.Errorf("500 leaks its cause: %q", p.Detail)
	}
	none := newFixture(t, reader.Options{})
	get(t, none, "/v1/stats", 404, "application/problem+json", &p)
}

// getLoose is get without DisallowUnknownFields, for bodies a test reads
// only part of.
func getLoose(t *testing.T, f *fixture, target string, out any) {
	t.Helper()
	resp, err := f.srv.Client().Get(f.srv.URL + target)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
}
