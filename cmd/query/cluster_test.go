package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/internal/natstest"
	"github.com/eventide/eventide/internal/queryrpc"
)

// queryNumbers pages through every event of typ between from and to
// through cmd/query at base and returns the "n" of each, sorted; partial
// says whether any page was partial.
func queryNumbers(t *testing.T, base, typ string, from, to time.Time) (out []int, partial bool) {
	t.Helper()
	target := base + "/v1/events?type=" + url.QueryEscape(typ) + "&limit=10000&from=" + url.QueryEscape(from.UTC().Format(time.RFC3339Nano)) +
		"&to=" + url.QueryEscape(to.UTC().Format(time.RFC3339Nano))
	page := ""
	for {
		var a struct {
			eventsAnswer
			NextPage string `json:"next_page"`
		}
		getAnswer(t, target+page, 200, &a)
		partial = partial || a.Partial
		for _, e := range a.Events {
			var data struct{ N int }
			if err := json.Unmarshal(e.Data, &data); err != nil {
				t.Fatal(err)
			}
			out = append(out, data.N)
		}
		if a.NextPage == "" {
			break
		}
		page = "&page=" + url.QueryEscape(a.NextPage)
	}
	slices.Sort(out)
	return out, partial
}

// pollUntil calls cond until it holds, failing the test after a minute.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// ackedPublisher publishes events continuously, event n of type
// types[n%len(types)] with "n" in its data, and records each one
// JetStream acknowledged. It retries an event until it is acknowledged,
// with a message id so that a retry of an event that had been stored is
// not stored twice: every event stored is acknowledged and recorded.
type ackedPublisher struct {
	types []string
	mu    sync.Mutex
	acked map[string][]int
	stop  chan struct{}
	done  chan error
}

func startAckedPublisher(js jetstream.JetStream, types []string) *ackedPublisher {
	p := &ackedPublisher{types: types, acked: map[string][]int{}, stop: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		// About 500 events/s: enough to keep every shard busy through
		// each step, few enough for a loaded 2-core machine.
		pace := time.NewTicker(2 * time.Millisecond)
		defer pace.Stop()
		for n := 0; ; n++ {
			select {
			case <-p.stop:
				p.done <- nil
				return
			case <-pace.C:
			}
			typ := types[n%len(types)]
			body := fmt.Appendf(nil, `{"time":%q,"data":{"n":%d}}`, time.Now().UTC().Format(time.RFC3339Nano), n)
			for attempt := 0; ; attempt++ {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := js.Publish(ctx, "events."+typ, body, jetstream.WithMsgID(fmt.Sprint("cluster-", n)))
				cancel()
				if err == nil {
					break
				}
				if attempt > 200 {
					p.done <- fmt.Errorf("cannot publish event %d: %w", n, err)
					return
				}
				time.Sleep(50 * time.Millisecond) // pacing retries while the cluster recovers
			}
			p.mu.Lock()
			p.acked[typ] = append(p.acked[typ], n)
			p.mu.Unlock()
		}
	}()
	return p
}

// count is how many events have been acknowledged.
func (p *ackedPublisher) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	total := 0
	for _, ns := range p.acked {
		total += len(ns)
	}
	return total
}

// finish stops publishing and returns the acknowledged events by type.
func (p *ackedPublisher) finish(t *testing.T) map[string][]int {
	t.Helper()
	close(p.stop)
	if err := <-p.done; err != nil {
		t.Fatal(err)
	}
	return p.acked
}

// typesByShard returns one event type per shard (types[s] is in shard s).
func typesByShard(t *testing.T) []string {
	t.Helper()
	types := make([]string, testShards)
	found := 0
	for i := 0; found < testShards && i < 1000; i++ {
		typ := fmt.Sprint("type", i)
		if s := bucket.EventShard(bucket.DefaultEventSubjectPrefix, typ, testShards); types[s] == "" {
			types[s] = typ
			found++
		}
	}
	if found < testShards {
		t.Fatalf("no type for every shard: %v", types)
	}
	return types
}

