package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	eventideapi "github.com/eventide/eventide/api"
	"github.com/eventide/eventide/cmd/internal/dashboard"
	"github.com/eventide/eventide/reader"
)

// Config says what NewHandler serves.
type Config struct {
	// Reader answers /v1/events, /v1/events/{id}, /v1/counts,
	// /v1/types/top and /v1/slice. Required.
	Reader *reader.Reader
	// Health answers /readyz. Required.
	Health *Health
	// Registry is served on /metrics and receives the HTTP metrics.
	// Required.
	Registry *prometheus.Registry
	// Logger gets request failures (error) and an access line per request
	// (debug). Defaults to discarding.
	Logger *slog.Logger
	// DeadLetters answers /v1/dlq. Optional: without it, /v1/dlq answers
	// 404.
	DeadLetters *DeadLetters
	// Timelines answers /v1/timeline/{user} and /v1/users/{user}/followers
	// and /following. Optional: without it (no fan-out worker), they
	// answer 404 saying so.
	Timelines *reader.Timelines
	// Freshness says what /v1/events and /v1/counts reflect: the
	// writer's consumer. TimelineFreshness says what the timeline and
	// follow-graph endpoints reflect: the fan-out worker's consumer.
	// Optional: without one, those responses carry no "freshness".
	Freshness         FreshnessSource
	TimelineFreshness FreshnessSource
	// Stats answers /v1/stats: the storage engine and the consumers
	// feeding it. Optional: without it, /v1/stats answers 404.
	Stats StatsSource
	// Tail answers /v1/events/stream, the live tail. Optional: without
	// it, /v1/events/stream answers 404. TailHeartbeat is how often an
	// idle stream gets a comment line; zero means DefaultTailHeartbeat.
	Tail          TailSource
	TailHeartbeat time.Duration
	// TailWriteTimeout bounds one write to a stream; a client that does
	// not take it in time is cut off. Zero means DefaultTailWriteTimeout.
	TailWriteTimeout time.Duration
	// Now is the clock of default query windows. Defaults to time.Now.
	Now func() time.Time

	// Token, when not empty, is the bearer token every request needs
	// (Authorization: Bearer <Token>) except /livez, /readyz,
	// /openapi.yaml and the dashboard's page / and files under /ui/;
	// others get 401. Empty: no authentication.
	Token string
	// CORSOrigins are the origins (scheme://host[:port]) whose browser
	// pages may read the API. Empty: no CORS headers at all.
	CORSOrigins []string
	// MaxQueryTimeout caps the timeout parameter of the data routes and
	// is their deadline without one. Zero means DefaultMaxQueryTimeout.
	MaxQueryTimeout time.Duration
	// Partial, when set, tracks the shards a data request could not read
	// (cmd/query). Their answer then says "partial": true with the
	// "missing_shards", or is a 503 when the request says complete=true.
	// Nil: the store holds every shard (cmd/ingest).
	Partial PartialTracker
}

// The parameters each endpoint accepts, in the order error messages list
// them.
var (
	eventsParams = []string{"type", "from", "to", "limit", "order", "page", "trace", "timeout", "complete"}
	countsParams = []string{"type", "from", "to", "step", "trace", "timeout", "complete"}
)

