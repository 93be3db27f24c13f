package main

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/internal/natstest"
)

// TestStorageNodeKilledAndRebuilt SIGKILLs a storage node, publishes more
// events of its shard while it is gone, and restarts it on an empty data
// directory: it rebuilds its shards from the stream, turns ready only
// then, and cmd/query answers every acknowledged event exactly once.
func TestStorageNodeKilledAndRebuilt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/ingest and runs two storage nodes")
	}
	d := startSplit(t)
	_, js := natstest.Connect(t, d.natsURL)
	if got := bucket.EventShard(bucket.DefaultEventSubjectPrefix, "view", testShards); got != 3 {
		t.Fatalf("type view is in shard %d, the test expects node-b's shard 3", got)
	}
	now := time.Now().UTC()
	publish := func(first, last int) {
		t.Helper()
		var futures []jetstream.PubAckFuture
		for i := first; i < last; i++ {
			body := fmt.Appendf(nil, `{"time":%q,"data":{"n":%d}}`, now.Add(-time.Duration(i)*100*time.Millisecond).Format(time.RFC3339Nano), i)
			f, err := js.PublishAsync("events.view", body)
			if err != nil {
				t.Fatal(err)
			}
			futures = append(futures, f)
		}
		natstest.AwaitAcks(t, futures)
	}
	numbers := func() ([]int, bool) {
		return queryNumbers(t, d.base, "view", now.Add(-2*time.Hour), now.Add(time.Minute))
	}
	// Many more events arrive while node-b is dead than before, so that
	// its rebuild takes a while and answering ready early would show.
	const before, total = 500, 30000
	publish(0, before)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if got, _ := numbers(); len(got) == before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first events never became readable")
		}
	}

	b := d.nodes["node-b"]
	if err := b.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-b.exited
	publish(before, total) // acknowledged by JetStream while node-b is dead

	// node-b comes back with an empty data directory; startNode returns
	// once its /readyz answers 200, which it does only when caught up.
	d.nodes["node-b"] = startNode(t, d.natsURL, "node-b", "2-3")
	want := make([]int, total)
	for i := range want {
		want[i] = i
	}
	// Ready means caught up to within one fetch (1000, the default
	// --fetch-batch): the rest follows at once.
	if got, partial := numbers(); partial || len(got) < total-1000 {
		t.Errorf("right after node-b turned ready again: %d events (partial %v), want at least %d of %d", len(got), partial, total-1000, total)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, partial := numbers()
		if !partial && slices.Equal(got, want) {
			break
		}
		if len(got) > total || time.Now().After(deadline) {
			t.Fatalf("after the rebuild: %d events (partial %v), want each of %d exactly once", len(got), partial, total)
		}
	}
}
