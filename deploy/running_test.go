package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/internal/natsconn"
)

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestMetricsServed runs the real cmd/ingest (embedded NATS, fan-out on),
// gives it an accepted event, a rejected one, a post and a few queries,
// and checks that every eventide_* metric the alert rules and the
// dashboard name is on its /metrics or, for the rebuild metrics, on the
// /metrics of a second, sharded cmd/ingest.
func TestMetricsServed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs cmd/ingest")
	}
	natsPort := freePort(t)
	get := startIngest(t, nil, "--nats-listen", fmt.Sprintf("127.0.0.1:%d", natsPort))

	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", natsPort))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	now := time.Now().UnixMilli()
	for _, m := range []struct{ subject, body string }{
		{"events.click", fmt.Sprintf(`{"time":%d,"user":"u1"}`, now)},
		{"events.click", `not json`}, // dead-lettered
		{"events.follow", fmt.Sprintf(`{"time":%d,"user":"u1","author":"a1"}`, now)},
		{"events.post", fmt.Sprintf(`{"time":%d,"author":"a1","data":{"text":"hi"}}`, now)},
	} {
		if _, err := js.Publish(t.Context(), m.subject, []byte(m.body)); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, body := get("/v1/events?type=click")
		if strings.Contains(body, `"u1"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the event never showed up")
		}
	}
	get("/v1/counts?type=click")
	get("/v1/timeline/u1")
	get("/v1/dlq")

	named := map[string]string{}
	for alert, expr := range alertExprs(t) {
		for _, m := range metricRE.FindAllString(expr, -1) {
			named[m] = "alert " + alert
		}
	}
	for _, expr := range dashboardExprs(t) {
		for _, m := range metricRE.FindAllString(expr, -1) {
			named[m] = "dashboard: " + expr
		}
	}

	// Some series appear only once the work they count is done, and
	// after the data it produced is readable (the writer counts a batch's
	// events once it is stored and acked; the fan-out's lag with the
	// post's timeline write): poll until every named metric but the
	// sharded node's (eventide_shard_*, below) is served.
	served := map[string]bool{}
	var metrics string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, metrics = get("/metrics")
		served = map[string]bool{}
		for _, m := range regexp.MustCompile(`(?m)^(eventide_[a-z0-9_]+)[{ ]`).FindAllStringSubmatch(metrics, -1) {
			served[m[1]] = true
		}
		missing := false
		for m := range named {
			if !served[m] && !strings.HasPrefix(m, "eventide_shard_") {
				missing = true
			}
		}
		if !missing || time.Now().After(deadline) {
			break
		}
	}

	// The rebuild metrics (eventide_shard_*) are served by a storage node
	// of a sharded deployment only: a second cmd/ingest with --shards 2,
	// owning both shards, on its own embedded NATS server.
	shardGet := startIngest(t, nil, "--nats-listen", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"--shards", "2", "--node-id", "metrics-shards", "--own-shards", "all", "--restore-shards-from", t.TempDir())
	var shardMetrics string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, shardMetrics = shardGet("/metrics")
		if strings.Contains(shardMetrics, "eventide_shard_caught_up{") || time.Now().After(deadline) {
			break
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^(eventide_[a-z0-9_]+)[{ ]`).FindAllStringSubmatch(shardMetrics, -1) {
		served[m[1]] = true
	}

	if len(named) < 20 {
		t.Errorf("only %d metrics named by alerts and dashboard", len(named))
	}
	for m, where := range named {
		if !served[m] {
			t.Errorf("%s names %s, which /metrics does not serve", where, m)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s\nthe sharded node's /metrics:\n%s", metrics, shardMetrics)
	}
}

// startDeployCluster starts the three nodes of deploy/nats on loopback:
// the configs as they are, but for listen addresses, routes and the store.
//
// The ports are picked free and then released, so another test process
// may take one before a node binds it (the node then never takes
// connections); the cluster is then started again on new ports, at most
// three times.
func startDeployCluster(t *testing.T) []*natsserver.Server {
	t.Helper()
	setNATSSecrets(t)
	for attempt := 1; ; attempt++ {
		servers, notReady := tryDeployCluster(t)
		if notReady == "" {
			return servers
		}
		for _, s := range servers {
			s.Shutdown()
			s.WaitForShutdown()
		}
		if attempt == 3 {
			t.Fatalf("%s did not take connections (three clusters on fresh ports)", notReady)
		}
		t.Logf("%s did not take connections; starting the cluster again on other ports", notReady)
	}
}

// tryDeployCluster is one attempt of startDeployCluster: the servers, and
// the name of one that did not take connections (empty: all did).
func tryDeployCluster(t *testing.T) ([]*natsserver.Server, string) {
	t.Helper()
	client, cluster, monitor := make([]int, 3), make([]int, 3), make([]int, 3)
	for i := range 3 {
		client[i], cluster[i], monitor[i] = freePort(t), freePort(t), freePort(t)
	}
	dir := t.TempDir()
	common, err := os.ReadFile(filepath.Join("nats", "common.conf"))
	if err != nil {
		t.Fatal(err)
	}
	var servers []*natsserver.Server
	t.Cleanup(func() {
		for _, s := range servers {
			s.Shutdown()
			s.WaitForShutdown()
		}
	})
	for i := range 3 {
		node := fmt.Sprintf("n%d", i+1)
		nb, err := os.ReadFile(filepath.Join("nats", node+".conf"))
		if err != nil {
			t.Fatal(err)
		}
		r := []string{
			"listen: 0.0.0.0:4222", fmt.Sprintf("listen: 127.0.0.1:%d", client[i]),
			"http: 0.0.0.0:8222", fmt.Sprintf("http: 127.0.0.1:%d", monitor[i]),
			"store_dir: /data/nats", "store_dir: " + filepath.Join(dir, node),
			"listen: 0.0.0.0:6222", fmt.Sprintf("listen: 127.0.0.1:%d", cluster[i]),
		}
		for j := range 3 {
			r = append(r, fmt.Sprintf("nats-route://n%d:6222", j+1), fmt.Sprintf("nats-route://127.0.0.1:%d", cluster[j]))
		}
		rep := strings.NewReplacer(r...)
		nodeDir := filepath.Join(dir, node+"-conf")
		os.MkdirAll(nodeDir, 0o700)
		os.WriteFile(filepath.Join(nodeDir, "common.conf"), []byte(rep.Replace(string(common))), 0o600)
		conf := filepath.Join(nodeDir, node+".conf")
		os.WriteFile(conf, []byte(rep.Replace(string(nb))), 0o600)
		opts, err := natsserver.ProcessConfigFile(conf)
		if err != nil {
			t.Fatalf("%s: %v", node, err)
		}
		opts.NoSigs, opts.NoLog = true, true
		s, err := natsserver.NewServer(opts)
		if err != nil {
			t.Fatalf("%s: %v", node, err)
		}
		s.Start()
		servers = append(servers, s)
	}
	for _, s := range servers {
		if !s.ReadyForConnections(20 * time.Second) {
			return servers, s.Name()
		}
	}
	return servers, ""
}

// clusterURL is the comma-separated client URLs of servers.
func clusterURL(servers []*natsserver.Server) string {
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.ClientURL())
	}
	return strings.Join(urls, ",")
}

