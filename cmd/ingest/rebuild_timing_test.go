package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/internal/natsembed"
	"github.com/eventide/eventide/internal/queryrpc"
)

// rebuildBenchEvents is how many events of each of the two shards the
// rebuild benchmarks publish (EVENTIDE_REBUILD_EVENTS overrides it).
func rebuildBenchEvents(b *testing.B) int {
	if v := os.Getenv("EVENTIDE_REBUILD_EVENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("EVENTIDE_REBUILD_EVENTS=%q", v)
		}
		return n
	}
	return 20000
}

type rebuildBench struct {
	b  *testing.B
	ns interface{ ClientURL() string }
	js jetstream.JetStream
}

func newRebuildBench(b *testing.B) *rebuildBench {
	ns, err := natsembed.Start(natsembed.Config{Listen: "127.0.0.1:0", StoreDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { natsembed.Stop(ns) })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	return &rebuildBench{b: b, ns: ns, js: js}
}

func (rb *rebuildBench) start(id, data string, extra ...string) *node {
	args := append([]string{"--data", data, "--http", "127.0.0.1:0", "--nats-url", rb.ns.ClientURL(), "--node-id", id,
		"--shards", "2", "--fanout=false"}, extra...)
	cfg, err := parseConfig(args, envFrom(nil), io.Discard)
	if err != nil {
		rb.b.Fatal(err)
	}
	n, err := start(rb.b.Context(), cfg, buildInfo{}, slog.New(slog.DiscardHandler))
	if err != nil {
		rb.b.Fatalf("start %s: %v", id, err)
	}
	return n
}

// waitCaughtUp waits until n runs the shards want and each has caught up.
func waitCaughtUp(b *testing.B, n *node, want ...int) {
	for deadline := time.Now().Add(10 * time.Minute); !slices.Equal(n.shards.owned(), want) || n.shards.Ready() != nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("node not caught up after 10 minutes: %v", n.shards.Ready())
		}
	}
}

// BenchmarkShardRebuild measures how fast a storage node with an empty
// data directory rebuilds two shards from the stream (stream), restores
// them from a copy of a node's storage directory taken at 90% and replays
// the last 10% (snapshot), and imports per-shard snapshots taken at 90%
// from a running node and replays the last 10% (shard-snapshot): events/s
// is the shards' events over the time from start to caught up.
func BenchmarkShardRebuild(b *testing.B) {
	events := rebuildBenchEvents(b)
	for _, mode := range []string{"stream", "snapshot", "shard-snapshot"} {
		b.Run(mode, func(b *testing.B) {
			rb := newRebuildBench(b)
			dataA := b.TempDir()
			shardSnapshots := b.TempDir()
			a := rb.start("node-a", dataA, "--own-shards", "0-1", "--admin", "127.0.0.1:0", "--snapshot-dir", shardSnapshots)
			// cut: the events published before the snapshot; replayed:
			// what the new node applies from the stream.
			cut, replayed := events, 2*events
			if mode != "stream" {
				cut = events * 9 / 10
				replayed = 2 * (events - cut)
			}
			publishNumbered(b, rb.js, 0, cut)
			waitCaughtUp(b, a, 0, 1)
			for a.shards.Stats().Ingested < uint64(2*cut) {
				time.Sleep(time.Millisecond)
			}
			if mode == "shard-snapshot" {
				for s := range 2 {
					if _, err := a.snapshotShard(b.Context(), s); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := a.shutdown(); err != nil {
				b.Fatal(err)
			}
			snapshot := filepath.Join(b.TempDir(), "snap")
			copyTree(b, filepath.Join(dataA, "storage"), snapshot)
			publishNumbered(b, rb.js, cut, events)
			b.ResetTimer()
			var total time.Duration
			for i := range b.N {
				id := "node-b" + strconv.Itoa(i)
				extra := []string{"--own-shards", "0-1"}
				switch mode {
				case "snapshot":
					extra = append(extra, "--restore-from", snapshot, "--restore-node", "node-a")
				case "shard-snapshot":
					extra = append(extra, "--restore-shards-from", shardSnapshots)
				}
				t0 := time.Now()
				n := rb.start(id, b.TempDir(), extra...)
				waitCaughtUp(b, n, 0, 1)
				for n.shards.Stats().Ingested < uint64(replayed) {
					time.Sleep(time.Millisecond)
				}
				total += time.Since(t0)
				b.StopTimer()
				if err := n.shutdown(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(2*events)*float64(b.N)/total.Seconds(), "events/s")
			b.ReportMetric(float64(replayed), "replayed-events")
		})
	}
}

// BenchmarkShardFailover measures, with the owners bucket, the time from
// the change that gives a dead node's shard to another, running node (an
// operator's or a supervisor's ForceOwner, or a lease expiry) to that
// shard serving again on the new owner, which rebuilds it from the stream
// (stream) or imports a per-shard snapshot taken at 90% and replays the
// last 10% (shard-snapshot).
func BenchmarkShardFailover(b *testing.B) {
	events := rebuildBenchEvents(b)
	for _, mode := range []string{"stream", "shard-snapshot"} {
		b.Run(mode, func(b *testing.B) {
			rb := newRebuildBench(b)
			kvArgs := []string{"--owners-kv", queryrpc.DefaultOwnersBucket}
			snapshots := b.TempDir()
			a := rb.start("node-a", b.TempDir(), append(kvArgs, "--own-shards", "1", "--admin", "127.0.0.1:0", "--snapshot-dir", snapshots)...)
			cut, replayed := events, events
			if mode == "shard-snapshot" {
				cut = events * 9 / 10
				replayed = events - cut
			}
			publishNumbered(b, rb.js, 0, cut)
			waitCaughtUp(b, a, 1)
			for a.shards.Stats().Ingested < uint64(cut) {
				time.Sleep(time.Millisecond)
			}
			if mode == "shard-snapshot" {
				if _, err := a.snapshotShard(b.Context(), 1); err != nil {
					b.Fatal(err)
				}
			}
			publishNumbered(b, rb.js, cut, events)
			// The writer that the snapshot paused counts from its restart.
			for a.shards.Stats().Ingested < uint64(replayed) {
				time.Sleep(time.Millisecond)
			}
			if err := a.shutdown(); err != nil { // node-a dies
				b.Fatal(err)
			}
			kv, err := rb.js.KeyValue(b.Context(), queryrpc.DefaultOwnersBucket)
			if err != nil {
				b.Fatal(err)
			}
			owner := "node-a"
			b.ResetTimer()
			var total time.Duration
			for i := range b.N {
				b.StopTimer()
				id := "node-b" + strconv.Itoa(i)
				n := rb.start(id, b.TempDir(), append(kvArgs, "--restore-shards-from", snapshots)...)
				b.StartTimer()
				t0 := time.Now()
				if err := queryrpc.ForceOwner(b.Context(), kv, 1, queryrpc.OwnerValue{Owner: owner}, id); err != nil {
					b.Fatal(err)
				}
				waitCaughtUp(b, n, 1)
				for n.shards.Stats().Ingested < uint64(replayed) {
					time.Sleep(time.Millisecond)
				}
				total += time.Since(t0)
				b.StopTimer()
				if err := n.shutdown(); err != nil {
					b.Fatal(err)
				}
				owner = id
				b.StartTimer()
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s/failover")
			b.ReportMetric(float64(events)*float64(b.N)/total.Seconds(), "events/s")
			b.ReportMetric(float64(replayed), "replayed-events")
		})
	}
}
