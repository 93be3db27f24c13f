package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/cmd/internal/apitest"
	"github.com/eventide/eventide/internal/tail"
	"github.com/eventide/eventide/reader"
	"github.com/eventide/eventide/storage"
	"github.com/eventide/eventide/writer"
)

// base is the hour the fixtures' events fall in; the clock of the handler
// and reader stands 30 minutes after it, so the default window (the last
// hour) covers base-30m to base+30m.
var base = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

const fixtureEvents = 10

type fixture struct {
	srv *httptest.Server
	h   http.Handler
	db  *storage.DB
	// writer is the real writer of dlqFixture's store; nil in newFixture's.
	writer *writer.Writer
	// tail is the live tail the writer feeds and js the JetStream context
	// of its NATS server, in dlqFixture's; nil in newFixture's.
	tail *tail.Broadcaster
	js   jetstream.JetStream
}

// newFixture opens a real store in a temporary directory holding
// fixtureEvents click events, one a minute from base, each counted, and
// serves the API over it. Events with an even index have a user; the
// data of event i is {"n":i}.
func newFixture(t testing.TB, opts reader.Options) *fixture {
	t.Helper()
	return newFixtureWith(t, opts, nil)
}

// newFixtureWith is newFixture with the handler's Config changed by
// configure (token, CORS, timeouts) before the handler is built.
func newFixtureWith(t testing.TB, opts reader.Options, configure func(*Config)) *fixture {
	t.Helper()
	db, err := storage.Open(t.TempDir(), storage.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := catalog.EnsureBuiltinTables(db); err != nil {
		t.Fatal(err)
	}
	if err := catalog.EnsureFanoutTables(db); err != nil {
		t.Fatal(err)
	}
	var b storage.Batch
	for i := range fixtureEvents {
		at := base.Add(time.Duration(i) * time.Minute)
		e := schema.Event{ID: eventID(t, at, i), Type: "click", Data: fmt.Appendf(nil, `{"n":%d}`, i)}
		if i%2 == 0 {
			e.User = fmt.Sprintf("user-%d", i)
		}
		if err := catalog.PutEvent(&b, &e, 0, 0, db.NowMicros()); err != nil {
			t.Fatal(err)
		}
		if err := catalog.AddCount(&b, "click", at, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return base.Add(30 * time.Minute) }
	reg := NewRegistry()
	opts.Now, opts.Registerer = now, reg
	r, err := reader.New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	// Timelines read by the real clock: their posts are recent.
	tl, err := reader.NewTimelines(db, reader.TimelineOptions{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Reader: r, Timelines: tl, Health: NewHealth(), Registry: reg, Now: now, Tail: tail.New(tail.Options{}, 0)}
	if configure != nil {
		configure(&cfg)
	}
	h, err := NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &fixture{srv: srv, h: h, db: db}
}

func eventID(t testing.TB, at time.Time, i int) uuid.UUID {
	t.Helper()
	id, err := bucket.NewTimeUUID(at, [8]byte{0, 0, 0, 0, 0, 0, 0, byte(i)})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

type eventsBody struct {
	Events []struct {
		ID     string          `json:"id"`
		Type   string          `json:"type"`
		Time   string          `json:"time"`
		User   string          `json:"user"`
		Author string          `json:"author"`
		Data   json.RawMessage `json:"data"`
	} `json:"events"`
	NextPage  *string        `json:"next_page"`
	Trace     string         `json:"trace"`
	Freshness *freshnessBody `json:"freshness"`
}

type countPoints []struct {
	Time  string `json:"time"`
	Count int64  `json:"count"`
}

type countsBody struct {
	Points countPoints `json:"points"`
	Series []struct {
		Type   string      `json:"type"`
		Points countPoints `json:"points"`
	} `json:"series"`
	Trace     string         `json:"trace"`
	Freshness *freshnessBody `json:"freshness"`
}

type problemBody struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// get fetches target, checks the status and content type, and decodes
// the body into out.
func get(t *testing.T, f *fixture, target string, wantStatus int, wantType string, out any) http.Header {
	t.Helper()
	return do(t, f, http.MethodGet, target, wantStatus, wantType, out)
}

func do(t *testing.T, f *fixture, method, target string, wantStatus int, wantType string, out any) http.Header {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != wantStatus {
		t.Fatalf("%s %s: status %d, want %d; body %s", method, target, resp.StatusCode, wantStatus, body)
	}
	apitest.CheckAgainstSpec(t, req, resp.StatusCode, resp.Header, body)
	if ct := resp.Header.Get("Content-Type"); ct != wantType {
		t.Fatalf("%s %s: Content-Type %q, want %q", method, target, ct, wantType)
	}
	if out != nil {
		// Decode into a zero value: fields a response omits must read as
		// absent, not as left over from an earlier call.
		reflect.ValueOf(out).Elem().SetZero()
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(out); err != nil {
			t.Fatalf("%s %s: cannot decode %s: %v", method, target, body, err)
		}
	}
	return resp.Header
}

func TestEvents(t *testing.T) {
	f := newFixture(t, reader.Options{})
	var got eventsBody
	get(t, f, "/v1/events?type=click", 200, "application/json", &got)
	if len(got.Events) != fixtureEvents || got.NextPage != nil {
		t.Fatalf("got %d events, next_page %v; want %d and none", len(got.Events), got.NextPage, fixtureEvents)
	}
	for i, e := range got.Events {
		n := fixtureEvents - 1 - i // newest first
		at := base.Add(time.Duration(n) * time.Minute)
		wantUser := ""
		if n%2 == 0 {
			wantUser = fmt.Sprintf("user-%d", n)
		}
		if e.ID != eventID(t, at, n).String() || e.Type != "click" || e.Time != at.Format(time.RFC3339Nano) ||
			e.User != wantUser || e.Author != "" || string(e.Data) != fmt.Sprintf(`{"n":%d}`, n) {
			t.Errorf("event %d = %+v (data %s), want event n=%d at %s user %q", i, e, e.Data, n, at.Format(time.RFC3339), wantUser)
		}
	}

	get(t, f, "/v1/events?type=click&order=asc&limit=1", 200, "application/json", &got)
	if len(got.Events) != 1 || got.Events[0].Time != base.Format(time.RFC3339Nano) || got.NextPage == nil {
		t.Fatalf("order=asc limit=1: got %+v, want the oldest event and a next page", got)
	}

	// The window is [from, to): minutes 2, 3 and 4.
	from, to := base.Add(2*time.Minute).Format(time.RFC3339), base.Add(5*time.Minute).Format(time.RFC3339)
	get(t, f, "/v1/events?type=click&from="+from+"&to="+to, 200, "application/json", &got)
	if len(got.Events) != 3 || string(got.Events[0].Data) != `{"n":4}` || string(got.Events[2].Data) != `{"n":2}` {
		t.Fatalf("from=%s to=%s: got %+v, want events 4, 3, 2", from, to, got.Events)
	}
	// An offset other than Z, its + escaped.
	get(t, f, "/v1/events?type=click&to="+url.QueryEscape(base.Add(time.Minute).In(time.FixedZone("", 3600)).Format(time.RFC3339)), 200, "application/json", &got)
	if len(got.Events) != 1 || string(got.Events[0].Data) != `{"n":0}` {
		t.Fatalf("to with +01:00 offset: got %+v, want event 0", got.Events)
	}

	get(t, f, "/v1/events?type=click&trace=1&limit=2", 200, "application/json", &got)
	if !strings.HasPrefix(got.Trace, "read ") {
		t.Fatalf("trace=1: trace %q, want the reader's one-line trace", got.Trace)
	}
	get(t, f, "/v1/events?type=other", 200, "application/json", &got)
	if got.Events == nil || len(got.Events) != 0 {
		t.Fatalf("type=other: events %v, want an empty list (not null)", got.Events)
	}
}

func TestEventsPaging(t *testing.T) {
	f := newFixture(t, reader.Options{})
	for _, order := range []string{"desc", "asc"} {
		var seen []string
		page := ""
		for pages := 0; ; pages++ {
			if pages > fixtureEvents {
				t.Fatalf("order=%s: more pages than events", order)
			}
			var got eventsBody
			get(t, f, "/v1/events?type=click&limit=3&order="+order+"&page="+url.QueryEscape(page), 200, "application/json", &got)
			for _, e := range got.Events {
				seen = append(seen, string(e.Data))
			}
			if got.NextPage == nil {
				break
			}
			page = *got.NextPage
		}
		var want []string
		for i := range fixtureEvents {
			n := i
			if order == "desc" {
				n = fixtureEvents - 1 - i
			}
			want = append(want, fmt.Sprintf(`{"n":%d}`, n))
		}
		if strings.Join(seen, " ") != strings.Join(want, " ") {
			t.Errorf("order=%s: pages gave %v, want %v", order, seen, want)
		}
	}
}

func TestCounts(t *testing.T) {
	f := newFixture(t, reader.Options{})
	from, to := base.Format(time.RFC3339), base.Add(10*time.Minute).Format(time.RFC3339)
	var got countsBody
	get(t, f, "/v1/counts?type=click&from="+from+"&to="+to, 200, "application/json", &got)
	if len(got.Points) != 10 {
		t.Fatalf("step 1m: %d points, want 10: %+v", len(got.Points), got.Points)
	}
	for i, p := range got.Points {
		if p.Time != base.Add(time.Duration(i)*time.Minute).Format(time.RFC3339) || p.Count != 1 {
			t.Errorf("point %d = %+v, want count 1 at minute %d", i, p, i)
		}
	}
	get(t, f, "/v1/counts?type=click&step=5m&trace=true&from="+from+"&to="+to, 200, "application/json", &got)
	if len(got.Points) != 2 || got.Points[0].Count != 5 || got.Points[1].Count != 5 || got.Trace == "" {
		t.Fatalf("step 5m: got %+v, want two points of 5 and a trace", got)
	}
	// Default window: the hour before now (base+30m), one point a minute.
	get(t, f, "/v1/counts?type=click", 200, "application/json", &got)
	var total int64
	for _, p := range got.Points {
		total += p.Count
	}
	if len(got.Points) != 60 || total != fixtureEvents || got.Trace != "" {
		t.Fatalf("default window: %d points totalling %d (trace %q), want 60 totalling %d and no trace", len(got.Points), total, got.Trace, fixtureEvents)
	}
}

func TestBadRequests(t *testing.T) {
	f := newFixture(t, reader.Options{})
	tests := []struct {
		target      string
		status      int
		problemType string
		detail      string // the detail, or a part of it after "..."
	}{
		{"/v1/events", 400, ProblemInvalidParameter, "parameter type is required: the event type to query, e.g. type=click"},
		{"/v1/events?type=", 400, ProblemInvalidParameter, "parameter type is required: the event type to query, e.g. type=click"},
		{"/v1/events?type=Click", 400, ProblemInvalidQuery, `...parameter type: invalid event type "Click"`},
		{"/v1/events?type=click&from=yesterday", 400, ProblemInvalidParameter, `parameter from: "yesterday" is not an RFC 3339 time such as 2026-11-22T10:00:00Z`},
		{"/v1/events?type=click&to=2026-11-22", 400, ProblemInvalidParameter, `parameter to: "2026-11-22" is not an RFC 3339 time such as 2026-11-22T10:00:00Z`},
		{"/v1/events?type=click&to=2026-11-22T10:00:00+01:00", 400, ProblemInvalidParameter,
			`parameter to: "2026-11-22T10:00:00 01:00" is not an RFC 3339 time such as 2026-11-22T10:00:00Z; write a + in a time offset as %2B in a URL`},
		// time.Parse takes these; RFC 3339 (and the spec's date-time) does not.
		{"/v1/events?type=click&to=2026-11-22T9:00:00Z", 400, ProblemInvalidParameter,
			`parameter to: "2026-11-22T9:00:00Z" is not an RFC 3339 time such as 2026-11-22T10:00:00Z`},
		{"/v1/counts?type=click&from=2026-11-22T09:00:00,5Z", 400, ProblemInvalidParameter,
			`parameter from: "2026-11-22T09:00:00,5Z" is not an RFC 3339 time such as 2026-11-22T10:00:00Z`},
		{"/v1/events?type=click&from=2026-11-22T11:00:00Z&to=2026-11-22T10:00:00Z", 400, ProblemInvalidParameter,
			"parameter from (2026-11-22T11:00:00Z) is not before to (2026-11-22T10:00:00Z); the window is [from, to)"},
		{"/v1/events?type=click&from=2026-11-22T10:00:00Z&to=2026-11-22T10:00:00Z", 400, ProblemInvalidParameter, "...is not before to"},
		{"/v1/events?type=click&limit=abc", 400, ProblemInvalidParameter, `parameter limit: "abc" is not a whole number; use 1 to 10000`},
		{"/v1/events?type=click&limit=0", 400, ProblemInvalidParameter, "parameter limit: 0 is out of range; use 1 to 10000"},
		{"/v1/events?type=click&limit=10001", 400, ProblemInvalidParameter, "parameter limit: 10001 is out of range; use 1 to 10000"},
		{"/v1/events?type=click&order=up", 400, ProblemInvalidParameter, `parameter order: "up" is not asc or desc`},
		{"/v1/events?type=click&trace=yes", 400, ProblemInvalidParameter, `parameter trace: "yes" is not 1, 0, true or false`},
		{"/v1/events?type=click&page=garbage", 400, ProblemInvalidQuery, "...pass the next_page value of the previous page unchanged"},
		{"/v1/events?type=click&limit=1&limit=2", 400, ProblemInvalidParameter, "parameter limit is given 2 times; give it once"},
		{"/v1/events?type=click&foo=1&Type=x", 400, ProblemUnknownParameter,
			`unknown parameters "Type", "foo"; this endpoint accepts type, from, to, limit, order, page, trace`},
		{"/v1/events?type=click&step=1m", 400, ProblemUnknownParameter,
			`unknown parameter "step"; this endpoint accepts type, from, to, limit, order, page, trace`},
		{"/v1/events?type=%zz", 400, ProblemInvalidParameter, "the query string is not valid URL encoding"},
		{"/v1/counts", 400, ProblemInvalidParameter, "parameter type is required: the event type to query, e.g. type=click"},
		{"/v1/counts?type=click&step=30s", 400, ProblemInvalidParameter,
			"parameter step: 30s is not a whole number of minutes; use a multiple of 1m such as 1m, 15m or 1h"},
		{"/v1/counts?type=click&step=90s", 400, ProblemInvalidParameter, "parameter step: 1m30s is not a whole number of minutes"},
		{"/v1/counts?type=click&step=5", 400, ProblemInvalidParameter, `parameter step: "5" is not a duration such as 1m, 15m or 1h`},
		{"/v1/counts?type=click&from=2026-11-01T00:00:00Z&to=2026-11-20T00:00:00Z", 400, ProblemInvalidQuery,
			"...use a larger step or a narrower window"},
		{"/v1/counts?type=click&limit=5", 400, ProblemUnknownParameter,
			`unknown parameter "limit"; this endpoint accepts type, from, to, step, trace`},
		{"/v1/nothing", 404, problemAboutBlank,
			"no endpoint at /v1/nothing; the API serves /v1/events, /v1/events/{id}, /v1/events/stream, /v1/counts, /v1/types/top, /v1/slice, /v1/stats, /v1/dlq, /v1/timeline/{user}, /v1/users/{user}/followers, /v1/users/{user}/following, /livez, /readyz, /metrics and /openapi.yaml"},
		{"/ui", 404, problemAboutBlank, "...and /openapi.yaml; the dashboard is at /"},
		{"/ui/", 404, problemAboutBlank, "no endpoint at /ui/"},
		{"/ui/nothing.js", 404, problemAboutBlank, "no dashboard file at /ui/nothing.js; the dashboard is at /"},
		{"/ui/static/app.js", 404, problemAboutBlank, "no endpoint at /ui/static/app.js"},
		// Unclean paths get the clean one named, not net/http's redirect.
		{"//v1/events?type=click", 404, problemAboutBlank,
			"no endpoint at //v1/events: the path has an empty, '.' or '..' segment; request /v1/events"},
		{"/v1//stats", 404, problemAboutBlank, "...request /v1/stats"},
		{"/v1/users//followers", 404, problemAboutBlank, "...request /v1/users/followers"},
		{"/v1/users/a/../b/followers", 404, problemAboutBlank, "...request /v1/users/b/followers"},
		{"/v1/./events?type=click", 404, problemAboutBlank, "...request /v1/events"},
		{"/readyz/", 404, problemAboutBlank, "no endpoint at /readyz/;"},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			var p problemBody
			get(t, f, tt.target, tt.status, "application/problem+json", &p)
			if p.Status != tt.status || p.Type != tt.problemType || p.Title == "" {
				t.Errorf("problem %+v, want status %d type %s and a title", p, tt.status, tt.problemType)
			}
			if part, ok := strings.CutPrefix(tt.detail, "..."); ok {
				if !strings.Contains(p.Detail, part) {
					t.Errorf("detail %q, want it to contain %q", p.Detail, part)
				}
			} else if p.Detail != tt.detail && !strings.HasPrefix(p.Detail, tt.detail) {
				t.Errorf("detail\n %q, want\n %q", p.Detail, tt.detail)
			}
		})
	}
}

func TestMethodNotAllowed(t *testing.T) {
	f := newFixture(t, reader.Options{})
	for _, path := range []string{"/v1/events", "/v1/counts", "/readyz", "/livez", "/metrics"} {
		for _, method := range []string{http.MethodPost, http.MethodDelete, http.MethodPut} {
			var p problemBody
			h := do(t, f, method, path+"?type=click", 405, "application/problem+json", &p)
			if h.Get("Allow") != "GET, HEAD" || p.Detail != fmt.Sprintf("method %s is not allowed on %s; use GET", method, path) {
				t.Errorf("%s %s: Allow %q, problem %+v", method, path, h.Get("Allow"), p)
			}
		}
	}
	do(t, f, http.MethodHead, "/v1/events?type=click", 200, "application/json", nil)
}

func TestTooManyTombstones(t *testing.T) {
	f := newFixture(t, reader.Options{FailTombstones: 5})
	var b storage.Batch
	for i := range fixtureEvents {
		at := base.Add(time.Duration(i) * time.Minute)
		pk, err := bucket.PartitionKeyFor(eventID(t, at, i), "click", 0)
		if err != nil {
			t.Fatal(err)
		}
		b.DeleteCell(schema.EventsTable, []byte(pk.String()), schema.EventClusteringKey(eventID(t, at, i)),
			[]byte(schema.ColumnData), f.db.NowMicros())
	}
	if err := f.db.Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	var p problemBody
	get(t, f, "/v1/events?type=click", 422, "application/problem+json", &p)
	if p.Type != ProblemTooManyTombstones || !strings.Contains(p.Detail, "to=2026-11-22T10:00:00Z skips that hour") {
		t.Fatalf("problem %+v, want too-many-tombstones with the reader's hint", p)
	}
}

func TestInternalErrorHidesCause(t *testing.T) {
	f := newFixture(t, reader.Options{})
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	var p problemBody
	get(t, f, "/v1/events?type=click", 500, "application/problem+json", &p)
	if p.Type != problemAboutBlank || !strings.Contains(p.Detail, "error id ") || strings.Contains(p.Detail, "closed") {
		t.Fatalf("problem %+v, want a generic detail with an error id", p)
	}
}

func TestMetricsAndHealth(t *testing.T) {
	f := newFixture(t, reader.Options{})
	get(t, f, "/v1/events?type=click", 200, "application/json", nil)
	resp, err := f.srv.Client().Get(f.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`eventide_http_requests_total{code="200",handler="/v1/events"} 1`,
		`eventide_reader_queries_total{kind="events",result="ok"} 1`,
		"go_goroutines ",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	var live map[string]bool
	get(t, f, "/livez", 200, "application/json", &live)
	if !live["live"] {
		t.Errorf("/livez = %v", live)
	}
}
