package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventide/eventide/cmd/internal/apitest"
	"github.com/eventide/eventide/internal/tail"
	"github.com/eventide/eventide/reader"
)

// sseMessage is one Server-Sent Events message.
type sseMessage struct {
	id, event, data string
	comment         string
}

// sseClient reads a stream in the background.
type sseClient struct {
	req    *http.Request
	resp   *http.Response
	cancel context.CancelFunc
	msgs   chan sseMessage
	mu     sync.Mutex
	raw    bytes.Buffer // everything read, for the spec check
	done   chan struct{}
}

// openStream GETs target with header and starts reading its messages.
func openStream(t *testing.T, f *fixture, target string, header map[string]string) *sseClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c := &sseClient{req: req, resp: resp, cancel: cancel, msgs: make(chan sseMessage, 1000), done: make(chan struct{})}
	t.Cleanup(c.close)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s %s", target, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	go c.read()
	return c
}

func (c *sseClient) read() {
	defer close(c.done)
	defer close(c.msgs)
	br := bufio.NewReader(c.resp.Body)
	var m sseMessage
	for {
		line, err := br.ReadString('\n')
		c.mu.Lock()
		c.raw.WriteString(line)
		c.mu.Unlock()
		if err != nil {
			return
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			c.msgs <- m
			m = sseMessage{}
		case strings.HasPrefix(line, ":"):
			m.comment = strings.TrimSpace(line[1:])
		default:
			k, v, _ := strings.Cut(line, ": ")
			switch k {
			case "id":
				m.id = v
			case "event":
				m.event = v
			case "data":
				m.data = v
			}
		}
	}
}

// next returns the next message that is not a comment, failing after 20 s.
func (c *sseClient) next(t *testing.T) sseMessage {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case m, ok := <-c.msgs:
			if !ok {
				t.Fatal("the stream ended")
			}
			if m.comment != "" && m.id == "" && m.event == "" && m.data == "" {
				continue
			}
			return m
		case <-deadline:
			t.Fatal("no message within 20s")
		}
	}
}

// close ends the stream and checks what was read against the spec.
func (c *sseClient) close() {
	c.cancel()
	c.resp.Body.Close()
	<-c.done
}

func (c *sseClient) checkSpec(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	apitest.CheckAgainstSpec(t, c.req, c.resp.StatusCode, c.resp.Header, c.raw.Bytes())
}

type streamedEvent struct {
	ID   string         `json:"id"`
	Type string         `json:"type"`
	Time string         `json:"time"`
	Data map[string]int `json:"data"`
}

func decodeStreamed(t *testing.T, m sseMessage) streamedEvent {
	t.Helper()
	var e streamedEvent
	dec := json.NewDecoder(strings.NewReader(m.data))
	dec.DisallowUnknownFields()
	if m.event != "" || m.id == "" || dec.Decode(&e) != nil {
		t.Fatalf("message %+v is not an event", m)
	}
	return e
}

func publishEvent(t *testing.T, f *fixture, typ string, n int) {
	t.Helper()
	body := fmt.Sprintf(`{"time":%q,"data":{"n":%d}}`, time.Now().UTC().Format(time.RFC3339Nano), n)
	if _, err := f.js.Publish(t.Context(), "events."+typ, []byte(body)); err != nil {
		t.Fatal(err)
	}
}

