package workload

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"time"
)

// Query kinds.
const (
	QueryLatest   = "query.latest"   // /v1/events?type=T&limit=N: the newest N of the last hour
	QueryWindow   = "query.window"   // /v1/events over a window ending now
	QueryCounts   = "query.counts"   // /v1/counts per minute over the last hour
	QueryTimeline = "query.timeline" // /v1/timeline/{user}?limit=N: a social user's newest posts
)

// QueryKinds lists the kinds, in a fixed order.
var QueryKinds = []string{QueryLatest, QueryWindow, QueryCounts, QueryTimeline}

// QueryConfig shapes the query mix.
type QueryConfig struct {
	Seed uint64
	// Types are the event types queried, Weights their weights (the
	// event mix's, so popular types are queried more).
	Types   []string
	Weights []float64
	// Mix weighs the kinds; names are QueryKinds.
	Mix []Weight
	// LatestN is the limit of latest-N queries.
	LatestN int
	// WindowMin and WindowMax bound a window query's length; its events
	// are paged at most WindowLimit per query.
	WindowMin, WindowMax time.Duration
	WindowLimit          int
	// CountsWindow is how far back a counts query reaches (per minute, up
	// to its start); 0 is the server's default, the last hour.
	CountsWindow time.Duration
	// Run and TimelineUsers name the users whose timelines are read
	// (UserName(Run, n), n uniform in [0, TimelineUsers)): the social
	// workload's; TimelineLimit is the page size.
	Run           string
	TimelineUsers int
	TimelineLimit int
}

// DefaultQueryMix is latest-N, windows and counts in 5:3:2.
var DefaultQueryMix = []Weight{{QueryLatest, 5}, {QueryWindow, 3}, {QueryCounts, 2}}

// Validate says what is wrong with c.
func (c *QueryConfig) Validate() error {
	var errs []error
	if len(c.Types) == 0 || len(c.Types) != len(c.Weights) {
		errs = append(errs, errors.New("BUG: query types and weights must be set, one weight per type"))
	}
	known := map[string]bool{}
	for _, k := range QueryKinds {
		known[k] = true
	}
	for _, m := range c.Mix {
		if !known[m.Name] {
			errs = append(errs, fmt.Errorf("query kind %q: unknown (known: %v)", m.Name, QueryKinds))
		}
	}
	if len(c.Mix) == 0 {
		errs = append(errs, errors.New("query mix is empty"))
	}
	for _, m := range c.Mix {
		if m.Name == QueryTimeline && c.TimelineUsers < 1 {
			errs = append(errs, errors.New("timeline queries need the social workload's users"))
		}
		if m.Name == QueryTimeline && (c.TimelineLimit < 1 || c.TimelineLimit > 1000) {
			errs = append(errs, fmt.Errorf("timeline limit %d: must be 1 to 1000", c.TimelineLimit))
		}
	}
	if c.LatestN < 1 || c.LatestN > 10000 {
		errs = append(errs, fmt.Errorf("latest-N limit %d: must be 1 to 10000", c.LatestN))
	}
	if c.WindowMin <= 0 || c.WindowMax < c.WindowMin || c.WindowMax > 24*time.Hour {
		errs = append(errs, fmt.Errorf("query window %s to %s: need 0 < min <= max <= 24h", c.WindowMin, c.WindowMax))
	}
	if c.CountsWindow < 0 || c.CountsWindow > 31*24*time.Hour {
		errs = append(errs, fmt.Errorf("counts window %s: must be 0 (the last hour) to 744h", c.CountsWindow))
	}
	if c.WindowLimit < 1 || c.WindowLimit > 10000 {
		errs = append(errs, fmt.Errorf("window limit %d: must be 1 to 10000", c.WindowLimit))
	}
	return errors.Join(errs...)
}

// Query is one generated query.
type Query struct {
	Seq    int64
	Kind   string
	Type   string
	Window time.Duration // of a window query, or a counts query (0: the last hour)
	Limit  int
	User   string // of a timeline query
}

// QueryGen makes queries; not safe for concurrent use.
type QueryGen struct {
	cfg       QueryConfig
	rng       *rand.Rand
	kinds     picker
	typePick  picker
	kindNames []string
}

// NewQueryGen validates cfg and returns its generator.
func NewQueryGen(cfg QueryConfig) (*QueryGen, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid query workload: %w", err)
	}
	g := &QueryGen{cfg: cfg, rng: newRand(cfg.Seed, 2), typePick: newPicker(cfg.Weights)}
	var w []float64
	for _, m := range cfg.Mix {
		g.kindNames = append(g.kindNames, m.Name)
		w = append(w, m.Weight)
	}
	g.kinds = newPicker(w)
	return g, nil
}

// Next returns query seq; call it with seq 0, 1, 2, ... in order.
func (g *QueryGen) Next(seq int64) Query {
	kind := g.kindNames[g.kinds.pick(g.rng)]
	typ := g.cfg.Types[g.typePick.pick(g.rng)]
	span := g.cfg.WindowMin + time.Duration(g.rng.Float64()*float64(g.cfg.WindowMax-g.cfg.WindowMin))
	var user int32
	if g.cfg.TimelineUsers > 0 {
		user = int32(g.rng.IntN(g.cfg.TimelineUsers))
	}
	q := Query{Seq: seq, Kind: kind, Type: typ}
	switch kind {
	case QueryLatest:
		q.Limit = g.cfg.LatestN
	case QueryWindow:
		q.Window = span.Truncate(time.Millisecond)
		q.Limit = g.cfg.WindowLimit
	case QueryCounts:
		q.Window = g.cfg.CountsWindow
	case QueryTimeline:
		q.Type = ""
		q.User = UserName(g.cfg.Run, user)
		q.Limit = g.cfg.TimelineLimit
	}
	return q
}

// Path returns the query's path and query string, for a start at now.
func (q *Query) Path(now time.Time) string {
	v := url.Values{"type": {q.Type}}
	switch q.Kind {
	case QueryLatest:
		v.Set("limit", strconv.Itoa(q.Limit))
		return "/v1/events?" + v.Encode()
	case QueryWindow:
		to := now.UTC()
		v.Set("from", to.Add(-q.Window).Format(time.RFC3339Nano))
		v.Set("to", to.Format(time.RFC3339Nano))
		v.Set("limit", strconv.Itoa(q.Limit))
		return "/v1/events?" + v.Encode()
	case QueryCounts:
		v.Set("step", "1m")
		if q.Window > 0 {
			to := now.UTC()
			v.Set("from", to.Add(-q.Window).Format(time.RFC3339Nano))
			v.Set("to", to.Format(time.RFC3339Nano))
		}
		return "/v1/counts?" + v.Encode()
	case QueryTimeline:
		return "/v1/timeline/" + url.PathEscape(q.User) + "?limit=" + strconv.Itoa(q.Limit)
	}
	panic("BUG: query of unknown kind " + q.Kind)
}
