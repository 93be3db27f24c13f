package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/eventide/eventide/cmd/internal/apitest"
	"github.com/eventide/eventide/reader"
)

const testToken = "s3cret-token"

// send makes one request with the given headers to f and returns the
// status, headers and body; a request the spec describes is checked
// against it.
func send(t *testing.T, f *fixture, method, target string, header map[string]string, checkSpec bool) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
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
	if checkSpec {
		apitest.CheckAgainstSpec(t, req, resp.StatusCode, resp.Header, body)
	}
	return resp.StatusCode, resp.Header, body
}

func TestBearerToken(t *testing.T) {
	f := newFixtureWith(t, reader.Options{}, func(c *Config) { c.Token = testToken })
	bearer := map[string]string{"Authorization": "Bearer " + testToken}
	tests := []struct {
		name, method, target string
		header               map[string]string
		status               int
		// invalidToken: WWW-Authenticate says error="invalid_token".
		invalidToken bool
		// spec: the exchange is one the spec describes (not an unknown
		// path or method).
		spec bool
	}{
		{"missing", "GET", "/v1/events?type=click", nil, 401, false, true},
		{"wrong", "GET", "/v1/events?type=click", map[string]string{"Authorization": "Bearer nope"}, 401, true, true},
		{"prefix of the token", "GET", "/v1/counts?type=click", map[string]string{"Authorization": "Bearer " + testToken[:4]}, 401, true, true},
		{"basic scheme", "GET", "/v1/events?type=click", map[string]string{"Authorization": "Basic " + testToken}, 401, false, true},
		{"no scheme", "GET", "/v1/events?type=click", map[string]string{"Authorization": testToken}, 401, false, true},
		{"right", "GET", "/v1/events?type=click", bearer, 200, false, true},
		{"right, lower-case scheme", "GET", "/v1/counts?type=click", map[string]string{"Authorization": "bearer " + testToken}, 200, false, true},
		{"timeline missing", "GET", "/v1/timeline/gmason", nil, 401, false, true},
		{"timeline right", "GET", "/v1/timeline/gmason", bearer, 200, false, true},
		{"metrics missing", "GET", "/metrics", nil, 401, false, true},
		{"metrics right", "GET", "/metrics", bearer, 200, false, true},
		{"livez open", "GET", "/livez", nil, 200, false, true},
		{"readyz open", "GET", "/readyz", nil, 200, false, true},
		{"spec open", "GET", "/openapi.yaml", nil, 200, false, true},
		{"unknown path missing", "GET", "/v2/events", nil, 401, false, false},
		{"unknown path right", "GET", "/v2/events", bearer, 404, false, true},
		{"other method missing", "POST", "/v1/events?type=click", nil, 401, false, false},
		// The dashboard's page and files hold no data, and a browser
		// loads them before the page can ask for the token.
		{"dashboard open", "GET", "/", nil, 200, false, true},
		{"dashboard file open", "GET", "/ui/app.js", nil, 200, false, true},
		{"dashboard unknown file open", "GET", "/ui/nothing.js", nil, 404, false, true},
		{"dashboard prefix is no way around the token", "GET", "/ui/..%2Fv1%2Fevents%3Ftype=click", nil, 401, false, false},
		{"unknown path beside the dashboard missing", "GET", "/index.html", nil, 401, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, header, body := send(t, f, tt.method, tt.target, tt.header, tt.spec)
			if status != tt.status {
				t.Fatalf("%s %s: status %d, want %d; body %s", tt.method, tt.target, status, tt.status, body)
			}
			if status != 401 {
				return
			}
			auth := header.Get("WWW-Authenticate")
			if !strings.HasPrefix(auth, "Bearer ") || strings.Contains(auth, "invalid_token") != tt.invalidToken {
				t.Errorf("WWW-Authenticate %q; want Bearer, invalid_token %v", auth, tt.invalidToken)
			}
			var pr problemBody
			if err := json.Unmarshal(body, &pr); err != nil || pr.Type != ProblemUnauthorized || !strings.Contains(pr.Detail, "Authorization: Bearer") && !strings.Contains(pr.Detail, "--http-token") {
				t.Errorf("body %s (%v): want an unauthorized problem saying what to send", body, err)
			}
			if strings.Contains(string(body), testToken) {
				t.Errorf("the 401 body %s holds the token", body)
			}
		})
	}
}

// TestNoTokenNoAuth: without Config.Token nothing asks for one.
func TestNoTokenNoAuth(t *testing.T) {
	f := newFixture(t, reader.Options{})
	if status, _, body := send(t, f, "GET", "/v1/events?type=click", nil, true); status != 200 {
		t.Fatalf("status %d, want 200: %s", status, body)
	}
}

