package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/fanout"
	"github.com/eventide/eventide/storage"
)

// metricValue reads one unlabelled sample from /metrics; -1 if absent.
func metricValue(t *testing.T, client *http.Client, base, name string) float64 {
	t.Helper()
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		return -1 // the process is starting or gone
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("metric %s: %v", name, err)
	}
	return v
}

// TestFanoutSIGKILL kills the ingest process (SIGKILL, a real child
// process) in the middle of the fan-out of three posts to 100,000
// followers, and restarts it on the same data directory: the fan-out
// completes, and every follower's timeline holds the three posts exactly
// once (no duplicate, no gap), newest first.
func TestFanoutSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("publishes 100,000 follows; skipped with -short")
	}
	const followers, posts = 100_000, 3
	bin := buildIngest(t)
	data := t.TempDir()
	natsAddr, httpAddr := freeAddr(t), freeAddr(t)
	base := "http://" + httpAddr
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	startChild := func() (*exec.Cmd, *syncBuffer, chan error) {
		var log syncBuffer
		cmd := exec.Command(bin, "--data", data, "--nats-listen", natsAddr, "--http", httpAddr,
			"--fanout-threshold", "200000", "--fanout-chunk-size", "100", "--fetch-wait", "10ms")
		cmd.Env = envWithoutEventide()
		cmd.Stdout, cmd.Stderr = io.Discard, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited, gone := make(chan error, 1), make(chan struct{})
		go func() {
			exited <- cmd.Wait()
			close(gone)
		}()
		t.Cleanup(func() {
			cmd.Process.Kill()
			<-gone
		})
		waitReady(t, client, base, exited, &log)
		return cmd, &log, exited
	}

	cmd, log, exited := startChild()
	nc, err := nats.Connect("nats://"+natsAddr, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Hour).UTC()
	// A loaded machine can keep 4,096 publishes unacknowledged for longer
	// than the default 200 ms stall wait, which fails the publish with
	// "stalled with too many outstanding async published messages".
	stall := jetstream.WithStallWait(30 * time.Second)
	for i := range followers {
		body := fmt.Sprintf(`{"time":%q,"user":"f%06d","author":"star"}`, start.Format(time.RFC3339Nano), i)
		if _, err := js.PublishAsync("events.follow", []byte(body), stall); err != nil {
			t.Fatal(err)
		}
	}
	for i := range posts {
		body := fmt.Sprintf(`{"time":%q,"author":"star","data":{"text":"p%d"}}`, start.Add(time.Duration(i+1)*time.Minute).Format(time.RFC3339Nano), i)
		if _, err := js.PublishAsync("events.post", []byte(body), stall); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(60 * time.Second):
		t.Fatal("publishing did not complete in 60s")
	}

	// Kill once a fifth of the rows are written.
	const rows = followers * posts
	deadline := time.Now().Add(3 * time.Minute)
	var before float64
	for before = metricValue(t, client, base, "eventide_fanout_timeline_rows_written_total"); before < rows/5; before = metricValue(t, client, base, "eventide_fanout_timeline_rows_written_total") {
		if time.Now().After(deadline) {
			t.Fatalf("the fan-out wrote %v rows in 3 minutes; log:\n%s", before, log)
		}
		time.Sleep(2 * time.Millisecond) // polling the child's metrics
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the killed process did not exit in 30s")
	}
	t.Log("killed")
	if before >= rows {
		t.Fatalf("the fan-out finished (%v rows) before the kill; the test needs a kill in its middle", before)
	}
	t.Logf("killed after about %v of %d timeline rows", before, rows)

	// Restart: the fan-out resumes and completes.
	cmd, log, exited = startChild()
	t.Log("restarted")
	deadline = time.Now().Add(3 * time.Minute)
	for {
		// Rows written by this process, then no pending chunk: the gauge
		// was refreshed after the workers started.
		if metricValue(t, client, base, "eventide_fanout_timeline_rows_written_total") > 0 &&
			metricValue(t, client, base, "eventide_fanout_pending_chunks") == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fan-out did not complete in 3 minutes after the restart; log:\n%s", log)
		}
		time.Sleep(20 * time.Millisecond) // polling the child's metrics
	}
	var first []string
	posts0, _ := readTimeline(t, client, base, "f000000", 20)
	first = posts0
	if fmt.Sprint(first) != "[star:p2 star:p1 star:p0]" {
		t.Errorf("timeline of f000000 over HTTP: %v, want the three posts newest first", first)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the restarted process did not stop cleanly: %v; log:\n%s", err, log)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the restarted process did not stop 60s after SIGTERM; log:\n%s", log)
	}

	// Every follower's stored timeline: the same three post ids, once.
	db, err := storage.Open(filepath.Join(data, "storage"), storage.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f, err := fanout.Open(db, fanout.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if refs, err := f.PendingChunks(context.Background(), 1); err != nil || len(refs) != 0 {
		t.Fatalf("pending chunks after the fan-out completed: %v %v", refs, err)
	}
	var want [][]byte
	for i := range followers {
		user := fmt.Sprintf("f%06d", i)
		it, err := db.Slice(context.Background(), storage.SliceQuery{Table: catalog.TimelineTable, Partition: []byte(user)})
		if err != nil {
			t.Fatal(err)
		}
		var got [][]byte
		for it.Next() {
			got = append(got, append([]byte(nil), it.Row().Clustering...))
		}
		err = it.Err()
		it.Close()
		if err != nil {
			t.Fatal(err)
		}
		if want == nil {
			want = got
			if len(want) != posts {
				t.Fatalf("%s stores %d timeline rows, want %d", user, len(want), posts)
			}
			for _, k := range want {
				if _, err := catalog.DecodePostKey(k); err != nil {
					t.Fatal(err)
				}
			}
		}
		if len(got) != posts || !bytes.Equal(bytes.Join(got, nil), bytes.Join(want, nil)) {
			t.Fatalf("%s stores %d timeline rows %x, want the %d of f000000 %x (a duplicate or a gap)", user, len(got), got, posts, want)
		}
	}
}
