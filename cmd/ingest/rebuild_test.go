package main

import (
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/internal/natstest"
	"github.com/eventide/eventide/writer"
)

func TestShardBehind(t *testing.T) {
	for _, tc := range []struct {
		st   writer.Stats
		want string // "" for caught up
	}{
		{writer.Stats{}, "pending not counted yet"},
		{writer.Stats{LastAppliedSeq: 7, Pending: 500, PendingKnown: true}, "shard 3: catching up from the stream (applied up to seq 7, 500 messages behind)"},
		{writer.Stats{Pending: 100, PendingKnown: true}, ""},
		{writer.Stats{Pending: 0, PendingKnown: true}, ""},
	} {
		err := shardBehind(3, tc.st, 100)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("shardBehind(%+v) = %v, want %q", tc.st, err, tc.want)
		}
	}
}

// TestShardRebuildFromStream: a storage node started with an empty data
// directory for shards whose events the stream holds replays them from
// the stream, becomes ready once caught up (the metrics say so), and
// holds every event exactly once.
func TestShardRebuildFromStream(t *testing.T) {
	ns := natstest.StartServer(t)
	_, js := natstest.Connect(t, ns.ClientURL())
	startNode := func(id string) *node {
		cfg, err := parseConfig([]string{"--data", t.TempDir(), "--http", "127.0.0.1:0", "--nats-url", ns.ClientURL(), "--node-id", id,
			"--shards", "2", "--own-shards", "0-1", "--fetch-batch", "50", "--fetch-wait", "10ms", "--fanout=false"}, envFrom(nil), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		n, err := start(t.Context(), cfg, buildInfo{}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("start %s: %v", id, err)
		}
		return n
	}
	// The first node creates the sharded stream and stores the events.
	first := startNode("node-a")
	const total = 2000
	publishNumbered(t, js, 0, total)
	waitUntil(t, "node-a to store every event", func() bool {
		return len(eventNumbers(t, first, "click")) == total && len(eventNumbers(t, first, "view")) == total
	})
	if err := first.shutdown(); err != nil {
		t.Fatal(err)
	}

	// A new node, empty data directory, same shards: it rebuilds them.
	n := startNode("node-b")
	t.Cleanup(func() {
		if err := n.shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	base := "http://" + n.httpLn.Addr().String()
	waitUntil(t, "the rebuilt node to be ready", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	want := make([]int, total)
	for i := range want {
		want[i] = i
	}
	// Ready means within one fetch (50 here) of the end; the rest follows.
	for _, typ := range []string{"click", "view"} {
		if got := eventNumbers(t, n, typ); len(got) < total-50 {
			t.Errorf("ready, the rebuilt node holds %d %s events, want at least %d", len(got), typ, total-50)
		}
	}
	waitUntil(t, "the rebuilt node to hold every event", func() bool { return n.shards.Stats().Ingested >= 2*total })
	for _, typ := range []string{"click", "view"} {
		if got := eventNumbers(t, n, typ); !slices.Equal(got, want) {
			t.Errorf("rebuilt node holds %d %s events, want each of %d exactly once", len(got), typ, total)
		}
	}
	m := scrape(t, http.DefaultClient, base)
	for _, line := range []string{`eventide_shard_caught_up{shard="0"} 1`, `eventide_shard_caught_up{shard="1"} 1`} {
		if !strings.Contains(m, line+"\n") {
			t.Errorf("/metrics lacks %s", line)
		}
	}
	if st := n.shards.Stats(); st.Ingested != 2*total {
		t.Errorf("rebuilt node ingested %d events, want %d", st.Ingested, 2*total)
	}
}

// waitUntil polls cond for up to 60s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// waitBanner waits for the start-up banner on stdout: run prints it once
// start returns, which can be just after /readyz has said ready.
func waitBanner(t *testing.T, stdout *syncBuffer) {
	t.Helper()
	waitUntil(t, "the start-up banner", func() bool { return strings.Contains(stdout.String(), "Eventide is running") })
}

// publishWindow is how many publishes publishNumbered leaves unacked.
const publishWindow = 2000

// publishNumbered publishes events first..last-1 of "click" (shard 0)
// and "view" (shard 1) and waits for their acks.
func publishNumbered(t testing.TB, js jetstream.JetStream, first, last int) {
	t.Helper()
	var futures []jetstream.PubAckFuture
	for i := first; i < last; i++ {
		if len(futures) >= publishWindow {
			// Past the client's limit of outstanding async publishes
			// (4,000) PublishAsync stalls, and on a loaded machine
			// fails: wait for the window's acks first.
			natstest.AwaitAcks(t, futures)
			futures = futures[:0]
		}
		for _, typ := range []string{"click", "view"} {
			f, err := js.PublishAsync("events."+typ, fmt.Appendf(nil, `{"time":%q,"data":{"n":%d}}`, time.Now().UTC().Format(time.RFC3339Nano), i))
			if err != nil {
				t.Fatal(err)
			}
			futures = append(futures, f)
		}
	}
	natstest.AwaitAcks(t, futures)
}

// copyTree copies a directory of regular files, as an operator's
// snapshot of a stopped node's storage directory.
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o750)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o640)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestShardRestoreFromSnapshot: a node started on an empty data
// directory with a snapshot of another node's storage (and the stream
// sequence each shard's data covers, its checkpoints) replays only the
// events after the snapshot, and ends with every event exactly once.
func TestShardRestoreFromSnapshot(t *testing.T) {
	ns := natstest.StartServer(t)
	_, js := natstest.Connect(t, ns.ClientURL())
	startNode := func(id, data string, extra ...string) *node {
		cfg, err := parseConfig(append([]string{"--data", data, "--http", "127.0.0.1:0", "--nats-url", ns.ClientURL(), "--node-id", id,
			"--shards", "2", "--own-shards", "0-1", "--fetch-wait", "10ms"}, extra...), envFrom(nil), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		n, err := start(t.Context(), cfg, buildInfo{}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("start %s: %v", id, err)
		}
		return n
	}
	const before, after = 1500, 500
	dataA := t.TempDir()
	a := startNode("node-a", dataA)
	publishNumbered(t, js, 0, before)
	waitUntil(t, "node-a to store every event", func() bool {
		return len(eventNumbers(t, a, "click")) == before && len(eventNumbers(t, a, "view")) == before
	})
	if err := a.shutdown(); err != nil {
		t.Fatal(err)
	}
	snapshot := filepath.Join(t.TempDir(), "snap")
	copyTree(t, filepath.Join(dataA, "storage"), snapshot)
	publishNumbered(t, js, before, before+after)

	b := startNode("node-b", t.TempDir(), "--restore-from", snapshot, "--restore-node", "node-a")
	t.Cleanup(func() {
		if err := b.shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	waitUntil(t, "the restored node to catch up", func() bool {
		return b.shards.Ready() == nil && b.shards.Stats().Ingested >= 2*after
	})
	want := make([]int, before+after)
	for i := range want {
		want[i] = i
	}
	for _, typ := range []string{"click", "view"} {
		if got := eventNumbers(t, b, typ); !slices.Equal(got, want) {
			t.Errorf("restored node holds %d %s events, want each of %d exactly once", len(got), typ, len(want))
		}
	}
	if st := b.shards.Stats(); st.Ingested != 2*after {
		t.Errorf("restored node applied %d events from the stream, want only the %d after the snapshot", st.Ingested, 2*after)
	}
	// Counts come from the snapshot and the replay without double counting.
	var counts struct {
		Points []struct{ Count int64 } `json:"points"`
	}
	now := time.Now()
	getJSON(t, http.DefaultClient, fmt.Sprintf("http://%s/v1/counts?type=view&step=1h&from=%s&to=%s", b.httpLn.Addr(),
		url.QueryEscape(now.Add(-2*time.Hour).Format(time.RFC3339)), url.QueryEscape(now.Add(time.Minute).Format(time.RFC3339))), 200, &counts)
	var sum int64
	for _, c := range counts.Points {
		sum += c.Count
	}
	if sum != before+after {
		t.Errorf("view counts sum to %d on the restored node, want %d", sum, before+after)
	}
}
