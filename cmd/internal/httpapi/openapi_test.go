package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	eventideapi "github.com/eventide/eventide/api"
	"github.com/eventide/eventide/cmd/internal/apitest"
	"github.com/eventide/eventide/reader"
)

// TestRoutesMatchSpec holds the handler's route table and the spec's
// paths to the same set, in both directions.
func TestRoutesMatchSpec(t *testing.T) {
	doc, _ := apitest.Spec(t)
	table := routeTable(Config{Health: NewHealth(), Registry: NewRegistry(), Logger: slog.New(slog.DiscardHandler)}, &api{})
	var served []string
	for _, r := range table {
		served = append(served, r.path)
		if doc.Paths.Find(r.path) == nil {
			t.Errorf("the handler serves %s, which api/openapi.yaml does not describe", r.path)
		}
	}
	for _, p := range doc.Paths.InMatchingOrder() {
		if !slices.Contains(served, p) {
			t.Errorf("api/openapi.yaml describes %s, which the handler's route table does not serve", p)
		}
	}
}

// TestEveryRouteAgainstSpec drives every route with good and bad requests
// over a real store with timelines and real NATS with dead letters; do
// checks each exchange against the spec, this test the statuses.
func TestEveryRouteAgainstSpec(t *testing.T) {
	f, _, _ := dlqFixture(t)
	seedTimelines(t, f.db)
	const (
		jsonType    = "application/json"
		problemType = "application/problem+json"
	)
	from, to := url.QueryEscape(base.Format("2006-01-02T15:04:05Z07:00")), url.QueryEscape(base.Add(20*60e9).Format("2006-01-02T15:04:05.999Z07:00"))
	tests := []struct {
		method, target string
		status         int
		contentType    string
	}{
		{"GET", "/v1/events?type=click&from=" + from + "&to=" + to + "&limit=3&order=ASC&trace=TRUE", 200, jsonType},
		{"GET", "/v1/events?type=click&from=" + from + "&to=" + to + "&limit=100", 200, jsonType},
		{"HEAD", "/v1/events?type=click", 200, jsonType},
		{"GET", "/v1/events", 400, problemType},
		{"GET", "/v1/events?type=click&limit=0", 400, problemType},
		{"GET", "/v1/events?type=click&limit=10001", 400, problemType},
		{"GET", "/v1/events?type=click&order=up", 400, problemType},
		{"GET", "/v1/events?type=Click", 400, problemType},
		{"GET", "/v1/events?type=click&colour=red", 400, problemType},
		{"GET", "/v1/events?type=click&page=nonsense", 400, problemType},
		{"GET", "/v1/counts?type=click&from=" + from + "&to=" + to + "&step=5m&trace=1", 200, jsonType},
		// Forms time.ParseDuration and strconv.Atoi take, which the spec must too.
		{"GET", "/v1/counts?type=click&step=%2B1m", 200, jsonType},
		{"GET", "/v1/counts?type=click&step=.5h", 200, jsonType},
		{"GET", "/v1/counts?type=click&step=1h0m30s30s", 200, jsonType},
		{"GET", "/v1/events?type=click&limit=%2B5", 200, jsonType},
		{"GET", "/v1/events?type=click&limit=007", 200, jsonType},
		{"GET", "/v1/counts?type=click&step=30s", 400, problemType},
		{"GET", "/v1/counts?type=click&from=2000-01-01T00:00:00Z&to=2026-01-01T00:00:00Z&step=1m", 400, problemType},
		{"GET", "/v1/dlq?limit=2", 200, jsonType},
		{"GET", "/v1/dlq?type=click&from=2000-01-01T00:00:00Z", 200, jsonType},
		{"GET", "/v1/dlq?page=0", 400, problemType},
		{"GET", "/v1/dlq?limit=1001", 400, problemType},
		{"GET", "/v1/dlq?timeout=5s", 200, jsonType},
		{"GET", "/v1/dlq?timeout=1ns", 503, problemType},
		{"GET", "/v1/dlq?timeout=1m", 400, problemType},
		{"GET", "/v1/events?type=click&timeout=1ns", 503, problemType},
		{"GET", "/v1/timeline/gmason?limit=1", 200, jsonType},
		{"GET", "/v1/timeline/nobody", 200, jsonType},
		{"GET", "/v1/timeline/gmason?limit=1001", 400, problemType},
		{"GET", "/v1/timeline/gmason?page=bogus", 400, problemType},
		{"GET", "/v1/users/gwashington/followers?limit=5", 200, jsonType},
		{"GET", "/v1/users/gmason/following", 200, jsonType},
		{"GET", "/v1/users/gmason/following?limit=x", 400, problemType},
		{"GET", "/livez", 200, jsonType},
		{"GET", "/readyz", 200, jsonType},
		{"GET", "/metrics", 200, "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"},
		{"GET", "/openapi.yaml", 200, "application/yaml"},
		{"POST", "/v1/events?type=click", 405, problemType},
		{"DELETE", "/openapi.yaml", 405, problemType},
		{"GET", "/v2/events", 404, problemType},
		{"GET", "/v1/events/" + eventID(t, base.Add(time.Minute), 1).String() + "?trace=1", 200, jsonType},
		{"GET", "/v1/events/" + eventID(t, base.Add(time.Minute), 1).String() + "?type=click", 200, jsonType},
		{"GET", "/v1/events/" + eventID(t, base.Add(time.Minute), 7).String(), 404, problemType},
		{"GET", "/v1/events/not-a-uuid", 400, problemType},
		{"GET", "/v1/counts?type=click&type=view&step=5m&from=" + from + "&to=" + to, 200, jsonType},
		{"GET", "/v1/counts?type=click&type=click", 400, problemType},
		{"GET", "/v1/types/top?from=" + from + "&to=" + to + "&limit=3&trace=1", 200, jsonType},
		{"GET", "/v1/types/top?limit=0", 400, problemType},
		{"GET", "/v1/stats", 200, jsonType},
		{"GET", "/v1/slice?table=events&partition=22112610%7Cclick&limit=2&trace=1&order=DESC", 200, jsonType},
		{"GET", "/v1/slice?table=event_counts&partition=22112610%7Cclick&start=2026-11-22T10:00:00Z", 200, jsonType},
		{"GET", "/v1/slice?table=followers&partition=gwashington", 200, jsonType},
		{"GET", "/v1/slice?table=nope&partition=x", 400, problemType},
		{"GET", "/v1/stats?table=events", 400, problemType},
		{"GET", "/", 200, "text/html; charset=utf-8"},
		{"HEAD", "/", 200, "text/html; charset=utf-8"},
		{"GET", "/ui/app.js", 200, "text/javascript; charset=utf-8"},
		{"GET", "/ui/uPlot.min.css", 200, "text/css; charset=utf-8"},
		{"GET", "/ui/nothing.js", 404, problemType},
		{"GET", "/index.html", 404, problemType},
		{"POST", "/", 405, problemType},
	}
	for _, tt := range tests {
		do(t, f, tt.method, tt.target, tt.status, tt.contentType, nil)
	}
	// Every spec path is served: each answers something other than the
	// catch-all 404 (every route is enabled in this fixture).
	doc, _ := apitest.Spec(t)
	for _, p := range doc.Paths.InMatchingOrder() {
		target := strings.NewReplacer("{user}", "gmason", "{asset}", "app.js").Replace(p)
		target = strings.ReplaceAll(target, "{id}", eventID(t, base, 0).String())
		if strings.HasPrefix(p, "/v1/events") || strings.HasPrefix(p, "/v1/counts") {
			target += "?type=click"
		}
		var pr problemBody
		// HEAD: the live tail's GET would stream until the client leaves.
		resp, err := f.srv.Client().Head(f.srv.URL + target)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var body []byte
		if resp.StatusCode == http.StatusNotFound {
			if resp, err = f.srv.Client().Get(f.srv.URL + target); err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		if resp.StatusCode == http.StatusNotFound {
			json.Unmarshal(body, &pr)
			t.Errorf("GET %s (spec path %s): 404 %s", target, p, pr.Detail)
		}
	}
}

// TestServesSpec: /openapi.yaml is the embedded document, byte for byte,
// as YAML.
func TestServesSpec(t *testing.T) {
	f := newFixture(t, reader.Options{})
	resp, err := f.srv.Client().Get(f.srv.URL + "/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/yaml" {
		t.Fatalf("GET /openapi.yaml: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !bytes.Equal(body, eventideapi.OpenAPIYAML()) {
		t.Fatalf("GET /openapi.yaml: %d bytes that are not api/openapi.yaml (%d bytes)", len(body), len(eventideapi.OpenAPIYAML()))
	}
	if _, err := openapi3.NewLoader().LoadFromData(body); err != nil {
		t.Fatalf("GET /openapi.yaml: cannot load the served document: %v", err)
	}
}
