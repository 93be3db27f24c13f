package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkLatest50 measures GET /v1/events?type=...&limit=50 (the
// dashboard's "latest events") over HTTP, sequentially, against the
// all-in-one process (cmd/ingest reading its local storage) and through
// cmd/query over NATS with two storage nodes. Each has benchEvents events
// of the type in the last hour. It reports p50 and p99 besides ns/op
// (no concurrent ingestion: the loadtest harness measures that):
//
//	go test ./cmd/query -run '^$' -bench Latest50 -benchtime 2000x
func BenchmarkLatest50(b *testing.B) {
	benchBoth(b, time.Hour, "/v1/events?type=bench&limit=50")
}

// BenchmarkCounts24h measures GET /v1/counts over the last 24 hours at a
// one-minute step (1440 points, 25 hour partitions, one slice each), as
// BenchmarkLatest50 does:
//
//	go test ./cmd/query -run '^$' -bench Counts24h -benchtime 500x
func BenchmarkCounts24h(b *testing.B) {
	now := time.Now().UTC()
	benchBoth(b, 24*time.Hour, "/v1/counts?type=bench&step=1m&from="+now.Add(-24*time.Hour).Format(time.RFC3339)+"&to="+now.Add(time.Minute).Format(time.RFC3339))
}

// benchBoth runs target against both deployments, each holding
// benchEvents events of type bench spread over the last span.
func benchBoth(b *testing.B, span time.Duration, target string) {
	b.Run("all-in-one", func(b *testing.B) {
		natsAddr, httpAddr := freeAddr(b), freeAddr(b)
		cmd := exec.Command(buildIngest(b), "--data", b.TempDir(), "--nats-listen", natsAddr, "--http", httpAddr, "--log-level", "warn")
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
		benchGet(b, "http://"+httpAddr, "nats://"+natsAddr, span, target)
	})
	b.Run("cmd-query-2-nodes", func(b *testing.B) {
		d := startSplit(b)
		benchGet(b, d.base, d.natsURL, span, target)
	})
}

const benchEvents = 5000

func benchGet(b *testing.B, base, natsURL string, span time.Duration, path string) {
	waitStatus(b, base+"/readyz", 200, nil, &syncBuffer{})
	nc, err := nats.Connect(natsURL)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	acks := make([]jetstream.PubAckFuture, 0, benchEvents)
	for i := range benchEvents {
		at := now.Add(-time.Duration(i) * span / benchEvents)
		f, err := js.PublishAsync("events.bench", fmt.Appendf(nil, `{"time":%q,"user":"u%d","data":{"n":%d,"pad":"0123456789012345678901234567890123456789"}}`, at.Format(time.RFC3339Nano), i%100, i))
		if err != nil {
			b.Fatal(err)
		}
		acks = append(acks, f)
	}
	for _, f := range acks {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			b.Fatal(err)
		}
	}
	target := base + path
	// Until the last event is stored: the count of the hour's counts.
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/v1/counts?type=bench&step=1h&from=" + now.Add(-span-time.Hour).Format(time.RFC3339) + "&to=" + now.Add(time.Minute).Format(time.RFC3339))
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if sumCounts(body) == benchEvents {
				break
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("events not stored within 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		resp, err := client.Get(target)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
}

// sumCounts adds up the points of a /v1/counts answer; -1 when it is not
// one.
func sumCounts(body []byte) int {
	var c struct {
		Points []struct {
			Count int `json:"count"`
		} `json:"points"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return -1
	}
	n := 0
	for _, p := range c.Points {
		n += p.Count
	}
	return n
}