// NewHandler returns the handler of Eventide's HTTP API: /livez, /readyz,
// /metrics, /openapi.yaml (the spec, api/openapi.yaml), /v1/events,
// /v1/events/{id}, /v1/events/stream, /v1/counts, /v1/types/top,
// /v1/slice, /v1/stats, /v1/dlq, /v1/timeline/{user} and
// /v1/users/{user}/followers and /following, and the built-in dashboard at
// / and /ui/{asset} (package dashboard). docs/http-api.md describes it.
func NewHandler(cfg Config) (http.Handler, error) {
	if cfg.Reader == nil || cfg.Health == nil || cfg.Registry == nil {
		return nil, errors.New("server.NewHandler: Reader, Health and Registry are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxQueryTimeout < 0 {
		return nil, fmt.Errorf("server.NewHandler: MaxQueryTimeout %s is negative", cfg.MaxQueryTimeout)
	}
	if cfg.MaxQueryTimeout == 0 {
		cfg.MaxQueryTimeout = DefaultMaxQueryTimeout
	}
	m, err := newHTTPMetrics(cfg.Registry)
	if err != nil {
		return nil, err
	}
	a := &api{reader: cfg.Reader, timelines: cfg.Timelines, deadLetters: cfg.DeadLetters, logger: cfg.Logger, now: cfg.Now,
		freshness: cfg.Freshness, timelineFreshness: cfg.TimelineFreshness, statsSource: cfg.Stats,
		tail: cfg.Tail, tailHeartbeat: cfg.TailHeartbeat, tailWriteTimeout: cfg.TailWriteTimeout}
	if a.tailHeartbeat <= 0 {
		a.tailHeartbeat = DefaultTailHeartbeat
	}
	if a.tailWriteTimeout <= 0 {
		a.tailWriteTimeout = DefaultTailWriteTimeout
	}
	table := routeTable(cfg, a)
	mux := http.NewServeMux()
	for _, r := range table {
		// In the spec "/" is the one path "/"; in a ServeMux pattern it
		// would be every path, which is notFound's.
		pattern := r.path
		if pattern == "/" {
			pattern = "/{$}"
		}
		mux.Handle(pattern, m.instrument(r.path, onlyGET(r.h)))
	}
	mux.Handle("/", m.instrument("other", notFound(table)))
	var h http.Handler = canonicalPath(mux)
	if cfg.Token != "" {
		h = requireToken(cfg.Token, h)
	}
	if len(cfg.CORSOrigins) > 0 {
		h = corsHeaders(cfg.CORSOrigins, h)
	}
	return accessLog(cfg.Logger, limitRequestURI(h)), nil
}

// MaxRequestURIBytes bounds a request's path and query string. The
// longest valid request (a 4096-byte user name, every byte
// percent-encoded, or 100 tail types) fits well within it; the HTTP
// server's own limit on the header lines is 1 MB.
const MaxRequestURIBytes = 32 << 10

// limitRequestURI answers 414 to a request whose path and query string
// pass MaxRequestURIBytes, before anything parses them.
func limitRequestURI(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := len(r.URL.EscapedPath()) + len(r.URL.RawQuery); n > MaxRequestURIBytes {
			writeProblem(w, problem{
				Type:   problemAboutBlank,
				Status: http.StatusRequestURITooLong,
				Detail: fmt.Sprintf("the path and query string are %d bytes, more than the %d this server accepts; narrow the request", n, MaxRequestURIBytes),
			})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// canonicalPath answers 404 with problem+json to a path that is not in
// clean form (an empty, "." or ".." segment: "//v1/events",
// "/v1/users/a/../b/followers"), naming the clean path to request instead.
// net/http's ServeMux would answer a redirect with an HTML body, which an
// API client following it silently, or not at all, learns nothing from.
// Paths are compared escaped, as the mux matches them, so an escaped
// slash or dot inside a segment (a user name "a%2F..") is no such segment.
func canonicalPath(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		escaped := r.URL.EscapedPath()
		if clean := cleanPath(escaped); clean != escaped {
			writeProblem(w, problem{
				Type:   problemAboutBlank,
				Status: http.StatusNotFound,
				Detail: fmt.Sprintf("no endpoint at %s: the path has an empty, '.' or '..' segment; request %s", escaped, clean),
			})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// cleanPath is net/http's canonical form of a request path (the one its
// ServeMux redirects to): path.Clean, keeping a trailing slash.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		if len(p) == len(np)+1 && strings.HasPrefix(p, np) {
			np = p
		} else {
			np += "/"
		}
	}
	return np
}

// onlyGET answers 405 to every method but GET and HEAD.
func onlyGET(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeProblem(w, problem{
				Type:   problemAboutBlank,
				Status: http.StatusMethodNotAllowed,
				Detail: fmt.Sprintf("method %s is not allowed on %s; use GET", r.Method, r.URL.Path),
			})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// route is one path of the API and its handler. routeTable is the only
// list of them: the mux, the 404 detail and the test that holds
// api/openapi.yaml to the handler all read it.
type route struct {
	path string // a net/http ServeMux pattern without a method
	h    http.Handler
}

func routeTable(cfg Config, a *api) []route {
	// The data routes run under the timeout parameter's deadline, and
	// report the shards they miss (the complete parameter).
	data := func(h http.HandlerFunc) http.Handler {
		max := cfg.MaxQueryTimeout
		if max == 0 {
			max = DefaultMaxQueryTimeout
		}
		return withTimeout(max, withPartial(cfg.Partial, h))
	}
	dash := dashboard.Handler(http.HandlerFunc(noDashboardFile))
	return []route{
		{"/v1/events", data(a.events)},
		{"/v1/events/{id}", data(a.event)},
		// The stream runs until the client leaves: no timeout.
		{"/v1/events/stream", http.HandlerFunc(a.stream)},
		{"/v1/counts", data(a.counts)},
		{"/v1/types/top", data(a.topTypes)},
		{"/v1/slice", data(a.slice)},
		{"/v1/stats", data(a.stats)},
		{"/v1/dlq", data(a.dlq)},
		{"/v1/timeline/{user}", data(a.timeline)},
		{"/v1/users/{user}/followers", data(a.followers)},
		{"/v1/users/{user}/following", data(a.following)},
		{"/livez", http.HandlerFunc(cfg.Health.serveLivez)},
		{"/readyz", http.HandlerFunc(cfg.Health.serveReadyz)},
		{"/metrics", promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{
			Registry:      cfg.Registry,
			ErrorLog:      slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelError),
			ErrorHandling: promhttp.ContinueOnError,
		})},
		{"/openapi.yaml", http.HandlerFunc(serveOpenAPI)},
		// The built-in dashboard: its page and its files (package
		// dashboard); open without the token, as they hold no data.
		{"/", dash},
		{dashboard.AssetPrefix + "{asset}", dash},
	}
}

// noDashboardFile answers a path under dashboard.AssetPrefix that names
// no file of the dashboard.
func noDashboardFile(w http.ResponseWriter, r *http.Request) {
	writeProblem(w, problem{
		Type:   problemAboutBlank,
		Status: http.StatusNotFound,
		Detail: fmt.Sprintf("no dashboard file at %s; the dashboard is at /", r.URL.Path),
	})
}

// serveOpenAPI answers /openapi.yaml with the spec this binary was built
// with (package api).
func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.Write(eventideapi.OpenAPIYAML())
}