// connectAs connects to url as user, with the password in the environment
// variable passwordEnv (as the deploy files give it), and returns its
// JetStream context; t.Cleanup closes the connection.
func connectAs(ctx context.Context, t *testing.T, url, user, passwordEnv string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := natsconn.Connect(ctx, natsconn.Options{URL: url, User: user, Password: os.Getenv(passwordEnv)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// TestDeployClusterWorks starts deploy/nats's three nodes and checks what
// deploy/README.md says of them: the eventide user creates an R3 stream,
// the producer user publishes to it with acks but can do nothing else,
// and wrong passwords are refused.
func TestDeployClusterWorks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	url := clusterURL(startDeployCluster(t))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	_, js := connectAs(ctx, t, url, "eventide", "EVENTIDE_NATS_PASSWORD")
	// The meta leader is elected once the routes are up: poll for it.
	var err error
	for {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = js.CreateStream(actx, jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"events.>"}, Replicas: 3})
		acancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("cannot create an R3 stream on the deploy cluster: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	pc, pjs := connectAs(ctx, t, url, "producer", "PRODUCER_NATS_PASSWORD")
	ack, err := pjs.Publish(ctx, "events.click", []byte(`{"time":0}`))
	if err != nil || ack.Stream != "EVENTS" {
		t.Fatalf("producer publish: %+v, %v", ack, err)
	}
	info, err := js.Stream(ctx, "EVENTS")
	if err != nil || len(info.CachedInfo().Cluster.Replicas) != 2 {
		t.Errorf("EVENTS: %+v, %v; want a leader and 2 replicas", info, err)
	}
	// The producer may not read the stream or touch the JetStream API.
	// The server drops the denied API request: no answer comes.
	dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = pjs.CreateStream(dctx, jetstream.StreamConfig{Name: "X", Subjects: []string{"x.>"}})
	dcancel()
	if err == nil {
		t.Error("the producer user created a stream")
	}
	errs := make(chan error, 1)
	pc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case errs <- err:
		default:
		}
	})
	if _, err := pc.SubscribeSync("events.>"); err == nil {
		pc.Flush()
		select {
		case err := <-errs:
			if !errors.Is(err, nats.ErrPermissionViolation) {
				t.Errorf("producer subscribing to events.>: %v, want a permissions violation", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("the producer user subscribed to events.> without a permissions violation")
		}
	}

	if _, err := natsconn.Connect(ctx, natsconn.Options{URL: url, User: "eventide", Password: "wrong"}); !errors.Is(err, natsconn.ErrRefused) {
		t.Errorf("wrong password: %v, want ErrRefused", err)
	}
}

// startIngest runs the cmd/ingest binary with a temporary data directory,
// a free HTTP port, args and env (nothing else from the test's
// environment), waits until /readyz answers 200 and stops it (SIGINT)
// when the test ends. It returns a GET on its HTTP API.
func startIngest(t *testing.T, env []string, args ...string) (get func(path string) (int, string)) {
	t.Helper()
	bin := buildBinary(t, "cmd/ingest")
	httpPort := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	cmd := exec.Command(bin, append([]string{"--data", t.TempDir(), "--http", fmt.Sprintf("127.0.0.1:%d", httpPort)}, args...)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	log := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = io.Discard, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	client := &http.Client{Timeout: 5 * time.Second}
	t.Cleanup(func() {
		client.CloseIdleConnections()
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("ingest log:\n%s", log.String())
		}
	})
	get = func(path string) (int, string) {
		resp, err := client.Get(base + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if code, _ := get("/readyz"); code == 200 {
			return get
		}
		select {
		case err := <-exited:
			t.Fatalf("ingest exited: %v\n%s", err, log.String())
		default:
		}
		if time.Now().After(deadline) {
			_, body := get("/readyz")
			t.Fatalf("ingest not ready within 60s: %s\n%s", body, log.String())
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the child's writes and the test's
// reads.
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

// TestIngestOnDeployCluster runs cmd/ingest as a storage node on the
// deploy/nats cluster the way compose.yaml does: all three URLs, the
// eventide user with its password from the environment, R3 streams. A
// producer (the producer user) publishes; the event is stored and served,
// an invalid one is dead-lettered, and the streams have three replicas.
func TestIngestOnDeployCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster and cmd/ingest")
	}
	url := clusterURL(startDeployCluster(t))
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	// Wait for the cluster's meta leader, as a deployment waits for the
	// NATS StatefulSet: the storage node's first act is creating streams.
	_, js := connectAs(ctx, t, url, "eventide", "EVENTIDE_NATS_PASSWORD")
	for {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.AccountInfo(actx)
		acancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the cluster has no JetStream meta leader: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	get := startIngest(t, []string{"EVENTIDE_NATS_USER=eventide", "EVENTIDE_NATS_PASSWORD=" + os.Getenv("EVENTIDE_NATS_PASSWORD")},
		"--nats-url", url, "--replicas", "3")

	_, pjs := connectAs(ctx, t, url, "producer", "PRODUCER_NATS_PASSWORD")
	for _, body := range []string{fmt.Sprintf(`{"time":%d,"user":"on-cluster"}`, time.Now().UnixMilli()), `{"time":`} {
		if _, err := pjs.Publish(ctx, "events.click", []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, events := get("/v1/events?type=click")
		_, dlq := get("/v1/dlq")
		if strings.Contains(events, `"on-cluster"`) && strings.Contains(dlq, "click") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: events %s\ndlq %s", events, dlq)
		}
	}
	for _, name := range []string{"EVENTS", "EVENTS_DLQ"} {
		st, err := js.Stream(ctx, name)
		if err != nil || st.CachedInfo().Config.Replicas != 3 {
			t.Errorf("stream %s: %v; want 3 replicas", name, err)
		}
	}
}
