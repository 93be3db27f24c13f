package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/cmd/internal/apitest"
	"github.com/eventide/eventide/internal/natsembed"
	"github.com/eventide/eventide/internal/natstest"
	"github.com/eventide/eventide/internal/tail"
	"github.com/eventide/eventide/reader"
	"github.com/eventide/eventide/writer"
)

type dlqBody struct {
	DeadLetters []struct {
		Seq             uint64 `json:"seq"`
		Time            string `json:"time"`
		Type            string `json:"type"`
		Reason          string `json:"reason"`
		Error           string `json:"error"`
		OriginalSubject string `json:"original_subject"`
		StreamSeq       uint64 `json:"stream_seq"`
		Body            string `json:"body"`
		Encoding        string `json:"encoding"`
		TruncatedFrom   int    `json:"truncated_from"`
	} `json:"dead_letters"`
	NextPage *string `json:"next_page"`
}

// rejected is what dlqFixture publishes: each is refused by the real
// writer and dead-lettered, in this order.
var rejected = []struct {
	subject string
	body    []byte
	reason  string
}{
	{"events.click", []byte("not json"), "malformed_json"},
	{"events.view", []byte(`{"data":{}}`), "missing_time"},
	{"events.click", []byte{0xff, 0xfe, '{', 0x00}, "malformed_json"},
	{"events.click", []byte(`{"time":"yesterday"}`), "invalid_time"},
	{"events.Bad", []byte(`{"time":1}`), "invalid_type"},
}

// dlqFixture is newFixture's store with an embedded NATS server and the
// real writer in front of it, after the writer has dead-lettered every
// message of rejected. publishedAt is a time before any of them.
func dlqFixture(t *testing.T) (f *fixture, js jetstream.JetStream, publishedAt time.Time) {
	return dlqFixtureFor(t, writer.DefaultDLQStream)
}

