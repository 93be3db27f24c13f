package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/cmd/internal/apitest"
	"github.com/eventide/eventide/internal/natstest"
)

var (
	ingestOnce sync.Once
	ingestBin  string
	ingestErr  error
)

// buildIngest builds cmd/ingest once per test binary run: the storage
// nodes run as child processes, as in a deployment.
func buildIngest(t testing.TB) string {
	t.Helper()
	ingestOnce.Do(func() {
		dir, err := os.MkdirTemp("", "eventide-query-test")
		if err != nil {
			ingestErr = err
			return
		}
		ingestBin = filepath.Join(dir, "ingest")
		out, err := exec.Command("go", "build", "-o", ingestBin, "../ingest").CombinedOutput()
		if err != nil {
			ingestErr = errors.New("go build ../ingest: " + err.Error() + "\n" + string(out))
		}
	})
	if ingestErr != nil {
		t.Fatal(ingestErr)
	}
	return ingestBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if ingestBin != "" {
		os.RemoveAll(filepath.Dir(ingestBin))
	}
	os.Exit(code)
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

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

// storageNode is a cmd/ingest child process owning some shards.
type storageNode struct {
	id     string
	cmd    *exec.Cmd
	http   string
	log    *syncBuffer
	exited chan error
}

const testShards = 4

// startNode starts a storage node on natsURL owning shards own.
func startNode(t testing.TB, natsURL, id, own string) *storageNode {
	t.Helper()
	return startNodeArgs(t, natsURL, id, "--own-shards", own)
}

// startNodeWith is startNode with more arguments and EVENTIDE_*
// variables (NATS authentication) appended.
func startNodeWith(t testing.TB, natsURL, id, own string, extra []string, env ...string) *storageNode {
	t.Helper()
	return startNodeEnv(t, natsURL, id, env, append([]string{"--own-shards", own}, extra...)...)
}

// startNodeArgs starts a storage node with node id id on natsURL, with
// testShards shards, an empty data directory and the extra flags, and
// returns once its /readyz answers 200.
func startNodeArgs(t testing.TB, natsURL, id string, extra ...string) *storageNode {
	t.Helper()
	return startNodeEnv(t, natsURL, id, nil, extra...)
}

// startNodeEnv is startNodeArgs with EVENTIDE_* variables appended to the
// environment.
func startNodeEnv(t testing.TB, natsURL, id string, env []string, extra ...string) *storageNode {
	t.Helper()
	n := &storageNode{id: id, http: freeAddr(t), log: &syncBuffer{}, exited: make(chan error, 1)}
	args := append([]string{"--data", t.TempDir(), "--nats-url", natsURL, "--http", n.http,
		"--node-id", id, "--shards", fmt.Sprint(testShards), "--fetch-wait", "10ms"}, extra...)
	n.cmd = exec.Command(buildIngest(t), args...)
	n.cmd.Env = append(os.Environ(), env...)
	n.cmd.Stdout, n.cmd.Stderr = io.Discard, n.log
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { n.exited <- n.cmd.Wait() }()
	t.Cleanup(func() { n.stop(t) })
	waitStatus(t, "http://"+n.http+"/readyz", 200, n.exited, n.log)
	return n
}

// stop ends the node with SIGTERM (a clean shutdown) and waits.
func (n *storageNode) stop(t testing.TB) {
	t.Helper()
	if n.cmd.ProcessState != nil {
		return
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-n.exited:
		if err != nil {
			t.Errorf("node %s: %v; log:\n%s", n.id, err, n.log)
		}
	case <-time.After(30 * time.Second):
		n.cmd.Process.Kill()
		t.Errorf("node %s did not stop within 30s of SIGTERM", n.id)
	}
}

// waitStatus polls url until it answers status, failing if the process
// behind it exits first.
func waitStatus(t testing.TB, url string, status int, exited <-chan error, log fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			t.Fatalf("exited before %s answered %d: %v; log:\n%s", url, status, err, log)
		default:
		}
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == status {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer %d within 60s; log:\n%s", url, status, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// splitDeployment is an external NATS server, two storage nodes (node-a
// owns shards 0-1, node-b 2-3) and cmd/query in this process.
type splitDeployment struct {
	natsURL string
	nodes   map[string]*storageNode
	base    string
	log     *syncBuffer
}

func startSplit(t testing.TB, extraArgs ...string) *splitDeployment {
	t.Helper()
	ns := natstest.StartServer(t)
	d := &splitDeployment{natsURL: ns.ClientURL(), nodes: map[string]*storageNode{}, log: &syncBuffer{}}
	d.nodes["node-a"] = startNode(t, d.natsURL, "node-a", "0-1")
	d.nodes["node-b"] = startNode(t, d.natsURL, "node-b", "2-3")
	d.base = startQuery(t, d.log, append([]string{"--nats-url", d.natsURL, "--shards", fmt.Sprint(testShards),
		"--owners", "0-1=node-a,2-3=node-b", "--node-timeout", "500ms"}, extraArgs...)...)
	return d
}

// startQuery runs cmd/query in this process with args and a free --http
// address, logging to log, until the test ends; it returns the base URL
// once /readyz answers 200.
func startQuery(t testing.TB, log *syncBuffer, args ...string) string {
	t.Helper()
	httpAddr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	args = append([]string{"--http", httpAddr}, args...)
	go func() { done <- run(ctx, args, func(string) (string, bool) { return "", false }, io.Discard, log) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("query run: %v", err)
		}
	})
	base := "http://" + httpAddr
	waitStatus(t, base+"/readyz", 200, done, log)
	return base
}