// TestTailThroughNATS: an event published to NATS reaches the stream once
// the writer stored it (it reads back by id), only for the types
// followed; a client that reconnects with Last-Event-ID (or
// last_event_id) gets exactly the events it missed, then the live ones.
func TestTailThroughNATS(t *testing.T) {
	f, _, _ := dlqFixture(t)
	c := openStream(t, f, "/v1/events/stream?type=click", nil)
	publishEvent(t, f, "view", 100)
	publishEvent(t, f, "click", 1)
	m := c.next(t)
	first := decodeStreamed(t, m)
	if first.Type != "click" || first.Data["n"] != 1 {
		t.Fatalf("first event %+v, want click 1 (view is not followed)", first)
	}
	// Sent once stored: it reads back at once.
	var one struct {
		Event     json.RawMessage `json:"event"`
		Freshness *freshnessBody  `json:"freshness"`
	}
	get(t, f, "/v1/events/"+first.ID+"?type=click", 200, "application/json", &one)
	if seq, _ := strconv.ParseUint(m.id, 10, 64); one.Freshness == nil || one.Freshness.Shards[0].AppliedSeq < seq {
		t.Errorf("freshness %+v behind the streamed event's position %s", one.Freshness, m.id)
	}
	c.close()
	c.checkSpec(t)

	// Missed while away: clicks 2, 3, 4 and a view.
	for i := 2; i <= 4; i++ {
		publishEvent(t, f, "click", i)
	}
	publishEvent(t, f, "view", 101)
	for _, resume := range []struct {
		target string
		header map[string]string
	}{
		{"/v1/events/stream?type=click", map[string]string{"Last-Event-ID": m.id}},
		{"/v1/events/stream?type=click&last_event_id=" + m.id, nil},
	} {
		c := openStream(t, f, resume.target, resume.header)
		var got []int
		for len(got) < 3 {
			got = append(got, decodeStreamed(t, c.next(t)).Data["n"])
		}
		if fmt.Sprint(got) != "[2 3 4]" {
			t.Errorf("%s %v: resumed with %v, want [2 3 4]", resume.target, resume.header, got)
		}
		// Then live, with nothing repeated in between.
		publishEvent(t, f, "click", 5)
		if e := decodeStreamed(t, c.next(t)); e.Data["n"] != 5 {
			t.Errorf("%s: after the replay got %+v, want the live click 5", resume.target, e)
		}
		c.close()
		c.checkSpec(t)
	}
	// Every type, resumed from the start of this process: the ring holds
	// everything, in stream order.
	c = openStream(t, f, "/v1/events/stream", map[string]string{"Last-Event-ID": "0"})
	var all []string
	for len(all) < 8 {
		e := decodeStreamed(t, c.next(t))
		all = append(all, fmt.Sprintf("%s%d", e.Type, e.Data["n"]))
	}
	if strings.Join(all, " ") != "view100 click1 click2 click3 click4 view101 click5 click5" {
		t.Errorf("every type from 0: %v", all)
	}
}

// TestTailSlowClient: a client that stops reading is disconnected with an
// error event saying why once its buffer fills, and the server holds no
// more than the buffer for it meanwhile.
func TestTailSlowClient(t *testing.T) {
	const bufferBytes = 256 << 10
	b := tail.New(tail.Options{ClientBuffer: 8, ClientBufferBytes: bufferBytes, Replay: 16}, 0)
	f := newFixtureWith(t, reader.Options{}, func(c *Config) { c.Tail = b })
	conn, err := net.Dial("tcp", f.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/v1/events/stream", nil)
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	// Wait until the handler subscribed, then publish large events while
	// the client reads nothing.
	for deadline := time.Now().Add(10 * time.Second); b.Stats().Clients == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stream did not subscribe")
		}
	}
	data := []byte(`{"pad":"` + strings.Repeat("x", 32<<10) + `"}`)
	published := 0
	for deadline := time.Now().Add(30 * time.Second); b.Stats().SlowDisconnects == 0; published++ {
		if time.Now().After(deadline) || published > 100000 {
			t.Fatalf("after %d events of 32 KiB the client was not disconnected", published)
		}
		ev := tail.Event{Seq: uint64(published + 1), ID: eventID(t, base, published%200), Type: "click", Data: data}
		b.Publish([]tail.Event{ev})
		if st := b.Stats(); st.ReplayEvents > 16 {
			t.Fatalf("the replay ring holds %d events, more than its 16", st.ReplayEvents)
		}
	}
	if st := b.Stats(); st.SlowDisconnects != 1 {
		t.Fatalf("after the disconnect: %+v", st)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	received := bytes.Count(body, []byte("\nid: ")) + bytes.Count(body[:min(len(body), 64)], []byte("id: "))
	tailEnd := string(body[max(0, len(body)-400):])
	if !strings.Contains(tailEnd, "event: error\ndata: {\"reason\":\"slow_client\",\"detail\":") || !strings.HasSuffix(tailEnd, "\n\n") {
		t.Fatalf("the stream does not end with the slow_client error event: ...%q", tailEnd)
	}
	if received >= published {
		t.Errorf("the slow client received %d of %d events; it should have missed some", received, published)
	}
	apitest.CheckAgainstSpec(t, req, resp.StatusCode, resp.Header, body)
	if st := b.Stats(); st.Clients != 0 {
		t.Errorf("after the stream ended: %+v, want no client", st)
	}
}

