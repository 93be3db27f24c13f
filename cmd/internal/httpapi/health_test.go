package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/eventide/eventide/cmd/internal/apitest"
)

func TestReadyz(t *testing.T) {
	h := NewHealth()
	writerErr := errors.New("writer: consumer not created yet")
	var writerReady error = writerErr
	h.Add("storage", func() error { return nil })
	h.Add("writer", func() error { return writerReady })
	type report struct {
		Ready  bool          `json:"ready"`
		Checks []CheckResult `json:"checks"`
	}
	readyz := func() (int, report) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/readyz", nil)
		h.serveReadyz(rec, req)
		apitest.CheckAgainstSpec(t, req, rec.Code, rec.Header(), rec.Body.Bytes())
		var r report
		if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
			t.Fatalf("cannot decode %s: %v", rec.Body, err)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("Content-Type %q", ct)
		}
		return rec.Code, r
	}
	steps := []struct {
		name   string
		before func()
		status int
		want   report
	}{
		{"writer not ready", func() {}, 503, report{false, []CheckResult{
			{"storage", true, ""}, {"writer", false, "writer: consumer not created yet"}, {"shutdown", true, ""}}}},
		{"all ready", func() { writerReady = nil }, 200, report{true, []CheckResult{
			{"storage", true, ""}, {"writer", true, ""}, {"shutdown", true, ""}}}},
		{"draining", h.Drain, 503, report{false, []CheckResult{
			{"storage", true, ""}, {"writer", true, ""}, {"shutdown", false, "shutting down"}}}},
	}
	for _, s := range steps {
		s.before()
		status, got := readyz()
		if status != s.status || !reflect.DeepEqual(got, s.want) {
			t.Errorf("%s: %d %+v, want %d %+v", s.name, status, got, s.status, s.want)
		}
	}
}

func TestStartingHandler(t *testing.T) {
	h := StartingHandler(func() string { return "opening storage" })
	for _, tt := range []struct {
		path       string
		status     int
		body       string
		retryAfter string // docs/http-api.md: every other path 503 with Retry-After: 1
	}{
		{"/livez", 200, `{"live":true}`, ""},
		{"/readyz", 503, `{"ready":false,"checks":[{"name":"startup","ok":false,"detail":"opening storage"}]}`, ""},
		{"/v1/events", 503, `"detail":"the server is starting (opening storage); retry shortly"`, "1"},
		{"/v1/timeline/u1", 503, `"detail":"the server is starting (opening storage); retry shortly"`, "1"},
		{"/metrics", 503, `"detail":"the server is starting (opening storage); retry shortly"`, "1"},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, tt.path, nil)
		h.ServeHTTP(rec, req)
		apitest.CheckAgainstSpec(t, req, rec.Code, rec.Header(), rec.Body.Bytes())
		if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.body) || rec.Header().Get("Retry-After") != tt.retryAfter {
			t.Errorf("%s: %d %s (Retry-After %q), want %d with %s (Retry-After %q)", tt.path, rec.Code, rec.Body, rec.Header().Get("Retry-After"), tt.status, tt.body, tt.retryAfter)
		}
	}
}

// TestLivez: /livez passes while every liveness check does, whatever
// readiness says, and fails with the failing check's cause once one fails
// for good.
func TestLivez(t *testing.T) {
	h := NewHealth()
	var storageErr error
	permanent := false
	h.Add("storage", func() error { return storageErr })
	h.AddLiveness("storage", func() error {
		if permanent {
			return storageErr
		}
		return nil
	})
	livez := func() (int, string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/livez", nil)
		h.serveLivez(rec, req)
		apitest.CheckAgainstSpec(t, req, rec.Code, rec.Header(), rec.Body.Bytes())
		return rec.Code, strings.TrimSpace(rec.Body.String())
	}
	readyz := func() int {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/readyz", nil)
		h.serveReadyz(rec, req)
		apitest.CheckAgainstSpec(t, req, rec.Code, rec.Header(), rec.Body.Bytes())
		return rec.Code
	}
	for _, s := range []struct {
		name        string
		before      func()
		ready, live int
		liveBody    string
	}{
		{"healthy", func() {}, 200, 200, `{"live":true}`},
		{"transient failure", func() { storageErr = errors.New("cannot write WAL segment 000042.wal: no space left on device") },
			503, 200, `{"live":true}`},
		{"permanent failure", func() { permanent = true }, 503, 503,
			`{"live":false,"checks":[{"name":"storage","ok":false,"detail":"cannot write WAL segment 000042.wal: no space left on device"}]}`},
		{"draining does not kill", func() { storageErr, permanent = nil, false; h.Drain() }, 503, 200, `{"live":true}`},
	} {
		s.before()
		status, body := livez()
		if r := readyz(); r != s.ready || status != s.live || body != s.liveBody {
			t.Errorf("%s: /readyz %d, /livez %d %s; want %d, %d %s", s.name, r, status, body, s.ready, s.live, s.liveBody)
		}
	}
}