// TestAPISuite runs the shared API suite through cmd/query and two
// storage nodes owning different shards: the same assertions as against
// the all-in-one process (cmd/ingest's TestAPISuite).
func TestAPISuite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/ingest and runs two storage nodes")
	}
	d := startSplit(t, "--http-token", "suite-token")
	apitest.Run(t, apitest.Target{BaseURL: d.base, NATSURL: d.natsURL, Prefix: "split", Token: "suite-token"})
}

type eventsAnswer struct {
	Events []struct {
		Time string          `json:"time"`
		Data json.RawMessage `json:"data"`
	} `json:"events"`
	Partial       bool  `json:"partial"`
	MissingShards []int `json:"missing_shards"`
	Freshness     struct {
		Shards []struct {
			Shard int `json:"shard"`
		} `json:"shards"`
	} `json:"freshness"`
}

func getAnswer(t *testing.T, target string, wantStatus int, out any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantStatus {
		t.Fatalf("GET %s: %d %s, want %d", target, resp.StatusCode, body, wantStatus)
	}
	apitest.CheckAgainstSpec(t, req, resp.StatusCode, resp.Header, body)
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("GET %s: %s: %v", target, body, err)
		}
	}
}

// TestPartialAnswers stops one storage node: answers hold exactly the
// events of the other node's shards and say partial with the stopped
// node's shards, complete=true answers 503 partial-answer, and /readyz
// names the node.
func TestPartialAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/ingest and runs two storage nodes")
	}
	d := startSplit(t)
	_, js := natstest.Connect(t, d.natsURL)
	// One event an hour over 12 hours of two types: the events and counts
	// tables are sharded by event type (the shard JetStream's partition()
	// files the type's subject under), so every hour of "hot" is in shard
	// 1 (node-a) and every hour of "view" in shard 3 (node-b).
	now := time.Now().UTC().Truncate(time.Millisecond)
	const hours = 12
	for typ, want := range map[string]int{"hot": 1, "view": 3} {
		if got := bucket.EventShard(bucket.DefaultEventSubjectPrefix, typ, testShards); got != want {
			t.Fatalf("type %s is in shard %d, the test expects %d", typ, got, want)
		}
	}
	for i := range hours {
		at := now.Add(-time.Duration(i) * time.Hour)
		for _, typ := range []string{"hot", "view"} {
			if _, err := js.Publish(t.Context(), "events."+typ, fmt.Appendf(nil, `{"time":%q,"data":{"n":%d}}`, at.Format(time.RFC3339Nano), i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	window := "&from=" + url.QueryEscape(now.Add(-hours*time.Hour).Format(time.RFC3339Nano)) + "&to=" + url.QueryEscape(now.Add(time.Second).Format(time.RFC3339Nano))
	target := d.base + "/v1/events?type=view&limit=1000" + window
	onA := d.base + "/v1/events?type=hot&limit=1000" + window
	deadline := time.Now().Add(60 * time.Second)
	for {
		var a, h eventsAnswer
		getAnswer(t, target, 200, &a)
		getAnswer(t, onA, 200, &h)
		if len(a.Events) == hours && len(h.Events) == hours {
			if a.Partial || len(a.Freshness.Shards) != testShards {
				t.Fatalf("whole answer: partial %v, freshness of %d shards", a.Partial, len(a.Freshness.Shards))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d and %d of %d events readable after 60s", len(a.Events), len(h.Events), hours)
		}
		time.Sleep(20 * time.Millisecond)
	}

	d.nodes["node-b"].stop(t)
	var h eventsAnswer
	getAnswer(t, onA, 200, &h)
	if len(h.Events) != hours || h.Partial {
		t.Errorf("with node-b stopped, a type of node-a's shards: %d events (want %d), partial %v", len(h.Events), hours, h.Partial)
	}
	var a eventsAnswer
	getAnswer(t, target, 200, &a)
	if len(a.Events) != 0 || !a.Partial || !slices.Equal(a.MissingShards, []int{3}) {
		t.Errorf("with node-b stopped, a type of its shard 3: %d events, partial %v missing %v, want none, true [3]", len(a.Events), a.Partial, a.MissingShards)
	}
	// Freshness comes from positions at most a quarter second old: node-b's
	// shards leave it once a refresh finds the node silent.
	for deadline := time.Now().Add(10 * time.Second); len(a.Freshness.Shards) != 2; {
		if time.Now().After(deadline) {
			t.Fatalf("freshness lists %d shards 10s after node-b stopped, want node-a's 2", len(a.Freshness.Shards))
		}
		time.Sleep(20 * time.Millisecond)
		getAnswer(t, target, 200, &a)
	}

	var p struct {
		Type   string `json:"type"`
		Detail string `json:"detail"`
	}
	getAnswer(t, target+"&complete=true", 503, &p)
	if !strings.HasSuffix(p.Type, "#partial-answer") {
		t.Errorf("complete=true with a shard missing: problem %+v", p)
	}
	// Counts are sharded too: the counts of node-b's partitions are
	// missing as well.
	var c struct {
		Partial bool `json:"partial"`
	}
	getAnswer(t, d.base+"/v1/counts?type=view&step=1h"+window, 200, &c)
	if !c.Partial {
		t.Error("counts with node-b stopped do not say partial")
	}
	// Stats (node-a's own, node-b's shards missing) and top types (the
	// type index is scattered over the nodes) say partial too.
	var st struct {
		Partial       bool  `json:"partial"`
		MissingShards []int `json:"missing_shards"`
		Nodes         []struct {
			Node string `json:"node"`
		} `json:"nodes"`
	}
	getAnswer(t, d.base+"/v1/stats", 200, &st)
	if !st.Partial || !slices.Equal(st.MissingShards, []int{2, 3}) || len(st.Nodes) != 1 || st.Nodes[0].Node != "node-a" {
		t.Errorf("stats with node-b stopped: partial %v, missing %v, nodes %+v; want node-a's only, shards 2 and 3 missing", st.Partial, st.MissingShards, st.Nodes)
	}
	getAnswer(t, d.base+"/v1/stats?complete=true", 503, &p)
	var top struct {
		Partial bool `json:"partial"`
	}
	getAnswer(t, d.base+"/v1/types/top?limit=10"+window, 200, &top)
	if !top.Partial {
		t.Error("top types with node-b stopped do not say partial")
	}

	resp, err := http.Get(d.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `eventide_query_node_requests_total{endpoint="slice",node="node-b",result="unavailable"}`; !strings.Contains(string(metrics), want) {
		t.Errorf("/metrics lacks %s", want)
	}

	resp, err = http.Get(d.base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(body), "node-b (shards 2,3)") || strings.Contains(string(body), "node-a") {
		t.Errorf("/readyz with node-b stopped: %d %s", resp.StatusCode, body)
	}
}

// TestSingleNodeDefaults: a cmd/ingest without shard flags (node id
// local, every shard) serves a cmd/query without --owners, as the README
// says.
func TestSingleNodeDefaults(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/ingest and runs it")
	}
	ns := natstest.StartServer(t)
	n := &storageNode{id: "local", http: freeAddr(t), log: &syncBuffer{}, exited: make(chan error, 1)}
	n.cmd = exec.Command(buildIngest(t), "--data", t.TempDir(), "--nats-url", ns.ClientURL(), "--http", n.http)
	n.cmd.Stdout, n.cmd.Stderr = io.Discard, n.log
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { n.exited <- n.cmd.Wait() }()
	t.Cleanup(func() { n.stop(t) })
	waitStatus(t, "http://"+n.http+"/readyz", 200, n.exited, n.log)

	httpAddr, log := freeAddr(t), &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--nats-url", ns.ClientURL(), "--http", httpAddr}, noEnv, io.Discard, log)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("query run: %v", err)
		}
	}()
	waitStatus(t, "http://"+httpAddr+"/readyz", 200, done, log)
	var a eventsAnswer
	getAnswer(t, "http://"+httpAddr+"/v1/events?type=click", 200, &a)
	if a.Partial || len(a.Freshness.Shards) != 1 || a.Freshness.Shards[0].Shard != 0 {
		t.Errorf("single node: partial %v, freshness %+v", a.Partial, a.Freshness)
	}
}
