package queryrpc

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

// TestTypeHoursScattered: each node's type index holds the types it
// stores; a slice through the client sees every node's types in
// clustering order, cut at the limit, each type's count from the node
// that owns its shard: the stale copies a node keeps of a shard that
// moved away are not added, even when they fill its first Limit rows
// and the owner no longer has the type at all. A silent node's shards
// are missed under TrackMisses.
func TestTypeHoursScattered(t *testing.T) {
	c := startCluster(t)
	at := time.Date(2026, 11, 24, 1, 10, 0, 0, time.UTC)
	// pick returns the first name prefix<n> whose shard node owns.
	pick := func(prefix, node string) string {
		for i := 0; ; i++ {
			typ := fmt.Sprintf("%s%d", prefix, i)
			if c.owners[bucket.EventShard(bucket.DefaultEventSubjectPrefix, typ, len(c.owners))] == node {
				return typ
			}
		}
	}
	alpha, gamma, zulu := pick("alpha", "node-a"), pick("gamma", "node-a"), pick("zulu", "node-a")
	beta, delta := pick("beta", "node-b"), pick("delta", "node-b")
	for node, counts := range map[string]map[string]int64{
		"node-a": {alpha: 3, gamma: 5},
		// gamma's and zulu's shard was node-b's before it moved to
		// node-a, which rebuilt gamma and no longer has zulu's hour.
		"node-b": {beta: 7, delta: 11, gamma: 50, zulu: 99},
	} {
		var b storage.Batch
		for typ, n := range counts {
			if err := catalog.AddCount(&b, typ, at, n); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.dbs[node].Apply(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
	}
	client, err := NewClient(c.nc, ClientConfig{Owners: c.owners, NodeTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	read := func(ctx context.Context, limit int, reverse bool) map[string]int64 {
		t.Helper()
		rows, err := client.Slice(ctx, storage.SliceQuery{Table: schema.TypeHoursTable, Partition: schema.TypeHoursPartition(at), Limit: limit, Reverse: reverse})
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		got := map[string]int64{}
		var order []string
		for rows.Next() {
			typ, n, err := catalog.DecodeTypeHour(rows.Row())
			if err != nil {
				t.Fatal(err)
			}
			got[typ] = n
			order = append(order, typ)
		}
		for i := 1; i < len(order); i++ {
			if (order[i-1] < order[i]) == reverse {
				t.Errorf("rows out of order: %v (reverse %v)", order, reverse)
			}
		}
		return got
	}
	want := map[string]int64{alpha: 3, beta: 7, delta: 11, gamma: 5}
	if got := read(t.Context(), 0, false); !maps.Equal(got, want) {
		t.Errorf("merged type index %v, want %v", got, want)
	}
	if got, want := read(t.Context(), 2, false), map[string]int64{alpha: 3, beta: 7}; !maps.Equal(got, want) {
		t.Errorf("limit 2: %v, want %v", got, want)
	}
	// node-b's first two rows in reverse are its stale zulu and gamma:
	// its own delta comes after them.
	if got, want := read(t.Context(), 2, true), map[string]int64{gamma: 5, delta: 11}; !maps.Equal(got, want) {
		t.Errorf("reverse, limit 2: %v, want %v", got, want)
	}
	c.servers["node-b"].Stop()
	ctx, missed := TrackMisses(t.Context())
	if got, want := read(ctx, 0, false), map[string]int64{alpha: 3, gamma: 5}; !maps.Equal(got, want) {
		t.Errorf("with node-b silent: %v, want node-a's %v", got, want)
	}
	if m := missed(); len(m) != 2 || m[0] != 2 || m[1] != 3 {
		t.Errorf("missed shards %v, want node-b's 2 and 3", m)
	}
}
