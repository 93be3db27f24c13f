package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/internal/natsembed"
	"github.com/eventide/eventide/internal/natstest"
	"github.com/eventide/eventide/reader"
	"github.com/eventide/eventide/storage"
)

// TestIngestEndToEnd runs the whole process in this one: embedded NATS,
// storage, writer and HTTP API, as main wires them. Events published to
// NATS must come back over HTTP, and a cancelled context must shut it all
// down, leaving a closed store and no goroutines behind.
func TestIngestEndToEnd(t *testing.T) {
	before := goroutineIDs()
	data := t.TempDir()
	natsAddr, httpAddr, adminAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--data", data, "--nats-listen", natsAddr, "--http", httpAddr, "--admin", adminAddr, "--mutex-profile-fraction", "7"},
			envFrom(map[string]string{"EVENTIDE_LOG_FORMAT": "json"}), &stdout, &stderr)
	}()
	base := "http://" + httpAddr
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	waitReady(t, client, base, done, &stderr)
	waitBanner(t, &stdout)

	if out := stdout.String(); !strings.Contains(out, "nats://"+natsAddr) || !strings.Contains(out, "curl '"+base+"/v1/events?type=click'") {
		t.Errorf("banner lacks the addresses:\n%s", out)
	}

	// Publish: 30 clicks and 5 views, each acknowledged by JetStream.
	nc, js := natstest.Connect(t, "nats://"+natsAddr)
	now := time.Now().UTC().Truncate(time.Millisecond)
	const clicks, views = 30, 5
	for i := range clicks + views {
		typ := "click"
		if i >= clicks {
			typ = "view"
		}
		body := fmt.Sprintf(`{"time":%q,"user":"u%d","data":{"i":%d}}`, now.Add(-time.Duration(i)*time.Second).Format(time.RFC3339Nano), i%3, i)
		if _, err := js.Publish(t.Context(), "events."+typ, []byte(body)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}

	// And one the writer rejects, which /v1/dlq lists.
	rejectAck, err := js.Publish(t.Context(), "events.click", []byte("not json"))
	if err != nil {
		t.Fatal(err)
	}

	// Read back until the writer has stored them all.
	var page struct {
		Events []struct {
			ID, Type, Time, User string
			Data                 json.RawMessage
		}
		NextPage string `json:"next_page"`
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		// The views come after the clicks in the stream, possibly in a
		// later batch: wait for them too, then read the clicks.
		getJSON(t, client, base+"/v1/events?type=view&limit=1000", 200, &page)
		nviews := len(page.Events)
		getJSON(t, client, base+"/v1/events?type=click&limit=1000", 200, &page)
		if len(page.Events) == clicks && nviews == views {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20s /v1/events returned %d of %d clicks; log:\n%s", len(page.Events), clicks, stderr.String())
		}
		time.Sleep(20 * time.Millisecond) // polling the process under test; no event to wait on
	}
	for i, e := range page.Events { // newest first: event i was published i seconds before now
		wantTime := now.Add(-time.Duration(i) * time.Second)
		if e.Type != "click" || e.Time != wantTime.Format(time.RFC3339Nano) || e.User != fmt.Sprintf("u%d", i%3) ||
			string(e.Data) != fmt.Sprintf(`{"i":%d}`, i) || page.NextPage != "" {
			t.Fatalf("event %d = %+v (data %s), want click %d at %s", i, e, e.Data, i, wantTime.Format(time.RFC3339Nano))
		}
	}

	// The answers say what they reflect: once the writer has taken the
	// last message (the reject), its sequence, a time, nothing pending.
	var fresh freshnessResp
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) { // polling the process under test
		getJSON(t, client, base+"/v1/counts?type=click", 200, &fresh)
		if s := fresh.Freshness.Shards; len(s) == 1 && s[0].AppliedSeq == rejectAck.Sequence && s[0].Pending != nil && *s[0].Pending == 0 {
			if s[0].Shard != 0 || s[0].AppliedTime == "" {
				t.Errorf("freshness %+v: want shard 0 with an applied_time", s[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20s /v1/counts says freshness %+v, want applied_seq %d and pending 0", fresh.Freshness, rejectAck.Sequence)
		}
	}

	var dlq struct {
		DeadLetters []struct {
			Reason, Body    string
			OriginalSubject string `json:"original_subject"`
			StreamSeq       uint64 `json:"stream_seq"`
		} `json:"dead_letters"`
	}
	for deadline := time.Now().Add(20 * time.Second); len(dlq.DeadLetters) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("/v1/dlq never listed the rejected message; log:\n%s", stderr.String())
		}
		getJSON(t, client, base+"/v1/dlq", 200, &dlq)
	}
	if d := dlq.DeadLetters; len(d) != 1 || d[0].Reason != "malformed_json" || d[0].Body != "not json" ||
		d[0].OriginalSubject != "events.click" || d[0].StreamSeq != clicks+views+1 {
		t.Errorf("/v1/dlq = %+v, want the one malformed_json message at stream sequence %d", d, clicks+views+1)
	}

	var counts struct{ Points []struct{ Count int64 } }
	for typ, want := range map[string]int64{"click": clicks, "view": views} {
		getJSON(t, client, base+"/v1/counts?type="+typ+"&step=5m", 200, &counts)
		var total int64
		for _, p := range counts.Points {
			total += p.Count
		}
		if len(counts.Points) != 12 && len(counts.Points) != 13 || total != want {
			t.Errorf("/v1/counts?type=%s&step=5m: %d points totalling %d, want 12 or 13 totalling %d", typ, len(counts.Points), total, want)
		}
	}

	var ready struct {
		Ready  bool
		Checks []struct {
			Name string
			OK   bool
		}
	}
	getJSON(t, client, base+"/readyz", 200, &ready)
	var names []string
	for _, c := range ready.Checks {
		if c.OK {
			names = append(names, c.Name)
		}
	}
	if !ready.Ready || strings.Join(names, ",") != "nats,storage,nats-store,writer,fanout,shutdown" {
		t.Errorf("/readyz = %+v, want ready with nats, storage, nats-store, writer, fanout and shutdown passing", ready)
	}
	checkReadyzDocumented(t, names)

	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	build := readBuildInfo()
	if line := fmt.Sprintf(`eventide_build_info{goversion=%q,revision=%q,version=%q} 1`, build.GoVersion, build.Revision, build.Version); !bytes.Contains(metrics, []byte(line)) {
		t.Errorf("/metrics lacks %s", line)
	}
	if !strings.Contains(stderr.String(), fmt.Sprintf(`"msg":"eventide starting","version":%q,"revision":%q`, build.Version, build.Revision)) {
		t.Errorf("the start-up log line does not name the version and revision:\n%s", stderr.String())
	}
	for _, want := range []string{"eventide_storage_batches_total", "eventide_writer_", `eventide_dlq_messages{stream="EVENTS_DLQ"} 1`, "eventide_nats_connected 1\n", "eventide_nats_reconnects_total 0\n", "eventide_nats_store_bytes ", "eventide_reader_queries_total",
		`eventide_http_requests_total{code="200",handler="/v1/events"}`, "go_goroutines", "process_cpu_seconds_total"} {
		if !bytes.Contains(metrics, []byte(want)) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// --mutex-profile-fraction turns the mutex profile on.
	if resp, err := client.Get("http://" + adminAddr + "/debug/pprof/mutex?debug=1"); err != nil {
		t.Error(err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Contains(body, []byte("sampling period=7")) {
			t.Errorf("/debug/pprof/mutex?debug=1 does not say sampling period=7:\n%.300s", body)
		}
	}
	for url, want := range map[string]int{base + "/debug/pprof/": 404, "http://" + adminAddr + "/debug/pprof/": 200} {
		if resp, err := client.Get(url); err != nil || resp.StatusCode != want {
			t.Errorf("GET %s: %v %v, want %d (pprof only on the admin listener)", url, resp, err, want)
		} else {
			resp.Body.Close()
		}
	}

	// Shut down.
	nc.Close()
	client.CloseIdleConnections()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v; log:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("run did not return 30s after cancel; log:\n%s", stderr.String())
	}
	if err := checkLoggedInOrder(stderr.String(), "shutdown: /readyz now answers 503", "shutdown: writer stopped",
		"shutdown: stopping HTTP server", "shutdown: storage closed", "shutdown: stopping embedded NATS", "shutdown complete"); err != nil {
		t.Error(err)
	}
	checkNoLeakedGoroutines(t, before)

	// The store was closed (its lock is free) and holds every event.
	db, err := storage.Open(data+"/storage", storage.DefaultOptions())
	if err != nil {
		t.Fatalf("reopen storage after shutdown: %v", err)
	}
	defer db.Close()
	r, err := reader.New(db, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Events(t.Context(), reader.EventQuery{Type: "click", From: now.Add(-time.Hour), To: now.Add(time.Second), Limit: 1000})
	if err != nil || len(got.Events) != clicks {
		t.Fatalf("after reopen: %v events, err %v; want %d", len(got.Events), err, clicks)
	}
	// A new stream is checkpoint epoch 0, whose checkpoint is under the
	// consumer's own name (writer/checkpoint.go); it covers every message
	// published, the rejected one last.
	if epoch, err := catalog.ReadCheckpoint(db, "eventide-writer.epoch"); err != nil || epoch != 0 {
		t.Fatalf("checkpoint epoch: %d, %v; want 0", epoch, err)
	}
	if seq, err := catalog.ReadCheckpoint(db, "eventide-writer"); err != nil || seq != clicks+views+1 {
		t.Fatalf("checkpoint of the writer after shutdown: %d, %v; want %d, the last stream sequence", seq, err, clicks+views+1)
	}
}

// TestIngestExternalNATS runs against a NATS server it does not own
// (--nats-url): events flow the same way, and shutdown leaves that server
// running.
func TestIngestExternalNATS(t *testing.T) {
	ns, err := natsembed.Start(natsembed.Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { natsembed.Stop(ns) }() // ns is replaced by a restart below
	httpAddr := freeAddr(t)
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--data", t.TempDir(), "--http", httpAddr},
			envFrom(map[string]string{"EVENTIDE_NATS_URL": ns.ClientURL()}), &stdout, &stderr)
	}()
	base := "http://" + httpAddr
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	waitReady(t, client, base, done, &stderr)
	waitBanner(t, &stdout)
	if !strings.Contains(stdout.String(), ns.ClientURL()+"  (external)") {
		t.Errorf("banner does not name the external server:\n%s", stdout.String())
	}

	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.Publish(t.Context(), "events.signup", []byte(fmt.Sprintf(`{"time":%d}`, time.Now().UnixMilli()))); err != nil {
		t.Fatal(err)
	}
	var page struct{ Events []struct{ Type string } }
	for deadline := time.Now().Add(20 * time.Second); len(page.Events) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the event never showed up; log:\n%s", stderr.String())
		}
		getJSON(t, client, base+"/v1/events?type=signup", 200, &page)
	}

	if m := scrape(t, client, base); strings.Contains(m, "eventide_nats_store_bytes") || !strings.Contains(m, "eventide_nats_connected 1\n") {
		t.Errorf("with an external server: want eventide_nats_connected 1 and no store size; /metrics:\n%s", m)
	}

	// The server goes away: the connection metric and /readyz say so; it
	// comes back on the same address and store: one reconnect.
	addr, storeDir := ns.Addr().String(), ns.StoreDir()
	natsembed.Stop(ns)
	waitMetrics(t, client, base, "eventide_nats_connected 0\n")
	var ready struct {
		Checks []struct{ Name, Detail string }
	}
	getJSON(t, client, base+"/readyz", 503, &ready)
	if len(ready.Checks) == 0 || ready.Checks[0].Name != "nats" || !strings.Contains(ready.Checks[0].Detail, "NATS connection is") {
		t.Errorf("/readyz with NATS down: %+v, want the nats check failing first", ready)
	}
	if resp, err := client.Get(base + "/v1/dlq"); err != nil || resp.StatusCode != 503 {
		t.Errorf("/v1/dlq with NATS down: %v %v, want 503 at once", resp, err)
	} else {
		resp.Body.Close()
	}
	ns, err = natsembed.Start(natsembed.Config{Listen: addr, StoreDir: storeDir})
	if err != nil {
		t.Fatal(err)
	}
	waitMetrics(t, client, base, "eventide_nats_connected 1\n", "eventide_nats_reconnects_total 1\n")

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if !ns.Running() || strings.Contains(stderr.String(), "stopping embedded NATS") {
		t.Fatalf("shutdown stopped the external NATS server")
	}
}