func TestCORS(t *testing.T) {
	const allowed = "https://dash.example.com"
	f := newFixtureWith(t, reader.Options{}, func(c *Config) {
		c.Token = testToken
		c.CORSOrigins = []string{allowed, "http://localhost:3000"}
	})
	off := newFixture(t, reader.Options{})
	bearer := "Bearer " + testToken
	preflight := func(origin string) map[string]string {
		return map[string]string{"Origin": origin, "Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "authorization"}
	}
	tests := []struct {
		name       string
		f          *fixture
		method     string
		header     map[string]string
		status     int
		wantOrigin string // Access-Control-Allow-Origin; "" is none
	}{
		{"allowed origin", f, "GET", map[string]string{"Origin": allowed, "Authorization": bearer}, 200, allowed},
		{"allowed origin without token", f, "GET", map[string]string{"Origin": allowed}, 401, allowed},
		{"other origin", f, "GET", map[string]string{"Origin": "https://evil.example.com", "Authorization": bearer}, 200, ""},
		{"origin differing in port", f, "GET", map[string]string{"Origin": "https://dash.example.com:8443", "Authorization": bearer}, 200, ""},
		{"no origin", f, "GET", map[string]string{"Authorization": bearer}, 200, ""},
		{"preflight allowed", f, "OPTIONS", preflight(allowed), 204, allowed},
		{"preflight other origin", f, "OPTIONS", preflight("https://evil.example.com"), 401, ""},
		{"cors off", off, "GET", map[string]string{"Origin": allowed}, 200, ""},
		{"cors off preflight", off, "OPTIONS", preflight(allowed), 405, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, header, body := send(t, tt.f, tt.method, "/v1/events?type=click", tt.header, tt.method == "GET")
			if status != tt.status {
				t.Fatalf("status %d, want %d; body %s", status, tt.status, body)
			}
			if got := header.Get("Access-Control-Allow-Origin"); got != tt.wantOrigin {
				t.Errorf("Access-Control-Allow-Origin %q, want %q", got, tt.wantOrigin)
			}
			if tt.wantOrigin == "" {
				for k := range header {
					if strings.HasPrefix(k, "Access-Control-") {
						t.Errorf("CORS header %s: %q on a request from an origin not configured", k, header.Get(k))
					}
				}
				return
			}
			if !strings.Contains(header.Get("Vary"), "Origin") {
				t.Errorf("Vary %q does not name Origin", header.Get("Vary"))
			}
			if tt.method == "OPTIONS" && (header.Get("Access-Control-Allow-Methods") != "GET, HEAD" ||
				!strings.Contains(header.Get("Access-Control-Allow-Headers"), "Authorization")) {
				t.Errorf("preflight: Allow-Methods %q, Allow-Headers %q", header.Get("Access-Control-Allow-Methods"), header.Get("Access-Control-Allow-Headers"))
			}
		})
	}
}

func TestTimeoutParameter(t *testing.T) {
	f := newFixtureWith(t, reader.Options{}, func(c *Config) { c.MaxQueryTimeout = 10 * time.Second })
	tests := []struct {
		target string
		status int
		ptype  string // problem type of an error
	}{
		{"/v1/events?type=click&timeout=5s", 200, ""},
		{"/v1/events?type=click&timeout=10s", 200, ""},
		{"/v1/events?type=click&timeout=", 200, ""},
		{"/v1/counts?type=click&timeout=1500ms", 200, ""},
		{"/v1/timeline/gmason?timeout=2s", 200, ""},
		{"/v1/users/gmason/following?timeout=2s", 200, ""},
		{"/v1/events?type=click&timeout=11s", 400, ProblemInvalidParameter},
		{"/v1/events?type=click&timeout=1h", 400, ProblemInvalidParameter},
		{"/v1/events?type=click&timeout=0s", 400, ProblemInvalidParameter},
		{"/v1/events?type=click&timeout=-1s", 400, ProblemInvalidParameter},
		{"/v1/events?type=click&timeout=5", 400, ProblemInvalidParameter},
		{"/v1/events?type=click&timeout=soon", 400, ProblemInvalidParameter},
		{"/v1/events?type=click&timeout=1s&timeout=2s", 400, ProblemInvalidParameter},
		// A deadline that has passed before the query runs.
		{"/v1/events?type=click&timeout=1ns", 503, ProblemQueryTimeout},
		{"/v1/counts?type=click&timeout=1ns", 503, ProblemQueryTimeout},
		{"/v1/timeline/gmason?timeout=1ns", 503, ProblemQueryTimeout},
		{"/v1/users/gwashington/followers?timeout=1ns", 503, ProblemQueryTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			status, _, body := send(t, f, "GET", tt.target, nil, true)
			if status != tt.status {
				t.Fatalf("status %d, want %d; body %s", status, tt.status, body)
			}
			if tt.ptype == "" {
				return
			}
			var pr problemBody
			if err := json.Unmarshal(body, &pr); err != nil || pr.Type != tt.ptype {
				t.Fatalf("body %s: want problem type %s", body, tt.ptype)
			}
			if tt.status == 503 && !strings.Contains(pr.Detail, "narrow the query") {
				t.Errorf("detail %q does not say to narrow the query", pr.Detail)
			}
			if strings.Contains(tt.target, "11s") && !strings.Contains(pr.Detail, "10s") {
				t.Errorf("detail %q does not name the maximum", pr.Detail)
			}
		})
	}
}

