package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
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
		h.serveReadyz(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
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
		path   string
		status int
		body   string
	}{
		{"/livez", 200, `{"live":true}`},
		{"/readyz", 503, `{"ready":false,"checks":[{"name":"startup","ok":false,"detail":"opening storage"}]}`},
		{"/v1/events", 503, `"detail":"the server is starting (opening storage); retry shortly"`},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
		if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.body) {
			t.Errorf("%s: %d %s, want %d with %s", tt.path, rec.Code, rec.Body, tt.status, tt.body)
		}
	}
}
