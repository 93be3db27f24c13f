package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

// TestTypesChangeAcrossRestarts: events stored with --types click:sub=4
// are all still served after a restart with click:sub=0 (they read back
// as 0 rows when the flag alone decided), events stored after the restart
// too, and a restart with the same settings records no new version.
func TestTypesChangeAcrossRestarts(t *testing.T) {
	data := t.TempDir()
	natsAddr := freeAddr(t)
	published := 0
	runWith := func(types string, publish int) string {
		t.Helper()
		httpAddr := freeAddr(t)
		var stdout, stderr syncBuffer
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, []string{"--data", data, "--nats-listen", natsAddr, "--http", httpAddr, "--types", types}, envFrom(nil), &stdout, &stderr)
		}()
		base := "http://" + httpAddr
		client := &http.Client{Timeout: 10 * time.Second}
		defer client.CloseIdleConnections()
		waitReady(t, client, base, done, &stderr)

		nc, err := nats.Connect("nats://" + natsAddr)
		if err != nil {
			t.Fatal(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC().Truncate(time.Millisecond)
		for i := range publish {
			body := fmt.Sprintf(`{"time":%q,"data":{"i":%d}}`, now.Add(-time.Duration(i)*time.Second).Format(time.RFC3339Nano), published+i)
			if _, err := js.Publish(t.Context(), "events.click", []byte(body)); err != nil {
				t.Fatalf("publish: %v", err)
			}
		}
		nc.Close()
		published += publish

		var page struct {
			Events []struct{ ID string }
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			getJSON(t, client, base+"/v1/events?type=click&limit=1000&from="+now.Add(-2*time.Hour).Format(time.RFC3339)+"&to="+now.Add(time.Minute).Format(time.RFC3339), 200, &page)
			if len(page.Events) == published {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("--types %s: /v1/events returned %d of %d clicks; log:\n%s", types, len(page.Events), published, stderr.String())
			}
			time.Sleep(20 * time.Millisecond) // polling the process under test; no event to wait on
		}
		client.CloseIdleConnections()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run: %v; log:\n%s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("run did not return 30s after cancel; log:\n%s", stderr.String())
		}
		return stderr.String()
	}
	versions := func() int {
		t.Helper()
		db, err := storage.Open(data+"/storage", storage.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		head, err := catalog.LoadEventTypes(db)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for v := head; v != nil; v = v.Previous {
			n++
		}
		return n
	}

	runWith("click:sub=4", 10)
	log := runWith("click:sub=0", 5)
	if !strings.Contains(log, "event type settings changed") {
		t.Errorf("the restart with new settings did not log the change:\n%s", log)
	}
	if n := versions(); n != 2 {
		t.Fatalf("%d settings versions after one change, want 2", n)
	}
	log = runWith("click:sub=0", 1)
	if strings.Contains(log, "event type settings changed") {
		t.Errorf("a restart with the same settings logged a change:\n%s", log)
	}
	if n := versions(); n != 2 {
		t.Errorf("%d settings versions after a restart with the same settings, want 2", n)
	}
}