// FuzzResumePosition: the resume position from the Last-Event-ID header
// and the last_event_id parameter never panics, and what it accepts is a
// whole number that both agree on.
func FuzzResumePosition(f *testing.F) {
	for _, seed := range [][2]string{{"", ""}, {"5", ""}, {"", "5"}, {"5", "5"}, {"5", "6"}, {"18446744073709551615", ""},
		{"18446744073709551616", ""}, {"+1", ""}, {"-1", ""}, {" 1", ""}, {"0x10", ""}, {"", "%zz"}, {"007", "7"}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, header, param string) {
		r, err := http.NewRequest(http.MethodGet, "/v1/events/stream", nil)
		if err != nil {
			t.Skip()
		}
		if header != "" {
			r.Header["Last-Event-Id"] = []string{header}
		}
		p, pr := parseParamsRepeatable("last_event_id="+url.QueryEscape(param), streamParams, []string{"type"})
		if pr != nil {
			t.Fatalf("parse: %+v", pr)
		}
		after, resume, pr := resumePosition(r, p)
		if pr != nil {
			if pr.Status != 400 || pr.Detail == "" {
				t.Fatalf("problem %+v", pr)
			}
			return
		}
		if (header != "" || param != "") != resume {
			t.Fatalf("header %q param %q: resume %v", header, param, resume)
		}
		for _, s := range []string{header, param} {
			if s == "" {
				continue
			}
			if n, err := strconv.ParseUint(s, 10, 64); err != nil || n != after {
				t.Fatalf("header %q param %q: accepted %d", header, param, after)
			}
		}
	})
}

// TestTailTooManyClients: past the broadcaster's MaxClients a stream is
// refused with 503 and Retry-After: 5 (problem+json, as the spec says),
// a closed stream frees its place, and a server without a tail answers
// 404.
func TestTailTooManyClients(t *testing.T) {
	b := tail.New(tail.Options{MaxClients: 1}, 0)
	f := newFixtureWith(t, reader.Options{}, func(c *Config) { c.Tail = b })
	noTail := newFixtureWith(t, reader.Options{}, func(c *Config) { c.Tail = nil })

	get := func(f *fixture) (*http.Request, *http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, f.srv.URL+"/v1/events/stream?type=click", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := f.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return req, resp, body
	}

	first := openStream(t, f, "/v1/events/stream?type=click", nil)
	req, resp, body := get(f)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "5" ||
		resp.Header.Get("Content-Type") != "application/problem+json" || !bytes.Contains(body, []byte("--tail-max-clients")) {
		t.Errorf("second stream with --tail-max-clients 1: %d, Retry-After %q, %s %s; want 503, Retry-After 5 and a problem naming --tail-max-clients",
			resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"), body)
	}
	apitest.CheckAgainstSpec(t, req, resp.StatusCode, resp.Header, body)

	first.close()
	for deadline := time.Now().Add(10 * time.Second); b.Stats().Clients != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the closed stream still counts: %+v", b.Stats())
		}
	}
	openStream(t, f, "/v1/events/stream?type=click", nil) // fails the test unless 200

	req, resp, body = get(noTail)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a server without a tail: %d %s, want 404", resp.StatusCode, body)
	}
	apitest.CheckAgainstSpec(t, req, resp.StatusCode, resp.Header, body)
}
