package dashboard

import (
	"bytes"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func serve(t *testing.T, h http.Handler, method, target string, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

var notFound = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusTeapot) // recognisably not the dashboard's answer
})

// TestServesPageAndFiles: "/" is the page, every file the page references
// is served with its type and the security headers, and every served file
// is referenced (no dead weight in the binary).
func TestServesPageAndFiles(t *testing.T) {
	h := Handler(notFound)
	page := serve(t, h, "GET", "/", nil)
	if page.Code != 200 || page.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /: %d %q", page.Code, page.Header().Get("Content-Type"))
	}
	refs := regexp.MustCompile(`(?:src|href)="ui/([^"]+)"`).FindAllStringSubmatch(page.Body.String(), -1)
	var referenced []string
	for _, m := range refs {
		referenced = append(referenced, m[1])
	}
	for name := range assets {
		if !slices.Contains(referenced, name) {
			t.Errorf("ui/%s is served but the page never references it", name)
		}
	}
	want := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".txt": "text/plain; charset=utf-8"}
	for _, name := range referenced {
		rec := serve(t, h, "GET", AssetPrefix+name, nil)
		if rec.Code != 200 || rec.Body.Len() == 0 {
			t.Errorf("GET %s%s (referenced by the page): %d, %d bytes", AssetPrefix, name, rec.Code, rec.Body.Len())
			continue
		}
		if ct := rec.Header().Get("Content-Type"); ct != want[filepath.Ext(name)] {
			t.Errorf("GET %s%s: Content-Type %q, want %q", AssetPrefix, name, ct, want[filepath.Ext(name)])
		}
	}
	for _, target := range []string{"/", AssetPrefix + "app.js"} {
		hdr := serve(t, h, "GET", target, nil).Header()
		if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q, want only 'self'", target, csp)
		}
		if hdr.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no X-Content-Type-Options: nosniff", target)
		}
	}
}

// TestNotFoundGoesToCaller: other paths and unknown names are the
// caller's 404.
func TestNotFoundGoesToCaller(t *testing.T) {
	h := Handler(notFound)
	for _, target := range []string{"/index.html", AssetPrefix + "nothing.js", AssetPrefix, AssetPrefix + "static/app.js", "/app.js"} {
		if rec := serve(t, h, "GET", target, nil); rec.Code != http.StatusTeapot {
			t.Errorf("GET %s: %d, want the caller's notFound", target, rec.Code)
		}
	}
}

// TestRevalidation: a browser holding the current file gets 304, and HEAD
// answers without a body.
func TestRevalidation(t *testing.T) {
	h := Handler(notFound)
	first := serve(t, h, "GET", AssetPrefix+"app.js", nil)
	etag := first.Header().Get("ETag")
	if etag == "" || first.Header().Get("Cache-Control") != "no-cache" {
		t.Fatalf("ETag %q, Cache-Control %q: want an ETag and no-cache", etag, first.Header().Get("Cache-Control"))
	}
	if rec := serve(t, h, "GET", AssetPrefix+"app.js", map[string]string{"If-None-Match": etag}); rec.Code != http.StatusNotModified {
		t.Errorf("If-None-Match with the current ETag: %d, want 304", rec.Code)
	}
	if rec := serve(t, h, "GET", AssetPrefix+"app.js", map[string]string{"If-None-Match": `"old"`}); rec.Code != 200 {
		t.Errorf("If-None-Match with another ETag: %d, want 200", rec.Code)
	}
	if rec := serve(t, h, "HEAD", "/", nil); rec.Code != 200 || rec.Body.Len() != 0 {
		t.Errorf("HEAD /: %d with %d body bytes", rec.Code, rec.Body.Len())
	}
}

// TestNoExternalRequests: the page's own files name no other origin, so
// nothing it loads or fetches leaves the server (the CSP backs this up in
// the browser).
func TestNoExternalRequests(t *testing.T) {
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	err := fs.WalkDir(embedded, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(embedded, p)
		if err != nil {
			return err
		}
		for _, m := range external.FindAllString(string(body), -1) {
			if m == "http://www.w3.org" { // the SVG namespace, not a request
				continue
			}
			t.Errorf("%s names another origin: %s", p, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestVendoredUPlotMatchesLoadtest: the dashboard's uPlot and the loadtest
// report's are the same release, byte for byte (see the package doc for
// why there are two copies).
func TestVendoredUPlotMatchesLoadtest(t *testing.T) {
	for _, name := range []string{"uPlot.iife.min.js", "uPlot.min.css", "LICENSE", "VERSION"} {
		ours, err := os.ReadFile(filepath.Join("vendor", "uplot", name))
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := os.ReadFile(filepath.Join("..", "..", "..", "loadtest", "internal", "report", "vendor", "uplot", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ours, theirs) {
			t.Errorf("vendor/uplot/%s differs from loadtest/internal/report/vendor/uplot/%s; run both update.sh with the same version", name, name)
		}
	}
}
