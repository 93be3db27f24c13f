package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eventide/eventide/internal/natstest"
)

// TestIngestLiveTail: on a running process, an event published to NATS
// comes out of /v1/events/stream once stored (with the stream sequence as
// its id, readable at once by /v1/events/{id}), the tail cap of
// --tail-max-clients holds, /v1/stats shows the tail and the storage
// tables, and shutdown ends the stream with its reason.
func TestIngestLiveTail(t *testing.T) {
	natsAddr, httpAddr := freeAddr(t), freeAddr(t)
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--data", t.TempDir(), "--nats-listen", natsAddr, "--http", httpAddr,
			"--tail-max-clients", "1", "--fanout=false"}, envFrom(nil), &stdout, &stderr)
	}()
	base := "http://" + httpAddr
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	waitReady(t, client, base, done, &stderr)

	streamCtx, stopStream := context.WithCancel(context.Background())
	defer stopStream()
	req, _ := http.NewRequestWithContext(streamCtx, "GET", base+"/v1/events/stream?type=click", nil)
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			lines <- strings.TrimSuffix(line, "\n")
		}
	}()
	// next returns the value of the next line starting with prefix.
	next := func(prefix string) string {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the stream ended waiting for %q", prefix)
				}
				if v, ok := strings.CutPrefix(l, prefix); ok {
					return v
				}
			case <-deadline:
				t.Fatalf("no %q line within 20s", prefix)
			}
		}
	}

	// The cap: a second client gets 503.
	second, err := client.Get(base + "/v1/events/stream")
	if err != nil {
		t.Fatal(err)
	}
	second.Body.Close()
	if second.StatusCode != 503 {
		t.Errorf("second stream with --tail-max-clients 1: %d, want 503", second.StatusCode)
	}

	_, js := natstest.Connect(t, "nats://"+natsAddr)
	body := fmt.Sprintf(`{"time":%q,"data":{"button":"buy"}}`, time.Now().UTC().Format(time.RFC3339Nano))
	ack, err := js.Publish(t.Context(), "events.click", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if id := next("id: "); id != fmt.Sprint(ack.Sequence) {
		t.Errorf("event id %s, want the stream sequence %d", id, ack.Sequence)
	}
	var ev struct {
		ID   string          `json:"id"`
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(next("data: ")), &ev); err != nil || ev.Type != "click" || string(ev.Data) != `{"button":"buy"}` {
		t.Fatalf("streamed event %+v (%v)", ev, err)
	}
	var one map[string]any
	getJSON(t, client, base+"/v1/events/"+ev.ID, 200, &one)

	var stats struct {
		Storage struct {
			Tables []struct {
				Name string `json:"name"`
			} `json:"tables"`
		} `json:"storage"`
		Consumers []struct {
			Name       string `json:"name"`
			AppliedSeq uint64 `json:"applied_seq"`
		} `json:"consumers"`
		Tail *struct {
			Clients   int    `json:"clients"`
			NewestSeq uint64 `json:"newest_seq"`
		} `json:"tail"`
	}
	getJSON(t, client, base+"/v1/stats", 200, &stats)
	if len(stats.Storage.Tables) == 0 || len(stats.Consumers) != 1 || stats.Consumers[0].Name != "writer" || stats.Consumers[0].AppliedSeq < ack.Sequence ||
		stats.Tail == nil || stats.Tail.Clients != 1 || stats.Tail.NewestSeq != ack.Sequence {
		t.Errorf("stats: %+v", stats)
	}

	// Shutdown ends the stream with a reason rather than holding the
	// server's shutdown until its timeout.
	cancel()
	if ev := next("event: "); ev != "error" {
		t.Errorf("at shutdown: event %q, want error", ev)
	}
	if data := next("data: "); !strings.Contains(data, `"reason":"shutdown"`) {
		t.Errorf("at shutdown: %s", data)
	}
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
}
