package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/internal/natstest"
	"github.com/eventide/eventide/internal/queryrpc"
)

// TestShardsOnCluster runs two storage nodes on a 3-node JetStream
// cluster with R3 streams and an R3 owners bucket: events flow while one
// NATS server is stopped and restarted and while a shard moves between the
// nodes; afterwards each node holds every event of its shards exactly
// once.
func TestShardsOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node NATS cluster")
	}
	c := natstest.StartCluster(t)
	nc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	// The cluster has a JetStream meta leader once an account request works.
	waitUntil(t, "the cluster's JetStream", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
	extra := []string{"--replicas", "3"}
	a := startShardNode(t, c.URLs(), "node-a", append(extra, "--own-shards", "all")...)
	b := startShardNode(t, c.URLs(), "node-b", extra...)
	kv, err := js.KeyValue(t.Context(), queryrpc.DefaultOwnersBucket)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := kv.Status(t.Context()); err != nil || st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Replicas != 3 {
		t.Fatalf("owners bucket: %v %v, want 3 replicas", st, err)
	}

	const total = 600
	published := make(chan error, 1)
	go func() {
		for i := range total {
			for _, typ := range []string{"click", "view"} {
				body := fmt.Appendf(nil, `{"time":%q,"data":{"n":%d}}`, time.Now().UTC().Format(time.RFC3339Nano), i)
				// Retry through the server restart and leader
				// elections, with a message id so a retried publish that
				// had been stored is not stored twice.
				for attempt := 0; ; attempt++ {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					_, err := js.Publish(ctx, "events."+typ, body, jetstream.WithMsgID(fmt.Sprintf("%s-%d", typ, i)))
					cancel()
					if err == nil {
						break
					}
					if attempt > 100 {
						published <- err
						return
					}
					time.Sleep(50 * time.Millisecond) // pacing retries while the cluster recovers
				}
			}
		}
		published <- nil
	}()

	waitUntil(t, "node-a to apply some events", func() bool { return len(eventNumbers(t, a, "view")) > 0 })
	c.Stop(1)
	// The move is retried while the cluster elects new leaders; a retry
	// after a move that did apply finds "node-a>node-b" (or "node-b") and
	// fails with ErrOwnerChanged, which means it is done.
	waitUntil(t, "the move to be accepted", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		err := queryrpc.MoveShard(ctx, kv, 1, "node-a", "node-b")
		return err == nil || errors.Is(err, queryrpc.ErrOwnerChanged)
	})
	waitUntil(t, "node-b to run shard 1", func() bool { return slices.Contains(b.shards.owned(), 1) })
	c.Start(1)
	if err := <-published; err != nil {
		t.Fatalf("publishing: %v", err)
	}
	waitUntil(t, "node-b to hold every view event", func() bool { return len(eventNumbers(t, b, "view")) >= total })
	waitUntil(t, "node-a to hold every click event", func() bool { return len(eventNumbers(t, a, "click")) >= total })
	want := make([]int, total)
	for i := range want {
		want[i] = i
	}
	if got := eventNumbers(t, b, "view"); !slices.Equal(got, want) {
		t.Errorf("node-b holds %d view events, want each of %d exactly once", len(got), total)
	}
	if got := eventNumbers(t, a, "click"); !slices.Equal(got, want) {
		t.Errorf("node-a holds %d click events, want each of %d exactly once", len(got), total)
	}
	if got := a.shards.owned(); !slices.Equal(got, []int{0}) {
		t.Errorf("node-a runs shards %v, want [0]", got)
	}
}