// TestClusterScenario is issue 14's integration test on loopback: a
// 3-node NATS cluster (R3 streams and owners bucket), two storage nodes
// as child processes (node-a owning shards 0-1, node-b 2-3, through the
// owners bucket) and cmd/query watching the bucket. Events are published
// continuously, each acknowledgement recorded, while
//  1. one NATS server is stopped and restarted: publishing and queries
//     go on;
//  2. node-b is SIGKILLed and restarted on an empty data directory: it
//     rebuilds its shards from the stream and turns ready when caught up;
//  3. shard 1 moves from node-a to node-b through the owners bucket.
//
// At the end cmd/query answers every acknowledged event exactly once, and
// nothing else.
func TestClusterScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node NATS cluster, two storage nodes and cmd/query")
	}
	c := natstest.StartCluster(t)
	nc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the cluster's JetStream meta leader", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
	nodeArgs := func(own string) []string {
		return []string{"--replicas", "3", "--owners-kv", queryrpc.DefaultOwnersBucket, "--own-shards", own, "--fanout=false"}
	}
	nodes := map[string]*storageNode{
		"node-a": startNodeArgs(t, c.URLs(), "node-a", nodeArgs("0-1")...),
		"node-b": startNodeArgs(t, c.URLs(), "node-b", nodeArgs("2-3")...),
	}
	base := startQuery(t, &syncBuffer{}, "--nats-url", c.URLs(), "--shards", fmt.Sprint(testShards),
		"--owners", "0-1=node-a,2-3=node-b", "--owners-kv", queryrpc.DefaultOwnersBucket, "--node-timeout", "2s")
	kv, err := js.KeyValue(t.Context(), queryrpc.DefaultOwnersBucket)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := kv.Status(t.Context()); err != nil || st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Replicas != 3 {
		t.Fatalf("owners bucket: %v %v, want 3 replicas", st, err)
	}

	types := typesByShard(t)
	start := time.Now().Add(-time.Minute)
	p := startAckedPublisher(js, types)
	defer func() {
		select {
		case <-p.stop:
		default:
			close(p.stop)
			<-p.done
		}
	}()
	// readable reports whether cmd/query answers at least one event of
	// every type (partial answers allowed).
	readable := func() bool {
		for _, typ := range types {
			if got, _ := queryNumbers(t, base, typ, start, time.Now().Add(time.Minute)); len(got) == 0 {
				return false
			}
		}
		return true
	}
	pollUntil(t, "events of every shard to be readable through cmd/query", readable)

	// 1. One NATS server down: acknowledgements go on (the other two are a
	// quorum for every R3 stream) and cmd/query keeps answering.
	c.Stop(1)
	acked := p.count()
	pollUntil(t, "200 more acknowledged events with a NATS server down", func() bool { return p.count() >= acked+200 })
	for _, typ := range types {
		queryNumbers(t, base, typ, start, time.Now().Add(time.Minute)) // fails unless 200
	}
	c.Start(1)

	// 2. node-b SIGKILLed; events of its shards are acknowledged while it is
	// dead; it comes back on an empty data directory and startNodeArgs
	// returns once its /readyz says it has caught up.
	b := nodes["node-b"]
	if err := b.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-b.exited
	acked = p.count()
	pollUntil(t, "200 more acknowledged events with node-b dead", func() bool { return p.count() >= acked+200 })
	nodes["node-b"] = startNodeArgs(t, c.URLs(), "node-b", nodeArgs("2-3")...)

	// 3. Shard 1 moves from node-a to node-b. The move is retried while a
	// leader may still be elected after the restart; a retry after a move
	// that did apply fails with ErrOwnerChanged, which means it is done.
	pollUntil(t, "the move of shard 1 to be accepted", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		err := queryrpc.MoveShard(ctx, kv, 1, "node-a", "node-b")
		return err == nil || errors.Is(err, queryrpc.ErrOwnerChanged)
	})
	pollUntil(t, "node-a to release shard 1 to node-b", func() bool {
		e, err := kv.Get(t.Context(), queryrpc.OwnerKey(1))
		if err != nil {
			return false
		}
		v, err := queryrpc.ParseOwnerValue(e.Value())
		return err == nil && v == queryrpc.OwnerValue{Owner: "node-b"}
	})
	acked = p.count()
	pollUntil(t, "200 more acknowledged events after the move", func() bool { return p.count() >= acked+200 })

	want := p.finish(t)
	for _, typ := range types {
		if len(want[typ]) == 0 {
			t.Fatalf("no acknowledged event of %s", typ)
		}
	}
	end := time.Now().Add(time.Minute)
	for s, typ := range types {
		var got []int
		var partial bool
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			got, partial = queryNumbers(t, base, typ, start, end)
			if !partial && slices.Equal(got, want[typ]) {
				break
			}
			if len(got) > len(want[typ]) || time.Now().After(deadline) {
				t.Fatalf("shard %d (%s): cmd/query answers %d events (partial %v), want each of the %d acknowledged exactly once; %s",
					s, typ, len(got), partial, len(want[typ]), diffNumbers(got, want[typ]))
			}
		}
	}
}

// diffNumbers describes how got differs from want (both sorted): the
// first few missing and duplicated or unexpected numbers.
func diffNumbers(got, want []int) string {
	wanted := map[int]int{}
	for _, n := range want {
		wanted[n]++
	}
	var extra []int
	for _, n := range got {
		if wanted[n] == 0 {
			extra = append(extra, n)
			continue
		}
		wanted[n]--
	}
	var missing []int
	for _, n := range want {
		if wanted[n] > 0 {
			missing = append(missing, n)
			wanted[n]--
		}
	}
	return fmt.Sprintf("missing %v, duplicated or unexpected %v", missing[:min(len(missing), 10)], extra[:min(len(extra), 10)])
}
