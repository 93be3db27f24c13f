// Package apitest is the HTTP API test suite that runs against both ways
// of serving it: the all-in-one process (cmd/ingest reading its local
// storage) and the query service (cmd/query reading storage nodes over
// NATS). Each command's tests start their process(es) and call Run with
// the base URL; Run publishes its own data through JetStream, waits until
// it is stored, and checks every data route's status codes, bodies,
// paging and errors, validating each request and response against
// api/openapi.yaml. CheckAgainstSpec (spec.go) is that validation, which
// package httpapi's own tests use too. Only tests import it.
package apitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	eventideapi "github.com/eventide/eventide/api"
)

// Target is a running API and the NATS server of its event stream.
type Target struct {
	// BaseURL is the API's http://host:port.
	BaseURL string
	// NATSURL is where to publish events (stream EVENTS, subjects
	// events.>).
	NATSURL string
	// Prefix makes the suite's event types and users unique, so several
	// runs may share one stream: "a" gives types a_click, a_view, ...
	Prefix string
	// Token is the API's bearer token, when it runs with one: every
	// request carries it, and the suite checks that one without it is
	// refused.
	Token string
}

// Suite's data: per type, eventsPerType events spread over the last
// spanHours hours (several hour buckets, so several partitions and,
// with several shards, several nodes), a follow and a post for the
// timeline routes, and one malformed message for /v1/dlq.
const (
	eventsPerType = 24
	spanHours     = 3
)

var suiteTypes = []string{"click", "view", "buy", "scroll"}

// Run publishes the suite's data and checks every route of the API at
// tg.BaseURL.
func Run(t *testing.T, tg Target) {
	s := &suite{t: t, tg: tg, client: &http.Client{Timeout: 20 * time.Second}, now: time.Now().UTC().Truncate(time.Millisecond)}
	defer s.client.CloseIdleConnections()
	s.publish()
	s.waitStored()
	t.Run("events", s.events)
	t.Run("paging", s.paging)
	t.Run("counts", s.counts)
	t.Run("freshness", s.freshness)
	t.Run("timeline", s.timeline)
	t.Run("dlq", s.dlq)
	t.Run("event_by_id", s.eventByID)
	t.Run("multi_type_counts", s.multiCounts)
	t.Run("top_types", s.topTypes)
	t.Run("slice", s.slice)
	t.Run("stats", s.stats)
	t.Run("tail", s.tail)
	t.Run("errors", s.errors)
	t.Run("health", s.health)
	if tg.Token != "" {
		t.Run("auth", s.auth)
	}
}

type suite struct {
	t      *testing.T
	tg     Target
	client *http.Client
	now    time.Time
	// published[type] lists the data n of its events, newest first.
	published map[string][]int
	// anonymous leaves the token out of requests.
	anonymous bool
}

func (s *suite) typ(name string) string  { return s.tg.Prefix + "_" + name }
func (s *suite) user(name string) string { return s.tg.Prefix + "-" + name }

func (s *suite) window() string {
	from := s.now.Add(-(spanHours + 1) * time.Hour).Format(time.RFC3339Nano)
	to := s.now.Add(time.Second).Format(time.RFC3339Nano)
	return "from=" + url.QueryEscape(from) + "&to=" + url.QueryEscape(to)
}

