package fanout

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

var (
	benchIngestFollowers = flag.Int("bench.ingestfollowers", 100_000, "followers of the author whose posts BenchmarkIngestDuringFanout fans out")
	benchIngestEvents    = flag.Int("bench.ingestevents", 100_000, "ordinary events BenchmarkIngestDuringFanout ingests per phase")
	benchIngestWorkers   = flag.Int("bench.ingestworkers", DefaultOptions().Workers, "Options.Workers of BenchmarkIngestDuringFanout")
	benchIngestPosts     = flag.Int("bench.ingestposts", 5, "posts fanned out during the second phase of BenchmarkIngestDuringFanout")
	benchIngestYield     = flag.Bool("bench.ingestyield", true, "BenchmarkIngestDuringFanout: the chunk workers yield to the writer's backlog (Options.WriterBusy, as cmd/ingest wires it)")
)

// BenchmarkIngestDuringFanout measures the writer's ingest rate of
// ordinary events (published over real NATS, stored by the writer) with
// the fan-out worker idle, then while it fans out posts by an author
// with bench.ingestfollowers pushed followers, on one store, one NATS
// server and one process, as cmd/ingest runs them. It reports both rates,
// their ratio, and the share of the fan-out's rows written while the
// second phase ingested, and how long the chunk workers yielded to the
// writer (-bench.ingestyield=false: never).
func BenchmarkIngestDuringFanout(b *testing.B) {
	for range b.N {
		e := newNATSEnv(b, func(o *Options) {
			o.LargeThreshold = int64(*benchIngestFollowers) * 2
			o.Workers = *benchIngestWorkers
			if !*benchIngestYield {
				o.WriterBusy = func() bool { return false }
			}
		})
		js, err := jetstream.New(e.nc, jetstream.WithPublishAsyncMaxPending(4096))
		if err != nil {
			b.Fatal(err)
		}
		at := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)
		publish := func(subject, body string) {
			if _, err := js.PublishAsync(subject, []byte(body), jetstream.WithStallWait(time.Minute)); err != nil {
				b.Fatal(err)
			}
		}
		settle := func() {
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(2 * time.Minute):
				b.Fatal("publishing did not complete in 2 minutes")
			}
		}
		for i := range *benchIngestFollowers {
			publish("events.follow", fmt.Sprintf(`{"time":%q,"user":"f%07d","author":"star"}`, at, i))
		}
		settle()
		stored := uint64(*benchIngestFollowers)
		e.waitFor("the follows", func() bool {
			return e.wr.Stats().Ingested >= stored && e.w.LastAppliedSeq() >= stored
		})

		// ingest publishes n clicks and returns events per second until
		// the writer stored the last.
		ingest := func() float64 {
			n := *benchIngestEvents
			start := time.Now()
			for i := range n {
				publish("events.click", fmt.Sprintf(`{"time":%q,"user":"u%d","data":{"i":%d}}`, at, i%1000, i))
			}
			settle()
			stored += uint64(n)
			e.waitFor("the clicks", func() bool { return e.wr.Stats().Ingested >= stored })
			return float64(n) / time.Since(start).Seconds()
		}
		idle := ingest()

		rows := func() float64 { return counterValue(b, e.reg, "eventide_fanout_timeline_rows_written_total", "") }
		before := rows()
		for i := range *benchIngestPosts {
			publish("events.post", fmt.Sprintf(`{"time":%q,"author":"star","data":{"n":%d}}`, at, i))
		}
		settle()
		stored += uint64(*benchIngestPosts)
		e.waitFor("the fan-out to start", func() bool { return rows() > before })
		startRows := rows()
		during := ingest()
		endRows := rows()
		total := float64(*benchIngestFollowers * *benchIngestPosts)
		e.waitFor("the fan-out to finish", func() bool {
			refs, err := e.f.PendingChunks(context.Background(), 1)
			return err == nil && len(refs) == 0
		})
		b.ReportMetric(idle, "events/s-idle")
		b.ReportMetric(during, "events/s-during-fanout")
		b.ReportMetric(during/idle, "ratio")
		b.ReportMetric((endRows-startRows)/total, "fanout-share-overlapped")
		b.ReportMetric(counterValue(b, e.reg, "eventide_fanout_yield_seconds_total", ""), "yield-s")
		e.stop()
		e.stop = func() {}
	}
}
