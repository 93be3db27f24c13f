package queryrpc

import (
	"context"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

// TestTypeHoursScattered: each node's type index holds the types it
// stores; a slice through the client sees every node's types, a type on
// both with its counts added, in clustering order, cut at the limit, and
// a silent node's shards are missed under TrackMisses.
func TestTypeHoursScattered(t *testing.T) {
	c := startCluster(t)
	at := time.Date(2026, 11, 24, 1, 10, 0, 0, time.UTC)
	for node, counts := range map[string]map[string]int64{
		"node-a": {"alpha": 3, "gamma": 5},
		"node-b": {"beta": 7, "gamma": 11},
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
	if got := read(t.Context(), 0, false); len(got) != 3 || got["alpha"] != 3 || got["beta"] != 7 || got["gamma"] != 16 {
		t.Errorf("merged type index %v, want alpha 3, beta 7, gamma 16", got)
	}
	if got := read(t.Context(), 2, false); len(got) != 2 || got["alpha"] != 3 || got["beta"] != 7 {
		t.Errorf("limit 2: %v, want alpha and beta", got)
	}
	if got := read(t.Context(), 1, true); len(got) != 1 || got["gamma"] != 16 {
		t.Errorf("reverse, limit 1: %v, want gamma 16", got)
	}
	c.servers["node-b"].Stop()
	ctx, missed := TrackMisses(t.Context())
	if got := read(ctx, 0, false); len(got) != 2 || got["gamma"] != 5 {
		t.Errorf("with node-b silent: %v, want node-a's alpha and gamma", got)
	}
	if m := missed(); len(m) != 2 || m[0] != 2 || m[1] != 3 {
		t.Errorf("missed shards %v, want node-b's 2 and 3", m)
	}
}