func (s *suite) publish() {
	t := s.t
	nc, err := nats.Connect(s.tg.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	pub := func(subject, body string) {
		t.Helper()
		if _, err := js.Publish(t.Context(), subject, []byte(body)); err != nil {
			t.Fatalf("publish %s: %v", subject, err)
		}
	}
	s.published = map[string][]int{}
	step := spanHours * time.Hour / eventsPerType
	for ti, name := range suiteTypes {
		typ := s.typ(name)
		for i := range eventsPerType {
			n := ti*1000 + i
			at := s.now.Add(-time.Duration(i)*step - time.Duration(ti)*time.Second)
			pub("events."+typ, fmt.Sprintf(`{"time":%q,"user":"u%d","data":{"n":%d}}`, at.Format(time.RFC3339Nano), i%3, n))
			s.published[typ] = append(s.published[typ], n)
		}
	}
	at := s.now.Add(-time.Minute).Format(time.RFC3339Nano)
	pub("events.follow", fmt.Sprintf(`{"time":%q,"user":%q,"author":%q}`, at, s.user("reader"), s.user("author")))
	pub("events.post", fmt.Sprintf(`{"time":%q,"author":%q,"data":{"text":"hello from %s"}}`, s.now.Add(-30*time.Second).Format(time.RFC3339Nano), s.user("author"), s.tg.Prefix))
	pub("events."+s.typ("click"), "not json")
}

// waitStored polls until every type's events are all readable.
func (s *suite) waitStored() {
	deadline := time.Now().Add(60 * time.Second)
	for _, name := range suiteTypes {
		for {
			var page eventPage
			status, body := s.get("/v1/events?type="+s.typ(name)+"&limit=1000&"+s.window(), &page)
			if status == 200 && len(page.Events) == eventsPerType {
				break
			}
			if time.Now().After(deadline) {
				s.t.Fatalf("events of %s not all stored after 60s: %d %s", s.typ(name), status, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

type eventPage struct {
	Events []struct {
		ID   string          `json:"id"`
		Type string          `json:"type"`
		Time string          `json:"time"`
		User string          `json:"user"`
		Data json.RawMessage `json:"data"`
	} `json:"events"`
	NextPage      string     `json:"next_page"`
	Trace         string     `json:"trace"`
	Freshness     *freshness `json:"freshness"`
	Partial       bool       `json:"partial"`
	MissingShards []int      `json:"missing_shards"`
}

type freshness struct {
	Shards []struct {
		Shard      int    `json:"shard"`
		AppliedSeq uint64 `json:"applied_seq"`
	} `json:"shards"`
}

type problem struct {
	Type   string `json:"type"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// ns returns the data n of each event of a page, in order.
func ns(t *testing.T, p *eventPage) []int {
	t.Helper()
	out := make([]int, 0, len(p.Events))
	for _, e := range p.Events {
		var d struct{ N int }
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatalf("event %s: data %s: %v", e.ID, e.Data, err)
		}
		out = append(out, d.N)
	}
	return out
}

func (s *suite) events(t *testing.T) {
	for _, name := range suiteTypes {
		typ := s.typ(name)
		var page eventPage
		s.mustGet(t, "/v1/events?type="+typ+"&limit=1000&"+s.window(), 200, &page)
		if got := ns(t, &page); !slices.Equal(got, s.published[typ]) {
			t.Errorf("%s newest first: %v, want %v", typ, got, s.published[typ])
		}
		if page.Partial || page.NextPage != "" {
			t.Errorf("%s: partial %v next_page %q on a whole answer", typ, page.Partial, page.NextPage)
		}
		for _, e := range page.Events {
			if e.Type != typ {
				t.Errorf("%s: event of type %s", typ, e.Type)
			}
		}
		s.mustGet(t, "/v1/events?type="+typ+"&limit=1000&order=asc&"+s.window(), 200, &page)
		want := slices.Clone(s.published[typ])
		slices.Reverse(want)
		if got := ns(t, &page); !slices.Equal(got, want) {
			t.Errorf("%s oldest first: %v, want %v", typ, got, want)
		}
	}
	var page eventPage
	s.mustGet(t, "/v1/events?type="+s.typ("click")+"&limit=3&trace=true&complete=true&"+s.window(), 200, &page)
	if len(page.Events) != 3 || page.Trace == "" || page.NextPage == "" {
		t.Errorf("limit=3&trace=true: %d events, trace %q, next_page %q", len(page.Events), page.Trace, page.NextPage)
	}
	// The whole window walks every hour bucket it covers (through
	// cmd/query in one request to the node, whose trace must say so).
	s.mustGet(t, "/v1/events?type="+s.typ("click")+"&limit=1000&trace=true&"+s.window(), 200, &page)
	var partitions int
	if i := strings.Index(page.Trace, " partitions;"); i > 0 {
		fmt.Sscan(page.Trace[strings.LastIndex(page.Trace[:i], " ")+1:i], &partitions)
	}
	if len(page.Events) != eventsPerType || partitions < spanHours+1 {
		t.Errorf("whole window with trace: %d events, trace %q; want %d events from at least %d partitions", len(page.Events), page.Trace, eventsPerType, spanHours+1)
	}
}

func (s *suite) paging(t *testing.T) {
	typ := s.typ("view")
	for _, order := range []string{"desc", "asc"} {
		var got []int
		page := ""
		for i := 0; ; i++ {
			if i > eventsPerType {
				t.Fatalf("%s: paging does not end", order)
			}
			var p eventPage
			target := "/v1/events?type=" + typ + "&limit=5&order=" + order + "&" + s.window()
			if page != "" {
				target += "&page=" + url.QueryEscape(page)
			}
			s.mustGet(t, target, 200, &p)
			got = append(got, ns(t, &p)...)
			if page = p.NextPage; page == "" {
				break
			}
		}
		want := slices.Clone(s.published[typ])
		if order == "asc" {
			slices.Reverse(want)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s pages concatenated: %v, want %v", order, got, want)
		}
	}
}

func (s *suite) counts(t *testing.T) {
	for _, name := range suiteTypes {
		var c struct {
			Points []struct {
				Time  string `json:"time"`
				Count int64  `json:"count"`
			} `json:"points"`
			Freshness *freshness `json:"freshness"`
		}
		s.mustGet(t, "/v1/counts?type="+s.typ(name)+"&step=1h&"+s.window(), 200, &c)
		var sum int64
		for _, p := range c.Points {
			sum += p.Count
		}
		if sum != eventsPerType {
			t.Errorf("%s: counts sum to %d, want %d", s.typ(name), sum, eventsPerType)
		}
	}
}

// freshness: every data answer says what it reflects, and once the
// suite's events are stored every shard's position moves past them
// (at once in the all-in-one; cmd/query may report positions up to a
// quarter second old).
func (s *suite) freshness(t *testing.T) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var page eventPage
		s.mustGet(t, "/v1/events?type="+s.typ("click")+"&limit=1&"+s.window(), 200, &page)
		if page.Freshness == nil || len(page.Freshness.Shards) == 0 {
			t.Fatalf("no freshness in a data answer: %+v", page.Freshness)
		}
		behind := 0
		for _, sh := range page.Freshness.Shards {
			if sh.AppliedSeq == 0 {
				behind++
			}
		}
		if behind == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d shards still at applied_seq 0 10s after the suite's events were stored: %+v", behind, page.Freshness)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *suite) timeline(t *testing.T) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var tl struct {
			Posts []struct {
				Author string          `json:"author"`
				Data   json.RawMessage `json:"data"`
			} `json:"posts"`
		}
		s.mustGet(t, "/v1/timeline/"+s.user("reader"), 200, &tl)
		if len(tl.Posts) == 1 && tl.Posts[0].Author == s.user("author") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timeline of %s after 30s: %+v", s.user("reader"), tl.Posts)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var users struct {
		Users []string `json:"users"`
	}
	s.mustGet(t, "/v1/users/"+s.user("author")+"/followers", 200, &users)
	if !slices.Equal(users.Users, []string{s.user("reader")}) {
		t.Errorf("followers of %s: %v", s.user("author"), users.Users)
	}
	s.mustGet(t, "/v1/users/"+s.user("reader")+"/following", 200, &users)
	if !slices.Equal(users.Users, []string{s.user("author")}) {
		t.Errorf("following of %s: %v", s.user("reader"), users.Users)
	}
}

func (s *suite) dlq(t *testing.T) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var d struct {
			DeadLetters []struct {
				Type   string `json:"type"`
				Reason string `json:"reason"`
				Body   string `json:"body"`
			} `json:"dead_letters"`
		}
		s.mustGet(t, "/v1/dlq?type="+s.typ("click"), 200, &d)
		if len(d.DeadLetters) == 1 && d.DeadLetters[0].Reason == "malformed_json" && d.DeadLetters[0].Body == "not json" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead letters of %s after 30s: %+v", s.typ("click"), d.DeadLetters)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *suite) errors(t *testing.T) {
	for _, tc := range []struct {
		target string
		status int
		detail string
	}{
		{"/v1/events", 400, "type is required"},
		{"/v1/events?type=" + s.typ("click") + "&limit=0", 400, "limit"},
		{"/v1/events?type=" + s.typ("click") + "&bogus=1", 400, "bogus"},
		{"/v1/events?type=" + s.typ("click") + "&complete=maybe", 400, "complete"},
		{"/v1/events?type=" + s.typ("click") + "&timeout=1h", 400, "timeout"},
		{"/v1/counts?type=" + s.typ("click") + "&step=1s&from=2026-01-01T00:00:00Z&to=2026-01-31T00:00:00Z", 400, ""},
		{"/v1/nowhere", 404, "/v1/events"},
	} {
		var p problem
		s.mustGet(t, tc.target, tc.status, &p)
		if p.Status != tc.status || !strings.Contains(p.Detail, tc.detail) {
			t.Errorf("%s: problem %+v, want status %d and a detail naming %q", tc.target, p, tc.status, tc.detail)
		}
	}
}

func (s *suite) auth(t *testing.T) {
	s.anonymous = true
	defer func() { s.anonymous = false }()
	for _, path := range []string{"/v1/events?type=" + s.typ("click"), "/v1/counts?type=" + s.typ("click") + "&step=1m", "/v1/dlq", "/v1/timeline/" + s.user("reader")} {
		var p problem
		s.mustGet(t, path, 401, &p)
		if !strings.HasSuffix(p.Type, "#unauthorized") {
			t.Errorf("%s without the token: problem %+v", path, p)
		}
	}
	var v any
	s.mustGet(t, "/readyz", 200, &v)
}

func (s *suite) health(t *testing.T) {
	for _, path := range []string{"/readyz", "/livez"} {
		var v any
		s.mustGet(t, path, 200, &v)
	}
	resp, err := s.client.Get(s.tg.BaseURL + "/openapi.yaml") // open without the token
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(body, eventideapi.OpenAPIYAML()) {
		t.Errorf("/openapi.yaml: %d, %d bytes; want the embedded spec", resp.StatusCode, len(body))
	}
}

// get fetches path, validates the exchange against the spec and decodes
// a JSON body into out (when not nil).
func (s *suite) get(path string, out any) (int, []byte) {
	t := s.t
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.tg.BaseURL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.tg.Token != "" && !s.anonymous {
		req.Header.Set("Authorization", "Bearer "+s.tg.Token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	CheckAgainstSpec(t, req, resp.StatusCode, resp.Header, body)
	if out != nil && len(body) > 0 {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("GET %s: cannot decode %s: %v", path, body, err)
		}
	}
	return resp.StatusCode, body
}

func (s *suite) mustGet(t *testing.T, path string, status int, out any) {
	t.Helper()
	if got, body := s.get(path, out); got != status {
		t.Fatalf("GET %s: %d %s, want %d", path, got, body, status)
	}
}
