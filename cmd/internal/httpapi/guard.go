package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/eventide/eventide/cmd/internal/dashboard"
)

// DefaultMaxQueryTimeout is Config.MaxQueryTimeout when it is zero: the
// longest a data request may run, and how long it runs without a timeout
// parameter.
const DefaultMaxQueryTimeout = 30 * time.Second

// openPaths answer without the bearer token: the probes of an orchestrator,
// which carry no secret; the spec, which holds no data and which a
// client needs to learn how to authenticate; and the dashboard's page,
// which a browser loads before the page can ask for the token (its files,
// under dashboard.AssetPrefix, are open too: isOpenPath). None holds data.
var openPaths = []string{"/livez", "/readyz", "/openapi.yaml", "/"}

// isOpenPath reports whether p answers without the bearer token: one of
// openPaths, or a single clean segment under dashboard.AssetPrefix.
func isOpenPath(p string) bool {
	if slices.Contains(openPaths, p) {
		return true
	}
	name, ok := strings.CutPrefix(p, dashboard.AssetPrefix)
	return ok && name != "" && !strings.Contains(name, "/") && path.Clean(p) == p
}

// errQueryTimeout is the cause of a data request's context when its
// timeout (the parameter, or the server's maximum) runs out.
var errQueryTimeout = errors.New("the query ran out of time")

// requireToken answers 401 to every request outside openPaths that does
// not carry "Authorization: Bearer <token>". The token is compared in
// constant time (over SHA-256 digests, so its length does not leak
// either).
func requireToken(token string, h http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isOpenPath(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		auth := r.Header.Get("Authorization")
		scheme, got, ok := strings.Cut(auth, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			w.Header().Set("WWW-Authenticate", `Bearer realm="eventide"`)
			detail := "this server requires a bearer token; send the header Authorization: Bearer <token> (the --http-token of the server)"
			if auth != "" {
				detail = "the Authorization header is not of the form Bearer <token>; send Authorization: Bearer <token>"
			}
			writeProblem(w, problem{Type: ProblemUnauthorized, Title: "Unauthorized", Status: http.StatusUnauthorized, Detail: detail})
			return
		}
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="eventide", error="invalid_token"`)
			writeProblem(w, problem{Type: ProblemUnauthorized, Title: "Unauthorized", Status: http.StatusUnauthorized,
				Detail: "the bearer token is not this server's; check the token the client sends against the server's --http-token"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// corsHeaders lets the browsers of origins read the API: a request whose
// Origin is one of them gets it echoed in Access-Control-Allow-Origin,
// and its preflight (OPTIONS with Access-Control-Request-Method) is
// answered 204 here, before the token check, as browsers send preflights
// without credentials. Any other origin gets no CORS header at all, so
// the browser keeps the answer from its page.
func corsHeaders(origins []string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The answer depends on Origin whether or not it matches: a
		// cache must not hand one origin's answer to another.
		hdr := w.Header()
		hdr.Add("Vary", "Origin")
		origin := r.Header.Get("Origin")
		if origin == "" || !slices.Contains(origins, origin) {
			h.ServeHTTP(w, r)
			return
		}
		hdr.Set("Access-Control-Allow-Origin", origin)
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			hdr.Set("Access-Control-Allow-Methods", "GET, HEAD")
			hdr.Set("Access-Control-Allow-Headers", "Authorization, Last-Event-ID")
			hdr.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// withTimeout runs a data route under a deadline: the request's timeout
// parameter (a Go duration, at most max), or max without one. The
// route's own parameter parsing accepts "timeout" and ignores it.
func withTimeout(max time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, pr := parseTimeout(queryParam(r, "timeout"), max)
		if pr != nil {
			writeProblem(w, *pr)
			return
		}
		ctx, cancel := context.WithTimeoutCause(r.Context(), d, errQueryTimeout)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// parseTimeout parses the values of the timeout parameter: absent or
// empty is max; otherwise a positive Go duration no longer than max.
func parseTimeout(values []string, max time.Duration) (time.Duration, *problem) {
	if len(values) > 1 {
		pr := badParameter(fmt.Sprintf("parameter timeout is given %d times; give it once", len(values)))
		return 0, &pr
	}
	if len(values) == 0 || values[0] == "" {
		return max, nil
	}
	s := values[0]
	d, err := time.ParseDuration(s)
	if err != nil {
		pr := badParameter(fmt.Sprintf("parameter timeout: %q is not a duration such as 500ms, 5s or 1m", s))
		return 0, &pr
	}
	if d <= 0 {
		pr := badParameter(fmt.Sprintf("parameter timeout: %s is not positive; use a duration up to %s", d, max))
		return 0, &pr
	}
	if d > max {
		pr := badParameter(fmt.Sprintf("parameter timeout: %s is more than this server's maximum of %s (--max-query-timeout); use at most %s", d, max, max))
		return 0, &pr
	}
	return d, nil
}

// timedOut reports whether r's context ended because its timeout ran out
// (not because the client left).
func timedOut(r *http.Request) bool {
	return errors.Is(context.Cause(r.Context()), errQueryTimeout)
}

// writeQueryTimeout answers a data request whose timeout ran out.
func writeQueryTimeout(w http.ResponseWriter, r *http.Request) {
	d := "the server's maximum"
	if v := r.URL.Query().Get("timeout"); v != "" {
		d = v
	}
	writeProblem(w, problem{Type: ProblemQueryTimeout, Title: "Query timed out", Status: http.StatusServiceUnavailable,
		Detail: fmt.Sprintf("the query did not finish within its timeout (%s); narrow the query (a shorter window, a smaller limit) or raise the timeout parameter up to the server's maximum", d)})
}
