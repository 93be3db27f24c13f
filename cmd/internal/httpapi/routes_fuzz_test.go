package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/eventide/eventide/cmd/internal/apitest"
	"github.com/eventide/eventide/reader"
)

// fuzzRoutes are the paths FuzzRoutes and TestNastyQueries send queries
// to: every route of the handler, and one it does not have.
var fuzzRoutes = []string{"/v1/events", "/v1/counts", "/v1/dlq", "/livez", "/readyz", "/metrics", "/nothing",
	"/v1/timeline/gmason", "/v1/users/gwashington/followers", "/v1/users/gmason/following", "/v1/timeline/%ff%00",
	"/v1/events/7ab09000-e65b-11f1-8a51-2d4e6f01b2c3", "/v1/events/not-an-id", "/v1/events/stream", "/v1/types/top",
	"/v1/stats", "/v1/slice"}

// nastyQueries are query strings that once broke, or could break, the
// parsing and planning of a route: overflowing windows and steps, the
// extreme years RFC 3339 allows, bad encodings.
var nastyQueries = []string{
	"",
	"type=click&step=2562047h",
	"type=click&step=2562047h47m",
	"type=click&step=2000000h",
	"type=click&step=9223372036s",
	"type=click&step=-1m",
	"type=click&step=0m",
	"type=click&step=1m&from=0000-01-01T00:00:00Z&to=9999-12-31T23:59:59.999999999Z",
	"type=click&step=8760h&from=0000-01-01T00:00:00Z&to=9999-12-31T23:59:59Z",
	"type=click&step=100000h&from=0001-01-01T00:00:00Z&to=9999-12-31T23:59:59Z",
	"type=click&step=1m&from=2026-11-22T00:00:00Z&to=2026-11-29T15:20:00Z",
	"type=click&step=1m&from=2026-11-22T00:00:00Z&to=2026-11-30T00:00:00Z",
	"type=click&from=0000-01-01T00:00:00Z&to=9999-12-31T23:59:59Z",
	"type=click&from=9999-12-31T23:59:58Z&to=9999-12-31T23:59:59Z",
	"type=click&from=0000-01-01T00:00:00Z&to=0000-01-01T00:00:01Z",
	"type=click&to=0000-01-01T00:00:00%2B23:59",
	"type=click&to=9999-12-31T23:59:59-23:59",
	"type=click&limit=9223372036854775808",
	"type=click&limit=-9223372036854775808",
	"type=click&page=" + strings.Repeat("A", 4096),
	"type=click&page=%00%ff",
	"type=" + strings.Repeat("x", 1000),
	"type=%C0%80",
	"type=a|b&step=1m",
	"type=click&order=ASC&trace=TRUE",
	"type=click&%zz",
	";;;&&&===",
	"type=click&type=view",
	"page=18446744073709551615",
	"page=18446744073709551616",
	"page=-1&limit=0",
	"from=9999-12-31T23:59:59Z&page=1",
	"limit=1001",
	"limit=0&page=AQMAAAAAAAAAAA",
	"page=AQQAAAAAAAAAAAA",
	"type=click&type=view&type=",
	"last_event_id=18446744073709551615",
	"last_event_id=18446744073709551616",
	"last_event_id=%2B1",
	"table=events&partition=22112610%7Cclick&trace=1",
	"table=events&partition=22112610%7Cclick&start=7ab09000-e65b-11f1-8a51-2d4e6f01b2c3",
	"table=event_counts&partition=22112610%7Cclick&start=2026-11-22T10:00:00Z&end=2026-11-22T10:05:00Z&order=desc",
	"table=followers&partition=gwashington&limit=2",
	"table=timeline&partition=gmason&start='x'",
	"table=_checkpoints&partition=x",
}