// notFound answers every path the table does not hold, listing those of
// the API and pointing to the dashboard.
func notFound(table []route) http.Handler {
	paths := make([]string, 0, len(table))
	dashboardServed := false
	for _, r := range table {
		if r.path == "/" || strings.HasPrefix(r.path, dashboard.AssetPrefix) {
			dashboardServed = true
			continue
		}
		paths = append(paths, r.path)
	}
	detail := "; the API serves " + strings.Join(paths[:len(paths)-1], ", ") + " and " + paths[len(paths)-1]
	if dashboardServed {
		detail += "; the dashboard is at /"
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, problem{
			Type:   problemAboutBlank,
			Status: http.StatusNotFound,
			Detail: fmt.Sprintf("no endpoint at %s", r.URL.Path) + detail,
		})
	})
}

type api struct {
	reader      *reader.Reader
	timelines   *reader.Timelines
	deadLetters *DeadLetters
	logger      *slog.Logger
	now         func() time.Time

	freshness, timelineFreshness FreshnessSource
	// freshMemo and timelineFreshMemo share the JSON of unchanged
	// positions between requests.
	freshMemo, timelineFreshMemo freshnessMemo
	statsSource                  StatsSource
	tail                         TailSource
	tailHeartbeat                time.Duration
	tailWriteTimeout             time.Duration
	bodies                       bodyBuffers
	// encoded remembers the JSON of the events answered last
	// (events_cache.go).
	encoded encodedEvents
}

// eventJSON is one event as /v1/events returns it.
type eventJSON struct {
	ID     string          `json:"id"`
	Type   string          `json:"type"`
	Time   string          `json:"time"`
	User   string          `json:"user,omitempty"`
	Author string          `json:"author,omitempty"`
	Data   json.RawMessage `json:"data"`
}

func (a *api) events(w http.ResponseWriter, r *http.Request) {
	q, pr := a.eventQuery(r)
	if pr != nil {
		writeProblem(w, *pr)
		return
	}
	fresh := a.freshMemo.of(a.freshness)
	page, err := a.reader.Events(r.Context(), q)
	if err != nil {
		a.queryFailed(w, r, err)
		return
	}
	var trace string
	if q.Trace && page.Trace != nil {
		trace = page.Trace.String()
	}
	buf := a.bodies.get()
	buf = a.appendEventsResponse(buf, page.Events, page.NextPage, trace, fresh)
	page.Release() // encoded: the events are not used again
	a.writeBody(w, r, buf)
	a.bodies.put(buf)
}

func (a *api) eventQuery(r *http.Request) (reader.EventQuery, *problem) {
	var q reader.EventQuery
	p, pr := parseParams(r.URL.RawQuery, eventsParams)
	if pr != nil {
		return q, pr
	}
	if q.Type, pr = p.requiredType(); pr != nil {
		return q, pr
	}
	if q.From, q.To, pr = p.window(a.now()); pr != nil {
		return q, pr
	}
	if q.Limit, pr = p.intParam("limit", reader.DefaultLimit, 1, reader.MaxLimit); pr != nil {
		return q, pr
	}
	order, err := reader.ParseOrder(p.get("order"))
	if err != nil {
		bad := badParameter(fmt.Sprintf("parameter order: %q is not asc or desc", p.get("order")))
		return q, &bad
	}
	q.Order = order
	q.PageToken = p.get("page")
	q.Trace, pr = p.boolParam("trace")
	return q, pr
}