// dlqFixtureFor is dlqFixture with the writer and /v1/dlq on the
// dead-letter stream dlqStream (--dlq-stream).
func dlqFixtureFor(t *testing.T, dlqStream string) (f *fixture, js jetstream.JetStream, publishedAt time.Time) {
	t.Helper()
	ns, err := natsembed.Start(natsembed.Config{Listen: "127.0.0.1:0", StoreDir: filepath.Join(t.TempDir(), "nats")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { natsembed.Stop(ns) })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err = jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	f = newFixture(t, reader.Options{})
	f.tail = tail.New(tail.Options{}, 0)
	f.js = js
	w, err := writer.New(t.Context(), nc, f.db, writer.Config{Logger: slog.New(slog.DiscardHandler), DLQStream: dlqStream,
		OnStored: f.tail.WriterHook()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	reg := NewRegistry()
	dl, err := NewDeadLetters(js, dlqStream, reg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := reader.New(f.db, reader.Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := reader.NewTimelines(f.db, reader.TimelineOptions{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHandler(Config{Reader: r, Timelines: tl, Health: NewHealth(), Registry: reg, DeadLetters: dl,
		Freshness: writerFreshness(w), TimelineFreshness: fixedFreshness, Tail: f.tail,
		Stats: StatsFunc(func(context.Context) (Stats, error) {
			return Stats{Storage: StorageStatsOf(f.db.Metrics()), Consumers: []ConsumerStats{ConsumerStatsOf("writer", writerFreshness(w).Freshness()[0])}}, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	f.h, f.writer = h, w
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)

	publishedAt = time.Now().Add(-time.Second)
	for _, m := range rejected {
		if _, err := js.Publish(t.Context(), m.subject, m.body); err != nil {
			t.Fatal(err)
		}
	}
	s, err := js.Stream(t.Context(), dlqStream)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info, err := s.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == uint64(len(rejected)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the writer dead-lettered %d of %d messages in 20s", info.State.Msgs, len(rejected))
		}
	}
	return f, js, publishedAt
}

func TestDLQ(t *testing.T) {
	f, _, publishedAt := dlqFixture(t)
	var got dlqBody
	get(t, f, "/v1/dlq", 200, "application/json", &got)
	if len(got.DeadLetters) != len(rejected) || got.NextPage != nil {
		t.Fatalf("got %d dead letters, next_page %v; want %d and none", len(got.DeadLetters), got.NextPage, len(rejected))
	}
	for i, dl := range got.DeadLetters {
		want := rejected[i]
		wantType := strings.TrimPrefix(want.subject, "events.")
		if wantType == "Bad" {
			wantType = "unknown"
		}
		body := dl.Body
		if dl.Encoding == "base64" {
			b, err := base64.StdEncoding.DecodeString(dl.Body)
			if err != nil {
				t.Fatal(err)
			}
			body = string(b)
		}
		at, err := time.Parse(time.RFC3339Nano, dl.Time)
		if dl.Seq != uint64(i+1) || dl.StreamSeq != uint64(i+1) || dl.Type != wantType || dl.Reason != want.reason ||
			!strings.HasPrefix(dl.Error, want.reason+": ") || dl.OriginalSubject != want.subject || body != string(want.body) ||
			err != nil || at.Before(publishedAt) || dl.TruncatedFrom != 0 {
			t.Errorf("dead letter %d = %+v, want %s from %s with body %q", i, dl, want.reason, want.subject, want.body)
		}
		if wantEnc := map[bool]string{true: "", false: "base64"}[i != 2]; dl.Encoding != wantEnc {
			t.Errorf("dead letter %d: encoding %q, want %q", i, dl.Encoding, wantEnc)
		}
	}

	// Paging by two, filtered by type: clicks are dead letters 1, 3 and 4.
	var seqs []uint64
	page := ""
	for pages := 0; ; pages++ {
		if pages > len(rejected) {
			t.Fatal("more pages than dead letters")
		}
		get(t, f, "/v1/dlq?type=click&limit=2&page="+page, 200, "application/json", &got)
		for _, dl := range got.DeadLetters {
			seqs = append(seqs, dl.Seq)
		}
		if got.NextPage == nil {
			break
		}
		page = *got.NextPage
	}
	if fmt.Sprint(seqs) != "[1 3 4]" {
		t.Errorf("type=click pages: sequences %v, want [1 3 4]", seqs)
	}

	// Windows: all of them are after publishedAt, none after now.
	now := time.Now().Add(time.Second)
	for _, tt := range []struct {
		query string
		want  int
	}{
		{"from=" + url.QueryEscape(publishedAt.Format(time.RFC3339Nano)), len(rejected)},
		{"from=" + url.QueryEscape(now.Format(time.RFC3339Nano)), 0},
		{"from=9999-12-31T23:59:59Z", 0},             // past JetStream's Unix nanoseconds
		{"from=1000-01-01T00:00:00Z", len(rejected)}, // before them
		{"to=" + url.QueryEscape(publishedAt.Format(time.RFC3339Nano)), 0},
		{"type=view&to=" + url.QueryEscape(now.Format(time.RFC3339Nano)), 1},
		{"type=signup", 0},
	} {
		get(t, f, "/v1/dlq?"+tt.query, 200, "application/json", &got)
		if len(got.DeadLetters) != tt.want || got.NextPage != nil {
			t.Errorf("%s: %d dead letters, next_page %v; want %d and none", tt.query, len(got.DeadLetters), got.NextPage, tt.want)
		}
	}

	for _, tt := range []struct{ query, detail string }{
		{"page=abc", `parameter page: "abc" is not a page token of /v1/dlq`},
		{"page=0", `parameter page: "0" is not a page token of /v1/dlq`},
		{"type=Click", "parameter type: "},
		{"type=a..b", `parameter type: "a..b" has an empty dot-separated token`},
		{"type=.a", `parameter type: ".a" has an empty dot-separated token`},
		{"limit=1001", "parameter limit: 1001 is out of range; use 1 to 1000"},
		{"step=1m", `unknown parameter "step"; this endpoint accepts type, from, to, limit, page`},
	} {
		var p problemBody
		get(t, f, "/v1/dlq?"+tt.query, 400, "application/problem+json", &p)
		if !strings.HasPrefix(p.Detail, tt.detail) {
			t.Errorf("%s: detail %q, want %q", tt.query, p.Detail, tt.detail)
		}
	}

	for _, q := range nastyQueries {
		checkRouteAnswer(t, f.h, "/v1/dlq", q)
	}

	resp, err := f.srv.Client().Get(f.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf(`eventide_dlq_messages{stream="EVENTS_DLQ"} %d`, len(rejected)); !strings.Contains(string(metrics), want) {
		t.Errorf("/metrics lacks %s", want)
	}
}

// TestDLQOtherStream: with a --dlq-stream other than the default, whose
// subjects are dlq.<name>.>, /v1/dlq lists the dead letters and filters
// and names their types as with the default.
func TestDLQOtherStream(t *testing.T) {
	f, _, _ := dlqFixtureFor(t, "OTHER_DLQ")
	var got dlqBody
	get(t, f, "/v1/dlq", 200, "application/json", &got)
	if len(got.DeadLetters) != len(rejected) {
		t.Fatalf("got %d dead letters, want %d", len(got.DeadLetters), len(rejected))
	}
	get(t, f, "/v1/dlq?type=click", 200, "application/json", &got)
	var seqs []uint64
	for _, dl := range got.DeadLetters {
		seqs = append(seqs, dl.Seq)
		if dl.Type != "click" {
			t.Errorf("dead letter %d: type %q, want click", dl.Seq, dl.Type)
		}
	}
	if fmt.Sprint(seqs) != "[1 3 4]" {
		t.Errorf("type=click: sequences %v, want [1 3 4]", seqs)
	}
}

// TestDLQWithoutStream: a handler with no DeadLetters answers 404 on
// /v1/dlq.
func TestDLQWithoutStream(t *testing.T) {
	f := newFixture(t, reader.Options{})
	var p problemBody
	get(t, f, "/v1/dlq", 404, "application/problem+json", &p)
}

// TestDeadLettersNATSDown: while the NATS connection is down /v1/dlq
// answers 503 with Retry-After (http-api.md), not a 500, and it lists
// again once the connection is back.
func TestDeadLettersNATSDown(t *testing.T) {
	storeDir := filepath.Join(t.TempDir(), "nats")
	ns, err := natsembed.Start(natsembed.Config{Listen: "127.0.0.1:0", StoreDir: storeDir})
	if err != nil {
		t.Fatal(err)
	}
	clientURL := ns.ClientURL()
	nc, err := nats.Connect(clientURL, nats.MaxReconnects(-1), nats.ReconnectWait(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: writer.DefaultDLQStream, Subjects: []string{"dlq.events.>"}}); err != nil {
		t.Fatal(err)
	}
	dl, err := NewDeadLetters(js, writer.DefaultDLQStream, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureWith(t, reader.Options{}, func(c *Config) { c.DeadLetters = dl })

	status := func() (int, string, []byte) {
		t.Helper()
		req := httptest.NewRequest("GET", "/v1/dlq", nil)
		rec := httptest.NewRecorder()
		f.h.ServeHTTP(rec, req)
		apitest.CheckAgainstSpec(t, req, rec.Code, rec.Header(), rec.Body.Bytes())
		return rec.Code, rec.Header().Get("Retry-After"), rec.Body.Bytes()
	}
	if code, _, body := status(); code != 200 {
		t.Fatalf("with NATS up: %d %s", code, body)
	}

	natsembed.Stop(ns)
	for deadline := time.Now().Add(10 * time.Second); nc.IsConnected(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the connection still says connected 10s after the server stopped")
		}
	}
	if code, retry, body := status(); code != 503 || retry == "" {
		t.Errorf("with NATS down: %d, Retry-After %q, %s; want 503 with Retry-After", code, retry, body)
	}

	ns, err = natsembed.Start(natsembed.Config{Listen: strings.TrimPrefix(clientURL, "nats://"), StoreDir: storeDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { natsembed.Stop(ns) })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if code, _, _ := status(); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			code, _, body := status()
			t.Fatalf("10s after NATS came back: %d %s", code, body)
		}
	}
}

// freezableProxy forwards TCP connections to a NATS server and can
// freeze them: while frozen it holds every byte in both directions, as
// a SIGSTOPped server would (the connection stays up, nothing answers).
// Thawing delivers what was held, in order.
type freezableProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cond   *sync.Cond
	frozen bool
	// freezeAt, when set, freezes the proxy at the first chunk holding
	// it, before that chunk goes through.
	freezeAt []byte
}

func newFreezableProxy(t *testing.T, target string) *freezableProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezableProxy{ln: ln, target: target}
	p.cond = sync.NewCond(&p.mu)
	var conns sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		p.setFrozen(false)
		conns.Wait()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			closeBoth := sync.OnceFunc(func() { c.Close(); s.Close() })
			t.Cleanup(closeBoth)
			conns.Add(2)
			go func() { defer conns.Done(); p.pipe(s, c); closeBoth() }()
			go func() { defer conns.Done(); p.pipe(c, s); closeBoth() }()
		}
	}()
	return p
}

func (p *freezableProxy) url() string { return "nats://" + p.ln.Addr().String() }

func (p *freezableProxy) setFrozen(frozen bool) {
	p.mu.Lock()
	p.frozen = frozen
	p.freezeAt = nil
	p.mu.Unlock()
	p.cond.Broadcast()
}

// freezeWhenSeen freezes the proxy when pattern next goes through it.
func (p *freezableProxy) freezeWhenSeen(pattern string) {
	p.mu.Lock()
	p.freezeAt = []byte(pattern)
	p.mu.Unlock()
}

// pipe copies from src to dst, holding each chunk while frozen.
func (p *freezableProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if p.freezeAt != nil && bytes.Contains(buf[:n], p.freezeAt) {
				p.frozen, p.freezeAt = true, nil
			}
			for p.frozen {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestDeadLettersNATSFrozen: against a NATS server that keeps the
// connection up but answers nothing (SIGSTOPped), /v1/dlq answers 503
// problem+json naming NATS, with Retry-After, before the request's
// timeout runs out (http-api.md), rather than waiting for the timeout
// and answering a query-timeout or a 500; and the consumer it asked for
// is removed once NATS answers again.
func TestDeadLettersNATSFrozen(t *testing.T) {
	ns, err := natsembed.Start(natsembed.Config{Listen: "127.0.0.1:0", StoreDir: filepath.Join(t.TempDir(), "nats")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { natsembed.Stop(ns) })
	proxy := newFreezableProxy(t, strings.TrimPrefix(ns.ClientURL(), "nats://"))
	_, js := natstest.Connect(t, proxy.url(), nats.NoReconnect())
	stream, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: writer.DefaultDLQStream, Subjects: []string{"dlq.events.>"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(t.Context(), "dlq.events.click", []byte("not json")); err != nil {
		t.Fatal(err)
	}
	dl, err := NewDeadLetters(js, writer.DefaultDLQStream, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureWith(t, reader.Options{}, func(c *Config) { c.DeadLetters = dl })
	request := func(timeout time.Duration) (*httptest.ResponseRecorder, time.Duration) {
		t.Helper()
		req := httptest.NewRequest("GET", "/v1/dlq?timeout="+timeout.String(), nil)
		rec := httptest.NewRecorder()
		start := time.Now()
		f.h.ServeHTTP(rec, req)
		took := time.Since(start)
		apitest.CheckAgainstSpec(t, req, rec.Code, rec.Header(), rec.Body.Bytes())
		return rec, took
	}
	if rec, _ := request(5 * time.Second); rec.Code != 200 {
		t.Fatalf("with NATS answering: %d %s", rec.Code, rec.Body)
	}

	// NATS stops answering before the request, or once the consumer
	// exists, at the fetch of its messages.
	for _, freeze := range []struct {
		name string
		at   func()
	}{
		{"before the request", func() { proxy.setFrozen(true) }},
		{"at the fetch", func() { proxy.freezeWhenSeen("CONSUMER.MSG.NEXT") }},
	} {
		freeze.at()
		const timeout = 2 * time.Second
		rec, took := request(timeout)
		var p problemBody
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
			t.Fatalf("frozen %s: answer %d %q: %v", freeze.name, rec.Code, rec.Body, err)
		}
		if rec.Code != 503 || rec.Header().Get("Content-Type") != "application/problem+json" || rec.Header().Get("Retry-After") == "" ||
			p.Type != "about:blank" || !strings.Contains(p.Detail, "NATS did not answer") || !strings.Contains(p.Detail, writer.DefaultDLQStream) {
			t.Errorf("with NATS frozen %s: %d, Retry-After %q, %+v; want 503 about:blank with Retry-After, naming NATS and the stream", freeze.name, rec.Code, rec.Header().Get("Retry-After"), p)
		}
		t.Logf("with NATS frozen %s, after %s: %d %s", freeze.name, took, rec.Code, p.Detail)
		if took >= timeout {
			t.Errorf("with NATS frozen %s the answer took %s, want it within the request's timeout of %s", freeze.name, took, timeout)
		}

		// Once NATS answers again, the consumer the request asked for
		// is gone well before its inactive threshold would remove it.
		proxy.setFrozen(false)
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			info, err := stream.Info(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if info.State.Consumers == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("frozen %s: %d consumers on %s 20s after NATS answered again, want none", freeze.name, info.State.Consumers, writer.DefaultDLQStream)
			}
		}
	}
	dl.waitCleanups()
	if rec, _ := request(5 * time.Second); rec.Code != 200 {
		t.Fatalf("after NATS answered again: %d %s", rec.Code, rec.Body)
	}
}
