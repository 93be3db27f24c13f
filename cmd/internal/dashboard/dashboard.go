// Package dashboard is Eventide's built-in dashboard: one small page of
// plain JavaScript (no framework, no build step) and its files, embedded
// in the binary and served by cmd/internal/httpapi at "/" (the page) and
// "/ui/<name>" (its script, styles and chart library). It reads
// everything it shows from the HTTP API the same process serves; it holds
// no data and no server-side state of its own.
//
// The page (static/index.html, static/app.js, static/app.css) shows the
// event rate per type over a chosen window (multi-type /v1/counts, drawn
// with uPlot), the top types of the window, a live tail of stored events
// (/v1/events/stream), a user's timeline, the dead letters with their
// reasons (/v1/dlq), and storage health (/v1/stats, /readyz and the
// freshness every data answer carries: "as of 12:03:07, 40 events
// behind"). docs/ARCHITECTURE.md ("The dashboard") walks through it.
//
// Invariants:
//   - No request leaves the server the page came from: no CDN, fonts or
//     analytics. Every answer carries a Content-Security-Policy allowing
//     only 'self', so a browser refuses (and reports) any other request.
//   - Data is inserted into the page as text (textContent), never as
//     HTML.
//   - With a bearer token (--http-token) the page and its files stay
//     open (they hold no data; httpapi lets "/" and "/ui/" through);
//     the page asks for the token, keeps it in sessionStorage and sends
//     it as "Authorization: Bearer <token>" with every API request. The
//     live tail reads the event stream with fetch and parses
//     Server-Sent Events itself, because EventSource cannot send headers;
//     it resumes after a break with Last-Event-ID.
//
// The chart library is uPlot (https://github.com/leeoniya/uPlot, MIT,
// about 50 KB), vendored from the npm registry under vendor/uplot with its
// LICENSE, VERSION and update.sh, at the same version as the loadtest
// report's copy (loadtest/internal/report/vendor/uplot). It is a copy,
// not shared, because go:embed reaches only files under the embedding
// package's directory and loadtest/internal/... cannot be imported from
// cmd/; a shared copy would need a third package that both import, for
// about 50 KB. The copies are held to the same bytes by
// TestVendoredUPlotMatchesLoadtest, so updating one means updating both
// (vendor/uplot/update.sh VERSION in each).
package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static vendor/uplot/uPlot.iife.min.js vendor/uplot/uPlot.min.css vendor/uplot/LICENSE
var embedded embed.FS

// AssetPrefix is the path under which the page's files are served:
// AssetPrefix + name, one path segment.
const AssetPrefix = "/ui/"

// contentSecurityPolicy allows the page nothing but its own origin: its
// scripts, styles, images and API requests. uPlot styles its elements
// through the CSSOM (element.style), which style-src does not restrict.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// file is one served file with what its answer needs.
type file struct {
	body        []byte
	contentType string
	etag        string
}

// assets maps the names under AssetPrefix to the embedded files.
var assets = map[string]string{
	"app.js":            "static/app.js",
	"app.css":           "static/app.css",
	"favicon.svg":       "static/favicon.svg",
	"uPlot.iife.min.js": "vendor/uplot/uPlot.iife.min.js",
	"uPlot.min.css":     "vendor/uplot/uPlot.min.css",
	"uPlot-LICENSE.txt": "vendor/uplot/LICENSE",
}

var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".txt":  "text/plain; charset=utf-8",
}

// Handler returns the handler of the dashboard: GET or HEAD "/" answers
// the page, AssetPrefix + name one of its files. Any other path, and a
// name it does not hold, goes to notFound (httpapi answers its 404
// problem). Files are revalidated by ETag (their content hash), so a new
// binary's files replace the old ones in browsers at once.
func Handler(notFound http.Handler) http.Handler {
	index := load("static/index.html")
	files := make(map[string]file, len(assets))
	for name, p := range assets {
		files[name] = load(p)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := index, r.URL.Path == "/"
		if name, isAsset := strings.CutPrefix(r.URL.Path, AssetPrefix); isAsset {
			f, ok = files[name]
		}
		if !ok {
			notFound.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", f.contentType)
		h.Set("ETag", f.etag)
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// ServeContent answers HEAD, ranges and If-None-Match; a zero
		// modification time leaves Last-Modified out.
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
	})
}

// load reads an embedded file. The files are compiled in, so a missing
// one is a broken build, not an I/O error.
func load(p string) file {
	body, err := fs.ReadFile(embedded, p)
	if err != nil {
		panic(fmt.Sprintf("BUG: cannot read embedded dashboard file %s: %v", p, err))
	}
	ct, ok := contentTypes[path.Ext(p)]
	if p == "vendor/uplot/LICENSE" {
		ct, ok = contentTypes[".txt"], true
	}
	if !ok {
		panic(fmt.Sprintf("BUG: dashboard file %s has no content type", p))
	}
	sum := sha256.Sum256(body)
	return file{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
}