// TestMaxQueryTimeoutDefault: no timeout parameter runs under the
// server's maximum, which defaults to DefaultMaxQueryTimeout.
func TestMaxQueryTimeoutDefault(t *testing.T) {
	f := newFixture(t, reader.Options{})
	over := (DefaultMaxQueryTimeout + time.Second).String()
	if status, _, body := send(t, f, "GET", "/v1/events?type=click&timeout="+over, nil, true); status != 400 {
		t.Fatalf("timeout=%s: status %d, want 400; body %s", over, status, body)
	}
	if status, _, body := send(t, f, "GET", "/v1/events?type=click&timeout="+DefaultMaxQueryTimeout.String(), nil, true); status != 200 {
		t.Fatalf("timeout=%s: status %d, want 200; body %s", DefaultMaxQueryTimeout, status, body)
	}
}

func FuzzParseTimeout(f *testing.F) {
	for _, s := range []string{"", "1s", "30s", "31s", "0", "-1s", "1ns", "1h2m", ".5s", "+1s", "9999999999h", "x"} {
		f.Add(s)
	}
	const max = 30 * time.Second
	f.Fuzz(func(t *testing.T, s string) {
		d, pr := parseTimeout([]string{s}, max)
		if pr != nil {
			if pr.Status != 400 || pr.Detail == "" {
				t.Fatalf("%q: problem %+v", s, pr)
			}
			return
		}
		if d <= 0 || d > max {
			t.Fatalf("%q: accepted %s outside (0, %s]", s, d, max)
		}
	})
}

// FuzzOpenPaths: with a token, a request without it that the guard lets
// through (isOpenPath) reaches only the probes, the spec or the
// dashboard's static files, never a data route, however its path is
// spelled (dot segments, escapes, doubled slashes).
func FuzzOpenPaths(f *testing.F) {
	for _, p := range []string{"/", "/ui/app.js", "/ui/../v1/events", "/ui/..%2Fv1%2Fevents", "/ui//v1/events", "/ui/./app.js",
		"/livez", "/readyz/", "/openapi.yaml", "/v1/events", "/ui/", "/ui/app.js/..", "/ui/%2e%2e", "//", "/ui/app.js?x=/v1"} {
		f.Add(p)
	}
	fx := newFixtureWith(f, reader.Options{}, func(c *Config) { c.Token = testToken })
	f.Fuzz(func(t *testing.T, raw string) {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		p, err := url.PathUnescape(raw)
		if err != nil || !strings.HasPrefix(p, "/") {
			return
		}
		req.URL.Path, req.URL.RawPath = p, raw
		rec := httptest.NewRecorder()
		fx.h.ServeHTTP(rec, req)
		if rec.Code == http.StatusUnauthorized {
			return
		}
		if !isOpenPath(p) {
			t.Fatalf("GET %q (path %q) without the token: %d, but the path is not open", raw, p, rec.Code)
		}
		ct := rec.Header().Get("Content-Type")
		switch {
		case p == "/livez" || p == "/readyz" || p == "/openapi.yaml":
		case rec.Code == http.StatusOK && (ct == "application/json" || ct == "application/problem+json"):
			t.Fatalf("GET %q without the token: %d %s from a dashboard path: %s", raw, rec.Code, ct, rec.Body)
		case rec.Code != http.StatusOK && rec.Code != http.StatusNotFound && rec.Code != http.StatusMovedPermanently:
			t.Fatalf("GET %q without the token: status %d from a dashboard path", raw, rec.Code)
		}
	})
}
