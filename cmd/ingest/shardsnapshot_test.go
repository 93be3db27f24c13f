package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/eventide/eventide/internal/natstest"
	"github.com/eventide/eventide/internal/queryrpc"
	"github.com/eventide/eventide/writer"
)

// startLoggedShardNode is startShardNode logging to log.
func startLoggedShardNode(t *testing.T, natsURL, id string, log io.Writer, extra ...string) *node {
	t.Helper()
	args := append([]string{"--data", t.TempDir(), "--http", "127.0.0.1:0", "--nats-url", natsURL, "--node-id", id,
		"--shards", "2", "--owners-kv", queryrpc.DefaultOwnersBucket, "--fetch-wait", "10ms", "--fanout=false"}, extra...)
	cfg, err := parseConfig(args, envFrom(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	n, err := start(t.Context(), cfg, buildInfo{}, slog.New(slog.NewTextHandler(log, nil)))
	if err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
	t.Cleanup(func() {
		if err := n.shutdown(); err != nil {
			t.Errorf("shutdown %s: %v", id, err)
		}
	})
	return n
}

// postSnapshot asks node n for a snapshot of shard s over its admin API.
func postSnapshot(t *testing.T, n *node, s int) shardSnapshotMeta {
	t.Helper()
	resp, err := http.Post(fmt.Sprintf("http://%s/admin/shards/%d/snapshot", n.adminLn.Addr(), s), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("snapshot of shard %d: %d %s", s, resp.StatusCode, body)
	}
	var meta shardSnapshotMeta
	if err := json.Unmarshal(body, &meta); err != nil {
		t.Fatalf("snapshot of shard %d: %v in %s", s, err, body)
	}
	return meta
}

// viewTotals reads, from a node's HTTP API, the sum of its view counts
// and the view count of its type index over the last two hours.
func viewTotals(t *testing.T, n *node) (counts, typeIndex int64) {
	t.Helper()
	now := time.Now()
	window := fmt.Sprintf("from=%s&to=%s", url.QueryEscape(now.Add(-2*time.Hour).Format(time.RFC3339)), url.QueryEscape(now.Add(time.Minute).Format(time.RFC3339)))
	var c struct {
		Points []struct{ Count int64 } `json:"points"`
	}
	getJSON(t, http.DefaultClient, fmt.Sprintf("http://%s/v1/counts?type=view&step=1h&%s", n.httpLn.Addr(), window), 200, &c)
	for _, p := range c.Points {
		counts += p.Count
	}
	var top struct {
		Types []struct {
			Type  string
			Count int64
		}
	}
	getJSON(t, http.DefaultClient, fmt.Sprintf("http://%s/v1/types/top?limit=10&%s", n.httpLn.Addr(), window), 200, &top)
	for _, ty := range top.Types {
		if ty.Type == "view" {
			typeIndex += ty.Count
		}
	}
	return counts, typeIndex
}

// checkImports checks eventide_shard_snapshot_imports_total{result} of n.
func checkImports(t *testing.T, n *node, result string, want float64) {
	t.Helper()
	if got := testutil.ToFloat64(n.shards.imports.WithLabelValues(result)); got != want {
		t.Errorf("%s: eventide_shard_snapshot_imports_total{result=%q} = %v, want %v", n.cfg.Shard.NodeID, result, got, want)
	}
}

func upTo(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// moveShard moves shard s from one node to another through the owners
// bucket and waits until the new owner runs it and has caught up.
func moveShard(t *testing.T, kv jetstream.KeyValue, s int, from, to *node) {
	t.Helper()
	if err := queryrpc.MoveShard(t.Context(), kv, s, from.cfg.Shard.NodeID, to.cfg.Shard.NodeID); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, fmt.Sprintf("%s to run shard %d", to.cfg.Shard.NodeID, s), func() bool {
		return slices.Contains(to.shards.owned(), s) && to.shards.Ready() == nil
	})
}

func ownersBucket(t *testing.T, js jetstream.JetStream) jetstream.KeyValue {
	t.Helper()
	kv, err := js.KeyValue(context.Background(), queryrpc.DefaultOwnersBucket)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// TestShardSnapshotHandOver: node-a, owning shards 0 and 1, writes a
// snapshot of shard 1; node-b, already running, gains shard 1 through the
// owners bucket, imports the snapshot, applies from the stream only what
// follows it, and then holds every event of the shard exactly once, with
// exact counts and type index.
func TestShardSnapshotHandOver(t *testing.T) {
	ns := natstest.StartServer(t)
	_, js := natstest.Connect(t, ns.ClientURL())
	snapDir := t.TempDir()
	var logB syncBuffer
	a := startLoggedShardNode(t, ns.ClientURL(), "node-a", io.Discard, "--own-shards", "all", "--admin", "127.0.0.1:0", "--snapshot-dir", snapDir)
	b := startLoggedShardNode(t, ns.ClientURL(), "node-b", &logB, "--restore-shards-from", snapDir)
	const before, after = 400, 150
	publishNumbered(t, js, 0, before)
	waitUntil(t, "node-a to store every view event", func() bool { return len(eventNumbers(t, a, "view")) == before })
	meta := postSnapshot(t, a, 1)
	if meta.Shard != 1 || meta.Seq == 0 || len(meta.Files) == 0 {
		t.Fatalf("snapshot description %+v", meta)
	}
	// The pause for the snapshot does not take the node out of service.
	if err := a.shards.Ready(); err != nil {
		t.Errorf("node-a is not ready right after a snapshot: %v", err)
	}
	tables := map[string]bool{}
	for _, f := range meta.Files {
		tables[f.Table] = true
	}
	if len(tables) != len(shardSnapshotTables) {
		t.Errorf("snapshot holds tables %v, want %v", tables, shardSnapshotTables)
	}
	// Node-a goes on applying shard 1 after the snapshot.
	publishNumbered(t, js, before, before+after)
	waitUntil(t, "node-a to store the later view events", func() bool { return len(eventNumbers(t, a, "view")) == before+after })

	moveShard(t, ownersBucket(t, js), 1, a, b)
	waitUntil(t, "node-b to hold every view event", func() bool { return len(eventNumbers(t, b, "view")) >= before+after })
	if got := eventNumbers(t, b, "view"); !slices.Equal(got, upTo(before+after)) {
		t.Errorf("node-b holds %d view events, want each of %d exactly once", len(got), before+after)
	}
	if got := eventNumbers(t, b, "click"); len(got) != 0 {
		t.Errorf("node-b holds %d events of shard 0, which the snapshot of shard 1 must not carry", len(got))
	}
	if n := ingestedOnceAtLeast(b.shards.writers()[1], after); n != after {
		t.Errorf("node-b applied %d events of shard 1 from the stream, want only the %d after the snapshot", n, after)
	}
	if c, ti := viewTotals(t, b); c != before+after || ti != before+after {
		t.Errorf("node-b counts %d views and its type index %d, want %d each", c, ti, before+after)
	}
	checkImports(t, b, importImported, 1)
	if !strings.Contains(logB.String(), "shard imported from a snapshot") {
		t.Errorf("node-b's log does not say it imported the snapshot:\n%s", logB.String())
	}
}

// TestShardSnapshotRefusedWithCheckpoint: a node whose store already
// holds a checkpoint of a shard (it owned the shard before) does not
// import the shard's snapshot when it gains the shard again: its counts
// already hold part of the shard's events, and counters add up. It
// replays from its own checkpoint, and its counts stay exact.
func TestShardSnapshotRefusedWithCheckpoint(t *testing.T) {
	ns := natstest.StartServer(t)
	_, js := natstest.Connect(t, ns.ClientURL())
	snapDir := t.TempDir()
	var logB syncBuffer
	a := startLoggedShardNode(t, ns.ClientURL(), "node-a", io.Discard, "--own-shards", "all", "--admin", "127.0.0.1:0", "--snapshot-dir", snapDir)
	b := startLoggedShardNode(t, ns.ClientURL(), "node-b", &logB, "--restore-shards-from", snapDir)
	kv := ownersBucket(t, js)
	const first, second = 200, 100
	publishNumbered(t, js, 0, first)
	waitUntil(t, "node-a to store every view event", func() bool { return len(eventNumbers(t, a, "view")) == first })
	// Node-b owns shard 1 for a while (no snapshot yet: it replays).
	moveShard(t, kv, 1, a, b)
	waitUntil(t, "node-b to store every view event", func() bool { return len(eventNumbers(t, b, "view")) == first })
	moveShard(t, kv, 1, b, a)
	publishNumbered(t, js, first, first+second)
	waitUntil(t, "node-a to store the later view events", func() bool { return len(eventNumbers(t, a, "view")) == first+second })
	postSnapshot(t, a, 1)
	moveShard(t, kv, 1, a, b)
	waitUntil(t, "node-b to hold every view event", func() bool { return len(eventNumbers(t, b, "view")) >= first+second })
	if got := eventNumbers(t, b, "view"); !slices.Equal(got, upTo(first+second)) {
		t.Errorf("node-b holds %d view events, want each of %d exactly once", len(got), first+second)
	}
	if c, ti := viewTotals(t, b); c != first+second || ti != first+second {
		t.Errorf("node-b counts %d views and its type index %d, want %d each", c, ti, first+second)
	}
	checkImports(t, b, importMissing, 1)
	checkImports(t, b, importRefused, 1)
	if log := logB.String(); !strings.Contains(log, "its snapshot is not imported") || strings.Contains(log, "shard imported from a snapshot") {
		t.Errorf("node-b's log does not say it refused the snapshot:\n%s", log)
	}
}

// TestShardSnapshotCorrupt: a snapshot with a damaged file is reported
// and not imported, whether the damage shows in the file's checksum or
// only in its blocks (the description rewritten to match); the shard is
// replayed from the stream and every event is there exactly once, with
// exact counts.
func TestShardSnapshotCorrupt(t *testing.T) {
	for _, mode := range []string{"file", "block"} {
		t.Run(mode, func(t *testing.T) {
			ns := natstest.StartServer(t)
			_, js := natstest.Connect(t, ns.ClientURL())
			snapDir := t.TempDir()
			var logB syncBuffer
			a := startLoggedShardNode(t, ns.ClientURL(), "node-a", io.Discard, "--own-shards", "all", "--admin", "127.0.0.1:0", "--snapshot-dir", snapDir)
			b := startLoggedShardNode(t, ns.ClientURL(), "node-b", &logB, "--restore-shards-from", snapDir)
			const total = 300
			publishNumbered(t, js, 0, total)
			waitUntil(t, "node-a to store every view event", func() bool { return len(eventNumbers(t, a, "view")) == total })
			meta := postSnapshot(t, a, 1)
			sdir := filepath.Join(snapDir, shardSnapshotDirName(1))
			var victim int
			for i, f := range meta.Files {
				if f.Table == "events" {
					victim = i
				}
			}
			path := filepath.Join(sdir, meta.Files[victim].Name)
			buf, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			buf[len(buf)/4] ^= 0x10
			if err := os.WriteFile(path, buf, 0o640); err != nil {
				t.Fatal(err)
			}
			if mode == "block" {
				sum, _, err := fileXXH64(path)
				if err != nil {
					t.Fatal(err)
				}
				meta.Files[victim].XXH64 = sum
				desc, _ := json.Marshal(meta)
				if err := os.WriteFile(filepath.Join(sdir, shardSnapshotMetaFile), desc, 0o640); err != nil {
					t.Fatal(err)
				}
			}
			moveShard(t, ownersBucket(t, js), 1, a, b)
			waitUntil(t, "node-b to hold every view event", func() bool { return len(eventNumbers(t, b, "view")) >= total })
			if got := eventNumbers(t, b, "view"); !slices.Equal(got, upTo(total)) {
				t.Errorf("node-b holds %d view events, want each of %d exactly once", len(got), total)
			}
			if n := ingestedOnceAtLeast(b.shards.writers()[1], total); n != total {
				t.Errorf("node-b applied %d events of shard 1 from the stream, want all %d (nothing imported)", n, total)
			}
			if c, ti := viewTotals(t, b); c != total || ti != total {
				t.Errorf("node-b counts %d views and its type index %d, want %d each", c, ti, total)
			}
			checkImports(t, b, importFailed, 1)
			log := logB.String()
			if !strings.Contains(log, "cannot import the snapshot of the shard") || !strings.Contains(log, meta.Files[victim].Name) {
				t.Errorf("node-b's log does not report the corrupt file %s:\n%s", meta.Files[victim].Name, log)
			}
			if err := b.db.Check(); err != nil {
				t.Errorf("node-b's store: %v", err)
			}
		})
	}
}

// FuzzDecodeShardSnapshot: whatever a SNAPSHOT file holds, decoding it
// never panics, and a description it accepts is of the shard and
// deployment asked for and names only plain files of the snapshot
// directory, of the shard's tables.
func FuzzDecodeShardSnapshot(f *testing.F) {
	f.Add([]byte(`{"format":1,"shard":1,"shards":2,"stream":"EVENTS","event_subject_prefix":"events.","checkpoint_seq":7,"files":[{"table":"events","name":"events-000001.sst","size":5,"xxh64":"a"}]}`))
	f.Add([]byte(`{"format":1,"shard":1,"shards":2,"stream":"EVENTS","event_subject_prefix":"events.","files":[]}`))
	f.Add([]byte(`{"format":1,"shard":1,"shards":2,"stream":"EVENTS","event_subject_prefix":"events.","files":[{"table":"events","name":"../x","size":0}]}`))
	f.Add([]byte(`{"format":1,"shard":1,"shards":2,"stream":"EVENTS","event_subject_prefix":"events.","files":[{"table":"_checkpoints","name":"x.sst"}]}`))
	f.Add([]byte(`{"format":1,"shard":1,"shards":2,"stream":"EVENTS","event_subject_prefix":"events.","files":[{"table":"events","name":"/"}]}`))
	f.Add([]byte(`{"format":2}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, desc []byte) {
		meta, err := decodeShardSnapshot(desc, "/snap/shard-1", 1, 2, "EVENTS", "events.")
		if err != nil {
			return
		}
		if meta.Shard != 1 || meta.Shards != 2 || meta.Stream != "EVENTS" || meta.EventSubjectPrefix != "events." || meta.Format != shardSnapshotFormat {
			t.Fatalf("accepted a description of another deployment: %+v", meta)
		}
		for _, fl := range meta.Files {
			if p := filepath.Join("/snap/shard-1", fl.Name); filepath.Dir(p) != "/snap/shard-1" || fl.Name == shardSnapshotMetaFile || !slices.Contains(shardSnapshotTables, fl.Table) {
				t.Fatalf("accepted a file outside the snapshot or of another table: %+v", fl)
			}
		}
	})
}

// TestShardSnapshotPeriodic: with --snapshot-interval a node writes
// snapshots of the shards it runs on its own, each one readable and
// covering what the shard had applied, and stops at shutdown.
func TestShardSnapshotPeriodic(t *testing.T) {
	ns := natstest.StartServer(t)
	_, js := natstest.Connect(t, ns.ClientURL())
	snapDir := t.TempDir()
	a := startLoggedShardNode(t, ns.ClientURL(), "node-a", io.Discard, "--own-shards", "all", "--snapshot-dir", snapDir, "--snapshot-interval", "20ms")
	const total = 100
	publishNumbered(t, js, 0, total)
	waitUntil(t, "node-a to store every event", func() bool {
		return len(eventNumbers(t, a, "view")) == total && len(eventNumbers(t, a, "click")) == total
	})
	applied := a.shards.writers()[1].Stats().LastAppliedSeq
	waitUntil(t, "a periodic snapshot of each shard covering every event", func() bool {
		for s := range 2 {
			meta, _, err := readShardSnapshot(snapDir, s, 2, "EVENTS", "events.")
			if err != nil || (s == 1 && meta.Seq < applied) {
				return false
			}
		}
		return true
	})
}

// TestShardSnapshotUnderLoad: snapshots taken while the shard's events
// keep arriving hold exactly what their checkpoint covers: the node that
// imports the last one and replays the rest ends with every event once
// and exact counts (data beyond the checkpoint would be counted twice,
// data short of it lost).
func TestShardSnapshotUnderLoad(t *testing.T) {
	ns := natstest.StartServer(t)
	_, js := natstest.Connect(t, ns.ClientURL())
	snapDir := t.TempDir()
	a := startLoggedShardNode(t, ns.ClientURL(), "node-a", io.Discard, "--own-shards", "all", "--admin", "127.0.0.1:0", "--snapshot-dir", snapDir)
	b := startLoggedShardNode(t, ns.ClientURL(), "node-b", io.Discard, "--restore-shards-from", snapDir)
	const total = 3000
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
	var last shardSnapshotMeta
	snapshots := 0
	for done := false; !done; {
		select {
		case err := <-published:
			if err != nil {
				t.Fatal(err)
			}
			done = true
			continue
		default:
		}
		if len(eventNumbers(t, a, "view")) > 0 {
			last = postSnapshot(t, a, 1)
			snapshots++
		}
	}
	t.Logf("%d snapshots taken while events arrived; the last covers stream sequence %d", snapshots, last.Seq)
	if last.Seq == 0 {
		t.Fatal("no snapshot taken")
	}
	moveShard(t, ownersBucket(t, js), 1, a, b)
	waitUntil(t, "node-b to hold every view event", func() bool { return len(eventNumbers(t, b, "view")) >= total })
	if got := eventNumbers(t, b, "view"); !slices.Equal(got, upTo(total)) {
		t.Errorf("node-b holds %d view events, want each of %d exactly once", len(got), total)
	}
	if c, ti := viewTotals(t, b); c != total || ti != total {
		t.Errorf("node-b counts %d views and its type index %d, want %d each", c, ti, total)
	}
	checkImports(t, b, importImported, 1)
	if st := b.shards.writers()[1].Stats(); st.Ingested >= total {
		t.Errorf("node-b applied %d view events from the stream: the snapshot (checkpoint %d) saved none", st.Ingested, last.Seq)
	}
}

// ingestedOnceAtLeast returns w's count of events applied from the stream
// once it reaches want, or after five seconds without: a writer counts a
// batch when its ack is done, a moment after its events can be read, so
// the count read as soon as they are visible may miss the last batch.
func ingestedOnceAtLeast(w *writer.Writer, want uint64) uint64 {
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := w.Stats().Ingested
		if n >= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(5 * time.Millisecond)
	}
}