// checkRouteAnswer sends GET path?query to the handler and fails on a
// panic (the handler runs in this goroutine), a 5xx, a body that is
// not JSON where JSON is promised, or an exchange api/openapi.yaml does
// not describe (checkAgainstSpec).
func checkRouteAnswer(t *testing.T, h http.Handler, path, query string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	if p, err := url.PathUnescape(path); err == nil {
		req.URL.Path, req.URL.RawPath = p, path
	} else {
		req.URL.Path = path
	}
	req.URL.RawQuery = query
	if path == "/v1/events/stream" {
		// A stream runs until its client leaves: this one has left
		// already, so the handler answers and returns.
		ctx, cancel := context.WithCancel(req.Context())
		cancel()
		req = req.WithContext(ctx)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code >= 500 {
		t.Fatalf("GET %s?%s: status %d: %s", path, query, rec.Code, rec.Body)
	}
	apitest.CheckAgainstSpec(t, req, rec.Code, rec.Header(), rec.Body.Bytes())
	if (path == "/metrics" || path == "/v1/events/stream") && rec.Code == 200 {
		return // the Prometheus text format, an event stream
	}
	if !json.Valid(rec.Body.Bytes()) {
		t.Fatalf("GET %s?%s: status %d, body is not JSON: %q", path, query, rec.Code, rec.Body)
	}
}

func TestNastyQueries(t *testing.T) {
	f := newFixture(t, reader.Options{})
	seedTimelines(t, f.db)
	for _, path := range fuzzRoutes {
		for _, q := range nastyQueries {
			checkRouteAnswer(t, f.h, path, q)
		}
	}
}

// FuzzRoutes sends arbitrary query strings to every route of the real
// handler over a real small store: no panic, no 5xx, JSON bodies, and
// every answer as the spec describes it.
func FuzzRoutes(f *testing.F) {
	for i, q := range nastyQueries {
		f.Add(uint8(i), q)
	}
	f.Add(uint8(0), "type=click&from=2026-11-22T10:00:00Z&to=2026-11-22T10:05:00Z&limit=3&order=asc&trace=1")
	f.Add(uint8(1), "type=click&from=2026-11-22T09:00:00Z&step=15m")
	fx := newFixture(f, reader.Options{})
	seedTimelines(f, fx.db)
	f.Fuzz(func(t *testing.T, route uint8, query string) {
		checkRouteAnswer(t, fx.h, fuzzRoutes[int(route)%len(fuzzRoutes)], query)
	})
}

// TestCountPointsLimit: the HTTP layer itself refuses a count query of
// more than MaxCountPoints points, or one whose window overflows the
// reader's arithmetic, with a 400 that says what to change.
func TestCountPointsLimit(t *testing.T) {
	f := newFixture(t, reader.Options{MaxCountBuckets: 1 << 30})
	for _, tt := range []struct {
		query, detail string
	}{
		// A week and 20 minutes of minutes: 10100 points, within the limit
		// (the reader has the same limit).
		{"type=click&step=1m&from=2026-11-15T00:00:00Z&to=2026-11-22T00:00:00Z", ""},
		{"type=click&step=1m&from=2026-11-14T00:00:00Z&to=2026-11-22T00:00:00Z",
			"from 2026-11-14T00:00:00Z to 2026-11-22T00:00:00Z in steps of 1m0s is 11520 points, more than the limit of 11000; use a larger step or a narrower window"},
		{"type=click&step=1m&from=0000-01-01T00:00:00Z&to=9999-12-31T23:59:59Z",
			"from 0000-01-01T00:00:00Z to 9999-12-31T23:59:59Z in steps of 1m0s is 5259492000 points, more than the limit of 11000"},
		{"type=click&step=2500000h", // 285 years: the point before now starts in 1970
			"...plus one step is longer than 292 years; use a smaller step or a narrower window"},
		{"type=click&step=8760h&from=0000-01-01T00:00:00Z&to=9999-12-31T23:59:59Z",
			"...plus one step is longer than 292 years"},
	} {
		var p problemBody
		target := "/v1/counts?" + tt.query
		if tt.detail == "" {
			resp, err := f.srv.Client().Get(f.srv.URL + target)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode >= 500 {
				t.Errorf("%s: status %d", target, resp.StatusCode)
			}
			continue
		}
		get(t, f, target, 400, "application/problem+json", &p)
		if p.Type != ProblemInvalidQuery {
			t.Errorf("%s: problem type %s, want invalid-query", target, p.Type)
		}
		if part, ok := strings.CutPrefix(tt.detail, "..."); ok {
			if !strings.Contains(p.Detail, part) {
				t.Errorf("%s: detail %q, want it to contain %q", target, p.Detail, part)
			}
		} else if !strings.HasPrefix(p.Detail, tt.detail) {
			t.Errorf("%s: detail\n %q, want\n %q", target, p.Detail, tt.detail)
		}
	}
}

// FuzzDLQQuery: parsing /v1/dlq's parameters never panics, and what it
// accepts is within the documented bounds.
func FuzzDLQQuery(f *testing.F) {
	for _, q := range nastyQueries {
		f.Add(q)
	}
	f.Add("type=click&from=2026-11-22T10:00:00Z&to=2026-11-22T11:00:00Z&limit=10&page=42")
	f.Fuzz(func(t *testing.T, rawQuery string) {
		q, pr := parseDLQQuery(rawQuery)
		if pr != nil {
			if pr.Status != 400 || pr.Detail == "" {
				t.Fatalf("%q: problem %+v, want a 400 with a detail", rawQuery, pr)
			}
			return
		}
		if q.limit < 1 || q.limit > MaxDLQLimit || q.hasFrom && q.hasTo && !q.from.Before(q.to) {
			t.Fatalf("%q: accepted %+v", rawQuery, q)
		}
	})
}