type countPointJSON struct {
	Time  string `json:"time"`
	Count int64  `json:"count"`
}

type countSeriesJSON struct {
	Type   string           `json:"type"`
	Points []countPointJSON `json:"points"`
}

// countsResponse keeps "points" for a one-type request (the shape clients
// had before several types were possible) beside "series".
type countsResponse struct {
	Points    []countPointJSON  `json:"points,omitempty"`
	Series    []countSeriesJSON `json:"series"`
	Trace     string            `json:"trace,omitempty"`
	Freshness *freshnessJSON    `json:"freshness,omitempty"`
}

// MaxCountTypes is the most types one /v1/counts request may name.
const MaxCountTypes = 50

func (a *api) counts(w http.ResponseWriter, r *http.Request) {
	types, q, trace, pr := a.countQuery(r)
	if pr != nil {
		writeProblem(w, *pr)
		return
	}
	fresh := a.freshMemo.of(a.freshness)
	resp := countsResponse{Series: make([]countSeriesJSON, 0, len(types)), Freshness: fresh}
	var total reader.Trace
	for _, typ := range types {
		q.Type = typ
		points, tr, err := a.reader.CountsTrace(r.Context(), q)
		if err != nil {
			a.queryFailed(w, r, err)
			return
		}
		series := countSeriesJSON{Type: typ, Points: make([]countPointJSON, 0, len(points))}
		for _, p := range points {
			series.Points = append(series.Points, countPointJSON{Time: p.Time.UTC().Format(time.RFC3339Nano), Count: p.Count})
		}
		resp.Series = append(resp.Series, series)
		total.Merge(tr)
	}
	if len(types) == 1 {
		resp.Points = resp.Series[0].Points
	}
	if trace {
		resp.Trace = total.String()
	}
	a.writeJSON(w, r, resp)
}

func (a *api) countQuery(r *http.Request) (types []string, q reader.CountQuery, trace bool, pr *problem) {
	p, pr := parseParamsRepeatable(r.URL.RawQuery, countsParams, []string{"type"})
	if pr != nil {
		return nil, q, false, pr
	}
	if types, pr = p.types(MaxCountTypes); pr != nil {
		return nil, q, false, pr
	}
	if len(types) == 0 {
		pr := badParameter("parameter type is required: the event type to query, e.g. type=click; repeat it to count several (type=click&type=view)")
		return nil, q, false, &pr
	}
	if q.From, q.To, pr = p.window(a.now()); pr != nil {
		return nil, q, false, pr
	}
	if q.Step, pr = p.stepParam("step"); pr != nil {
		return nil, q, false, pr
	}
	if pr = checkCountPoints(q.From, q.To, q.Step, len(types)); pr != nil {
		return nil, q, false, pr
	}
	trace, pr = p.boolParam("trace")
	q.Trace = trace
	return types, q, trace, pr
}

// queryFailed answers a reader error: the client's fault is a 4xx that
// says what to change, anything else a 500.
func (a *api) queryFailed(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, reader.ErrInvalidQuery):
		writeProblem(w, badQuery(err.Error()))
	case errors.Is(err, reader.ErrTooManyTombstones):
		writeProblem(w, problem{Type: ProblemTooManyTombstones, Title: "Too many tombstones", Status: http.StatusUnprocessableEntity, Detail: err.Error()})
	case timedOut(r):
		writeQueryTimeout(w, r)
	case r.Context().Err() != nil:
		// The client left; nobody reads an answer.
		a.logger.Debug("query abandoned by the client", "url", r.URL.String(), "err", err)
	default:
		writeInternalError(w, r, a.logger, err)
	}
}

func (a *api) writeJSON(w http.ResponseWriter, r *http.Request, v any) {
	missing, complete := missingShards(r)
	if len(missing) > 0 && complete {
		writePartialAnswer(w, missing)
		return
	}
	body, err := json.Marshal(v)
	if err != nil {
		writeInternalError(w, r, a.logger, fmt.Errorf("cannot encode the response: %w", err))
		return
	}
	a.writeBody(w, r, body)
}

// writeBody answers body, a JSON object, as writeJSON does: marked partial
// when shards were missing, a 503 when the request wanted them all. It
// may append to body.
func (a *api) writeBody(w http.ResponseWriter, r *http.Request, body []byte) {
	missing, complete := missingShards(r)
	if len(missing) > 0 && complete {
		writePartialAnswer(w, missing)
		return
	}
	if len(missing) > 0 {
		body = markPartial(body, missing)
	}
	body = append(body, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	// A known length spares the chunked encoding of bodies past the
	// server's 4 KiB buffer.
	h.Set("Content-Length", strconv.Itoa(len(body)))
	writeOnce(w, r, body)
}
