package main

import (
	"fmt"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/eventide/eventide/writer"
)

// BenchmarkShardIngestNodes measures the ingest throughput of the storage
// tier with one storage node owning both shards (nodes=1) and with two
// nodes owning one shard each (nodes=2), on the same machine and one
// embedded NATS server: the stream holds a backlog of events of both
// shards, and events/s is that backlog over the time from starting the
// node(s) on empty data directories to every event applied. It is the
// writers' maximum rate (fetch, validate, one atomic storage batch per
// fetch, checkpoint), with the publisher out of the way. The nodes run in
// this process, each with its own store and NATS connection.
func BenchmarkShardIngestNodes(b *testing.B) {
	events := rebuildBenchEvents(b)
	for _, nodes := range []int{1, 2} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			rb := newRebuildBench(b)
			// The streams as a node of --shards 2 creates them, without
			// any consumer.
			cfg, err := parseConfig([]string{"--nats-url", rb.ns.ClientURL(), "--shards", "2", "--node-id", "setup"}, envFrom(nil), io.Discard)
			if err != nil {
				b.Fatal(err)
			}
			wcfg := cfg.Writer
			wcfg.Shards = 2
			if err := writer.EnsureStreams(b.Context(), rb.js.Conn(), wcfg); err != nil {
				b.Fatal(err)
			}
			for first := 0; first < events; first += 1000 { // events of each shard, in chunks under the async publish limit
				publishNumbered(b, rb.js, first, min(first+1000, events))
			}
			b.ResetTimer()
			var total time.Duration
			for i := range b.N {
				t0 := time.Now()
				var started []*node
				if nodes == 1 {
					started = append(started, rb.start("one"+strconv.Itoa(i), b.TempDir(), "--own-shards", "0-1"))
				} else {
					for s := range 2 {
						started = append(started, rb.start(fmt.Sprintf("n%d-%d", s, i), b.TempDir(), "--own-shards", strconv.Itoa(s)))
					}
				}
				for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(time.Millisecond) {
					var ingested uint64
					for _, n := range started {
						ingested += n.shards.Stats().Ingested
					}
					if ingested >= uint64(2*events) {
						break
					}
					if time.Now().After(deadline) {
						b.Fatalf("%d of %d events applied after 10 minutes", ingested, 2*events)
					}
				}
				total += time.Since(t0)
				b.StopTimer()
				for _, n := range started {
					if err := n.shutdown(); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(2*events)*float64(b.N)/total.Seconds(), "events/s")
		})
	}
}
