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
)

// timelineResp is a page of /v1/timeline/{user}.
type timelineResp struct {
	Posts []struct {
		ID, Author, Time string
		Data             struct{ Text string }
	}
	NextPage string `json:"next_page"`
}

// readTimeline reads user's whole timeline over HTTP in pages of limit
// and returns "author:text" of each post, newest first, and their ids.
func readTimeline(t *testing.T, client *http.Client, base, user string, limit int) (posts, ids []string) {
	t.Helper()
	page := ""
	for range 1000 {
		var r timelineResp
		getJSON(t, client, fmt.Sprintf("%s/v1/timeline/%s?limit=%d&page=%s", base, user, limit, page), 200, &r)
		for _, p := range r.Posts {
			posts = append(posts, p.Author+":"+p.Data.Text)
			ids = append(ids, p.ID)
		}
		if r.NextPage == "" {
			return posts, ids
		}
		page = r.NextPage
	}
	t.Fatalf("the timeline of %s does not end", user)
	return nil, nil
}

// TestFanoutEndToEnd publishes the seed literature's follow graph and
// posts over real NATS to the whole process, and reads the timelines over
// HTTP: in order, with the ids /v1/events returns; a delete disappears
// from them; the follower lists page.
func TestFanoutEndToEnd(t *testing.T) {
	before := goroutineIDs()
	data := t.TempDir()
	natsAddr, httpAddr := freeAddr(t), freeAddr(t)
	var stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--data", data, "--nats-listen", natsAddr, "--http", httpAddr, "--fetch-wait", "10ms"},
			envFrom(nil), &syncBuffer{}, &stderr)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
		checkNoLeakedGoroutines(t, before) // the worker and its chunk pool stopped too
	}()
	base := "http://" + httpAddr
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	waitReady(t, client, base, done, &stderr)

	nc, err := nats.Connect("nats://" + natsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Minute).UTC()
	n := 0
	publish := func(typ, fields string) {
		t.Helper()
		n++
		body := fmt.Sprintf(`{"time":%q,%s}`, start.Add(time.Duration(n)*time.Second).Format(time.RFC3339Nano), fields)
		if _, err := js.Publish(t.Context(), "events."+typ, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	post := func(author, text string) {
		publish("post", fmt.Sprintf(`"author":%q,"data":{"text":%q}`, author, text))
	}
	publish("follow", `"user":"gmason","author":"phenry"`)
	publish("follow", `"user":"gmason","author":"gwashington"`)
	publish("follow", `"user":"ahamilton","author":"jadams"`)
	publish("follow", `"user":"ahamilton","author":"gwashington"`)
	post("phenry", "give me liberty")
	post("gwashington", "first in war")
	post("jadams", "facts are stubborn")
	post("gwashington", "first in peace")
	post("tjefferson", "nobody follows me")
	publish("follow", `"user":"gmason"`) // no author: skipped, still stored

	want := map[string]string{
		"gmason":    "gwashington:first in peace,gwashington:first in war,phenry:give me liberty",
		"ahamilton": "gwashington:first in peace,jadams:facts are stubborn,gwashington:first in war",
		"jadams":    "",
	}
	waitTimelines := func() {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			ok := true
			for user, w := range want {
				if got, _ := readTimeline(t, client, base, user, 2); strings.Join(got, ",") != w {
					ok = false
					if time.Now().After(deadline) {
						t.Fatalf("timeline of %s: %q, want %q; log:\n%s", user, got, w, stderr.String())
					}
				}
			}
			if ok {
				return
			}
			time.Sleep(10 * time.Millisecond) // polling the process under test
		}
	}
	waitTimelines()

	// Timelines reflect the fan-out's consumer (filtered to its types).
	var fresh freshnessResp
	getJSON(t, client, base+"/v1/timeline/gmason", 200, &fresh)
	if s := fresh.Freshness.Shards; len(s) != 1 || s[0].AppliedSeq == 0 || s[0].AppliedTime == "" {
		t.Errorf("timeline freshness %+v, want shard 0 past sequence 0 with a time", fresh.Freshness)
	}

	// The ids are the stored events' (sent without ids: derived by the
	// writer). The writer and the fan-out are two consumers: the events
	// may be stored after the timelines show them, so this polls.
	_, ids := readTimeline(t, client, base, "gmason", 20)
	for deadline := time.Now().Add(30 * time.Second); ; {
		var events struct {
			Events []struct{ ID, Author string }
		}
		getJSON(t, client, base+"/v1/events?type=post&from="+start.Format(time.RFC3339)+"&limit=100", 200, &events)
		stored := map[string]bool{}
		for _, e := range events.Events {
			stored[e.ID] = true
		}
		var missing []string
		for _, id := range ids {
			if !stored[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timeline posts %v are not stored event ids (stored: %v)", missing, stored)
		}
		time.Sleep(10 * time.Millisecond) // polling the process under test
	}

	// A delete of gwashington's first post leaves both timelines at once.
	publish("post_delete", fmt.Sprintf(`"author":"gwashington","data":{"post_id":%q}`, ids[1]))
	want["gmason"] = "gwashington:first in peace,phenry:give me liberty"
	want["ahamilton"] = "gwashington:first in peace,jadams:facts are stubborn"
	waitTimelines()

	var follows struct {
		Users    []string
		NextPage string `json:"next_page"`
	}
	getJSON(t, client, base+"/v1/users/gwashington/followers?limit=1", 200, &follows)
	first, next := follows.Users, follows.NextPage
	follows.Users, follows.NextPage = nil, "" // Unmarshal would reuse them
	getJSON(t, client, base+"/v1/users/gwashington/followers?limit=1&page="+next, 200, &follows)
	if got := append(first, follows.Users...); strings.Join(got, ",") != "ahamilton,gmason" {
		t.Errorf("followers of gwashington: %v, want ahamilton, gmason", got)
	}
	follows.Users, follows.NextPage = nil, ""
	getJSON(t, client, base+"/v1/users/gmason/following", 200, &follows)
	if strings.Join(follows.Users, ",") != "gwashington,phenry" || follows.NextPage != "" {
		t.Errorf("gmason follows %+v", follows)
	}
	metrics := scrape(t, client, base)
	for _, m := range []string{`eventide_fanout_skipped_total{reason="missing_author"} 1`, "eventide_fanout_consumer_pending_messages", "eventide_fanout_batch_messages", "eventide_timeline_pull_merges"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	if strings.Contains(metrics, "_consumer_consumer_") {
		t.Errorf("/metrics has a doubled consumer prefix (the fan-out's consumer metrics are eventide_fanout_*):\n%s", metrics)
	}
}

// TestFanoutOff: with --fanout=false no fan-out consumer runs, /readyz
// has no fanout check, and the timeline routes answer 404 saying why.
func TestFanoutOff(t *testing.T) {
	data := t.TempDir()
	natsAddr, httpAddr := freeAddr(t), freeAddr(t)
	var stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--data", data, "--nats-listen", natsAddr, "--http", httpAddr},
			envFrom(map[string]string{"EVENTIDE_FANOUT": "false"}), &syncBuffer{}, &stderr)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	base := "http://" + httpAddr
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	waitReady(t, client, base, done, &stderr)
	var ready struct{ Checks []struct{ Name string } }
	getJSON(t, client, base+"/readyz", 200, &ready)
	for _, c := range ready.Checks {
		if c.Name == "fanout" {
			t.Errorf("/readyz has a fanout check with --fanout=false: %+v", ready)
		}
	}
	var p struct{ Detail string }
	getJSON(t, client, base+"/v1/timeline/gmason", 404, &p)
	if !strings.Contains(p.Detail, "--fanout=false") {
		t.Errorf("404 detail %q does not say why", p.Detail)
	}
	nc, err := nats.Connect("nats://" + natsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.Consumer(t.Context(), "EVENTS", "eventide-fanout"); err == nil {
		t.Error("the fan-out consumer exists with --fanout=false")
	}
}
