package main

import (
	"slices"
	"testing"
	"time"

	"github.com/eventide/eventide/internal/natstest"
	"github.com/eventide/eventide/internal/queryrpc"
)

// TestNodeLeaseFailover: with --node-lease, a shard not claimed yet is
// left to the node that claims it, a live node's shards stay with it
// through several lease periods; when a node dies (stops
// renewing its lease) the other node takes its shard over through the
// owners bucket without an operator, rebuilds it from the stream, and
// holds every event of it exactly once.
func TestNodeLeaseFailover(t *testing.T) {
	ns := natstest.StartServer(t)
	_, js := natstest.Connect(t, ns.ClientURL())
	lease := []string{"--node-lease", "1s"}
	a := launchShardNode(t, ns.ClientURL(), "node-a", append(lease, "--own-shards", "0")...)
	aStopped := false
	t.Cleanup(func() {
		if !aStopped {
			a.shutdown()
		}
	})
	leases, err := js.KeyValue(t.Context(), nodeLeasesBucket)
	if err != nil {
		t.Fatal(err)
	}
	// node-b starts after node-a has checked the owners three times: a
	// shard nobody has claimed yet is not node-a's to take.
	waitUntil(t, "node-a's lease to be renewed three times", func() bool {
		e, err := leases.Get(t.Context(), leaseKey("node-a"))
		return err == nil && e.Revision() >= 4
	})
	b := startShardNode(t, ns.ClientURL(), "node-b", append(lease, "--own-shards", "1")...)
	if got := b.shards.owned(); !slices.Equal(got, []int{1}) {
		t.Fatalf("node-b, started after node-a, runs shards %v, want its --own-shards [1]", got)
	}
	const total = 500
	publishNumbered(t, js, 0, total)
	waitUntil(t, "node-a to store every click event", func() bool { return len(eventNumbers(t, a, "click")) == total })

	// Both leases renewed four more times: more than a lease period, in
	// which node-b checked node-a's lease at least twice.
	first, err := leases.Get(t.Context(), leaseKey("node-a"))
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "node-a's lease to be renewed four times", func() bool {
		e, err := leases.Get(t.Context(), leaseKey("node-a"))
		return err == nil && e.Revision() >= first.Revision()+8 // node-b's renewals interleave
	})
	if got := a.shards.owned(); !slices.Equal(got, []int{0}) {
		t.Fatalf("node-a, alive, runs shards %v, want [0]", got)
	}
	if got := b.shards.owned(); !slices.Equal(got, []int{1}) {
		t.Fatalf("node-b runs shards %v while node-a is alive, want [1]", got)
	}

	// node-a dies: it stops renewing its lease (a clean stop keeps the
	// lease, as a crash does, until it expires).
	if err := a.shutdown(); err != nil {
		t.Fatal(err)
	}
	aStopped = true
	died := time.Now()
	publishNumbered(t, js, total, 2*total) // acknowledged while shard 0 has no live owner
	waitUntil(t, "node-b to take over shard 0", func() bool { return slices.Equal(b.shards.owned(), []int{0, 1}) })
	owners, err := js.KeyValue(t.Context(), queryrpc.DefaultOwnersBucket)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := owners.Get(t.Context(), queryrpc.OwnerKey(0)); err != nil || string(e.Value()) != "node-b" {
		t.Fatalf("owners bucket: shard 0 is %v (%v), want node-b", e, err)
	}
	want := make([]int, 2*total)
	for i := range want {
		want[i] = i
	}
	waitUntil(t, "node-b to serve every click event", func() bool { return len(eventNumbers(t, b, "click")) >= 2*total })
	t.Logf("from node-a's death to its shard serving every event on node-b: %v (lease 1s)", time.Since(died).Round(time.Millisecond))
	if got := eventNumbers(t, b, "click"); !slices.Equal(got, want) {
		t.Errorf("node-b holds %d click events, want each of %d exactly once", len(got), 2*total)
	}
	if got := eventNumbers(t, b, "view"); !slices.Equal(got, want) {
		t.Errorf("node-b holds %d view events, want each of %d exactly once", len(got), 2*total)
	}
}