// TestOldDataLayoutRefused: a store kept directly in --data (before the
// storage/ and nats/ subdirectories) is refused with a fix, not ignored.
func TestOldDataLayoutRefused(t *testing.T) {
	before := goroutineIDs()
	data := t.TempDir()
	db, err := storage.Open(data, storage.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a bug must not hang the test
	defer cancel()
	err = run(ctx, []string{"--data", data, "--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0"},
		envFrom(nil), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "old layout") || exitCode(err) != 1 {
		t.Fatalf("err %v, want the old-layout error", err)
	}
	checkNoLeakedGoroutines(t, before)
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// checkReadyzDocumented fails the test when a check /readyz reported is
// not in docs/http-api.md's table of checks or in the spec's description
// of /readyz.
func checkReadyzDocumented(t *testing.T, names []string) {
	t.Helper()
	doc, err := os.ReadFile("../../docs/http-api.md")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := os.ReadFile("../../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, readyz, _ := strings.Cut(string(spec), "\n  /readyz:\n")
	readyz, _, _ = strings.Cut(readyz, "responses:")
	readyz = strings.Join(strings.Fields(readyz), " ")
	for _, n := range names {
		if !strings.Contains(string(doc), "\n| `"+n+"` |") {
			t.Errorf("/readyz reports the check %s, which docs/http-api.md's table of checks lacks", n)
		}
		if !regexp.MustCompile(`[:,] ` + regexp.QuoteMeta(n) + `[ ,;]`).MatchString(readyz) {
			t.Errorf("/readyz reports the check %s, which api/openapi.yaml's description of /readyz does not name: %s", n, readyz)
		}
	}
}

// waitReady polls /readyz until it answers 200, failing if run returns.
func waitReady(t *testing.T, client *http.Client, base string, done <-chan error, log fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-done:
			t.Fatalf("run returned before it was ready: %v; log:\n%s", err, log)
		default:
		}
		if resp, err := client.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after 30s; log:\n%s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freshnessResp is the freshness member of a data response.
type freshnessResp struct {
	Freshness struct {
		Shards []struct {
			Shard       int     `json:"shard"`
			AppliedSeq  uint64  `json:"applied_seq"`
			AppliedTime string  `json:"applied_time"`
			Pending     *uint64 `json:"pending"`
		} `json:"shards"`
	} `json:"freshness"`
}

func getJSON(t *testing.T, client *http.Client, url string, wantStatus int, out any) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantStatus {
		t.Fatalf("GET %s: %d %s, want %d", url, resp.StatusCode, body, wantStatus)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("GET %s: cannot decode %s: %v", url, body, err)
	}
}

// goroutineIDs returns the ids of the goroutines running now: what a test
// takes before it starts the process, so that checkNoLeakedGoroutines
// blames it only for goroutines it started (another test of the package
// may leave a NATS server's goroutines behind, and each test answers for
// its own).
func goroutineIDs() map[string]bool {
	ids := map[string]bool{}
	for g := range strings.SplitSeq(allStacks(), "\n\n") {
		ids[goroutineID(g)] = true
	}
	return ids
}

// goroutineID is the id of a goroutine's stack ("goroutine 12 [select]:").
func goroutineID(stack string) string {
	id, _, _ := strings.Cut(strings.TrimPrefix(stack, "goroutine "), " ")
	return id
}

func allStacks() string {
	buf := make([]byte, 4<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// checkNoLeakedGoroutines waits until no goroutine started since before
// (goroutineIDs) runs code of Eventide or NATS, other than this test's own.
func checkNoLeakedGoroutines(t *testing.T, before map[string]bool) {
	t.Helper()
	var leaked []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		leaked = leaked[:0]
		for g := range strings.SplitSeq(allStacks(), "\n\n") {
			if before[goroutineID(g)] || strings.Contains(g, "checkNoLeakedGoroutines") || strings.Contains(g, "testing.tRunner") {
				continue
			}
			if strings.Contains(g, "github.com/eventide/eventide/") || strings.Contains(g, "github.com/nats-io/") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return
		}
	}
	t.Errorf("%d goroutines still running after shutdown:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
}

// syncBuffer is a bytes.Buffer safe for the process's goroutines and the
// test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// scrape returns the text of /metrics.
func scrape(t *testing.T, client *http.Client, base string) string {
	t.Helper()
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitMetrics polls /metrics until it holds every line of want.
func waitMetrics(t *testing.T, client *http.Client, base string, want ...string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		m := scrape(t, client, base)
		missing := slices.DeleteFunc(slices.Clone(want), func(w string) bool { return strings.Contains(m, w) })
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20s /metrics still lacks %q", missing)
		}
	}
}

// checkLoggedInOrder returns an error unless every step occurs in log,
// each after the one before.
func checkLoggedInOrder(log string, steps ...string) error {
	last, lastStep := -1, "the start of the log"
	for _, step := range steps {
		i := strings.Index(log, step)
		switch {
		case i < 0:
			return fmt.Errorf("step %q was not logged; log:\n%s", step, log)
		case i <= last:
			return fmt.Errorf("step %q was logged before %q; log:\n%s", step, lastStep, log)
		}
		last, lastStep = i, step
	}
	return nil
}
