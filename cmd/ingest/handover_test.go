package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/internal/natstest"
	"github.com/eventide/eventide/internal/queryrpc"
)

// startShardNode starts a storage node in this process on natsURL with
// the owners bucket, 2 shards, and extra flags.
func startShardNode(t *testing.T, natsURL, id string, extra ...string) *node {
	t.Helper()
	n := launchShardNode(t, natsURL, id, extra...)
	t.Cleanup(func() {
		if err := n.shutdown(); err != nil {
			t.Errorf("shutdown %s: %v", id, err)
		}
	})
	return n
}

// launchShardNode is startShardNode without the shutdown at the end of
// the test: for a node the test stops itself.
func launchShardNode(t *testing.T, natsURL, id string, extra ...string) *node {
	t.Helper()
	args := append([]string{"--data", t.TempDir(), "--http", "127.0.0.1:0", "--nats-url", natsURL, "--node-id", id,
		"--shards", "2", "--owners-kv", queryrpc.DefaultOwnersBucket, "--fetch-wait", "10ms", "--fanout=false"}, extra...)
	cfg, err := parseConfig(args, envFrom(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	n, err := start(t.Context(), cfg, buildInfo{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
	return n
}

// eventNumbers reads every event of typ in the last two hours from a
// node's own HTTP API: the "n" of each.
func eventNumbers(t *testing.T, n *node, typ string) []int {
	t.Helper()
	now := time.Now()
	u := fmt.Sprintf("http://%s/v1/events?type=%s&limit=10000&from=%s&to=%s", n.httpLn.Addr(), typ,
		url.QueryEscape(now.Add(-2*time.Hour).Format(time.RFC3339)), url.QueryEscape(now.Add(time.Minute).Format(time.RFC3339)))
	var page struct {
		Events []struct {
			Data struct{ N int }
		}
		Next string `json:"next"`
	}
	getJSON(t, http.DefaultClient, u, 200, &page)
	if page.Next != "" {
		t.Fatalf("more than one page of %s events", typ)
	}
	var out []int
	for _, e := range page.Events {
		out = append(out, e.Data.N)
	}
	slices.Sort(out)
	return out
}

// TestShardHandOver moves a shard between two storage nodes through the
// owners bucket while events flow: the old owner stops applying the
// shard before it releases it (the bucket still says "moving" when its
// writer has stopped), the new owner starts only after that, rebuilds
// the shard from the stream into its empty store, and ends with every
// event of the shard exactly once; the shard that did not move is
// untouched.
func TestShardHandOver(t *testing.T) {
	ns := natstest.StartServer(t)
	nc, js := natstest.Connect(t, ns.ClientURL())
	// "click" is in shard 0, "view" in shard 1 (of 2).
	for typ, want := range map[string]int{"click": 0, "view": 1} {
		if got := bucket.EventShard(bucket.DefaultEventSubjectPrefix, typ, 2); got != want {
			t.Fatalf("type %s is in shard %d, the test expects %d", typ, got, want)
		}
	}
	a := startShardNode(t, ns.ClientURL(), "node-a", "--own-shards", "all")
	b := startShardNode(t, ns.ClientURL(), "node-b")
	if got := a.shards.owned(); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("node-a runs the writers of shards %v, want [0 1]", got)
	}
	if got := b.shards.owned(); len(got) != 0 {
		t.Fatalf("node-b runs the writers of shards %v, want none", got)
	}
	kv, err := js.KeyValue(t.Context(), queryrpc.DefaultOwnersBucket)
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var order []string
	a.shards.setObserver(func(s int, running bool) {
		if s != 1 || running {
			return
		}
		e, err := kv.Get(context.Background(), queryrpc.OwnerKey(1))
		if err != nil {
			t.Errorf("reading shard 1's owner: %v", err)
		} else if string(e.Value()) != "node-a>node-b" {
			t.Errorf("node-a stopped shard 1 with the bucket at %q: it must stop before it releases the shard", e.Value())
		}
		mu.Lock()
		order = append(order, "a-stopped")
		mu.Unlock()
	})
	b.shards.setObserver(func(s int, running bool) {
		if s == 1 && running {
			if slices.Contains(a.shards.owned(), 1) {
				t.Error("node-b started shard 1 while node-a still runs its writer")
			}
			mu.Lock()
			order = append(order, "b-started")
			mu.Unlock()
		}
	})

	// Events flow before, during and after the move.
	const total = 600
	published := make(chan error, 1)
	go func() {
		for i := range total {
			for _, typ := range []string{"click", "view"} {
				body := fmt.Appendf(nil, `{"time":%q,"data":{"n":%d}}`, time.Now().UTC().Format(time.RFC3339Nano), i)
				if _, err := js.Publish(context.Background(), "events."+typ, body); err != nil {
					published <- err
					return
				}
			}
		}
		published <- nil
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitFor("node-a to apply some view events", func() bool { return len(eventNumbers(t, a, "view")) > 0 })
	if err := queryrpc.MoveShard(t.Context(), kv, 1, "node-a", "node-b"); err != nil {
		t.Fatal(err)
	}
	if err := queryrpc.MoveShard(t.Context(), kv, 1, "node-a", "node-b"); !errors.Is(err, queryrpc.ErrOwnerChanged) {
		t.Errorf("a second move from the same state: %v, want ErrOwnerChanged", err)
	}
	waitFor("node-b to run shard 1", func() bool { return slices.Contains(b.shards.owned(), 1) })
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	waitFor("node-b to hold every view event", func() bool { return len(eventNumbers(t, b, "view")) >= total })
	waitFor("node-a to hold every click event", func() bool { return len(eventNumbers(t, a, "click")) >= total })

	mu.Lock()
	if !slices.Equal(order, []string{"a-stopped", "b-started"}) {
		t.Errorf("hand-over order %v, want node-a stopped, then node-b started", order)
	}
	mu.Unlock()
	want := make([]int, total)
	for i := range want {
		want[i] = i
	}
	if got := eventNumbers(t, b, "view"); !slices.Equal(got, want) {
		t.Errorf("node-b holds %d view events, want each of %d exactly once", len(got), total)
	}
	if got := eventNumbers(t, a, "click"); !slices.Equal(got, want) {
		t.Errorf("node-a holds %d click events, want each of %d exactly once", len(got), total)
	}
	if got := eventNumbers(t, b, "click"); len(got) != 0 {
		t.Errorf("node-b holds %d events of shard 0, which it does not own", len(got))
	}
	if got := a.shards.owned(); !slices.Equal(got, []int{0}) {
		t.Errorf("node-a runs shards %v after the move, want [0]", got)
	}
	if e, err := kv.Get(t.Context(), queryrpc.OwnerKey(1)); err != nil || string(e.Value()) != "node-b" {
		t.Errorf("shard 1's owner after the move: %v %v, want node-b", e, err)
	}
	// The nodes' read services report the shards they store now.
	client, err := queryrpc.NewClient(nc, queryrpc.ClientConfig{Owners: []string{"node-a", "node-b"}})
	if err != nil {
		t.Fatal(err)
	}
	fresh := client.Freshness(t.Context())
	if f := fresh["node-a"]; f == nil || !slices.Equal(f.Owned, []int{0}) {
		t.Errorf("node-a's freshness reply: %+v, want owned [0]", f)
	}
	if f := fresh["node-b"]; f == nil || !slices.Equal(f.Owned, []int{1}) {
		t.Errorf("node-b's freshness reply: %+v, want owned [1]", f)
	}
}

// TestNodeWithoutShardsStartsFirst: a node that owns no shard yet is the
// first to start on a fresh NATS: it creates the streams itself (its
// fan-out worker reads them), and is ready, waiting for shards.
func TestNodeWithoutShardsStartsFirst(t *testing.T) {
	ns := natstest.StartServer(t)
	cfg, err := parseConfig([]string{"--data", t.TempDir(), "--http", "127.0.0.1:0", "--nats-url", ns.ClientURL(), "--node-id", "idle",
		"--shards", "2", "--owners-kv", queryrpc.DefaultOwnersBucket}, envFrom(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	n, err := start(t.Context(), cfg, buildInfo{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	defer n.shutdown()
	if got := n.shards.owned(); len(got) != 0 {
		t.Errorf("runs shards %v, want none", got)
	}
	waitUntil(t, "the node to be ready", func() bool {
		ready, _ := n.health.Check()
		return ready
	})
}
