package queryrpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/internal/natsembed"
	"github.com/eventide/eventide/storage"
)

// cluster is two storage nodes serving over one embedded NATS server:
// node-a owns shards 0-1 and node-b shards 2-3.
type cluster struct {
	nc      *nats.Conn
	dbs     map[string]*storage.DB
	servers map[string]*Server
	owners  []string
}

const testShards = 4

// startNATS starts an embedded JetStream server on a loopback port for
// the test and returns a function opening connections to it (each closed
// at the test's end).
func startNATS(t *testing.T) (connect func() *nats.Conn) {
	t.Helper()
	ns, err := natsembed.Start(natsembed.Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { natsembed.Stop(ns) })
	return func() *nats.Conn {
		nc, err := nats.Connect(ns.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
}

// openStore opens a store in a temporary directory, with the built-in
// tables, closed at the test's end.
func openStore(t *testing.T) *storage.DB {
	t.Helper()
	db, err := storage.Open(t.TempDir(), storage.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := catalog.EnsureBuiltinTables(db); err != nil {
		t.Fatal(err)
	}
	return db
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	connect := startNATS(t)
	c := &cluster{nc: connect(), dbs: map[string]*storage.DB{}, servers: map[string]*Server{},
		owners: []string{"node-a", "node-a", "node-b", "node-b"}}
	for _, node := range []string{"node-a", "node-b"} {
		db := openStore(t)
		var owned []int
		for s, o := range c.owners {
			if o == node {
				owned = append(owned, s)
			}
		}
		srv, err := Serve(connect(), ServerConfig{Node: node, Store: db, Shards: testShards, Owned: owned,
			Writer: func() ConsumerPosition { return ConsumerPosition{AppliedSeq: 42, PendingKnown: true} },
			Ready:  func() error { return nil }, Metrics: db.Metrics})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Stop() })
		c.dbs[node], c.servers[node] = db, srv
	}
	return c
}

// fill writes rows of partitions p0..p19 of the events table, each to
// the node owning its shard, and of a replicated table to every node.
func (c *cluster) fill(t *testing.T) {
	t.Helper()
	for p := range 20 {
		partition := []byte(fmt.Sprintf("p%d", p))
		owner := c.owners[bucket.Shard(partition, testShards)]
		var b storage.Batch
		for r := range 30 {
			ck := []byte{byte(r)}
			b.Put(schema.EventsTable, partition, ck, []byte("data"), bytes.Repeat([]byte{byte('a' + r%26)}, 10+r*7), int64(1000+r))
			if r%3 == 0 {
				b.Put(schema.EventsTable, partition, ck, []byte("user"), []byte("u"), int64(1000+r))
			}
		}
		if err := c.dbs[owner].Apply(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
	}
	for _, db := range c.dbs {
		var b storage.Batch
		b.Put(schema.EventTypesTable, []byte("settings"), []byte{1}, []byte("settings"), []byte("v"), 1)
		if err := db.Apply(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
	}
}

func collect(t *testing.T, rows storage.Rows, err error) []storage.Row {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var out []storage.Row
	for rows.Next() {
		r := rows.Row()
		cp := storage.Row{Clustering: bytes.Clone(r.Clustering)}
		for _, c := range r.Cells {
			c.Column, c.Value = bytes.Clone(c.Column), bytes.Clone(c.Value)
			cp.Cells = append(cp.Cells, c)
		}
		out = append(out, cp)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRemoteSliceEqualsLocal: every slice through the client returns what
// the owning node's store returns, with replies cut by a small byte
// budget so most slices take several requests.
func TestRemoteSliceEqualsLocal(t *testing.T) {
	c := startCluster(t)
	c.fill(t)
	client, err := NewClient(c.nc, ClientConfig{Owners: c.owners, ByteBudget: 100})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	queries := []storage.SliceQuery{
		{},
		{Limit: 7},
		{Reverse: true, Limit: 11},
		{Start: storage.Bound{Key: []byte{5}, Inclusive: true}, End: storage.Bound{Key: []byte{20}}},
		{Start: storage.Bound{Key: []byte{5}}, End: storage.Bound{Key: []byte{20}, Inclusive: true}, Reverse: true, Limit: 4},
	}
	for p := range 20 {
		partition := []byte(fmt.Sprintf("p%d", p))
		owner := c.owners[bucket.Shard(partition, testShards)]
		for _, q := range queries {
			q.Table, q.Partition = schema.EventsTable, partition
			local, err := c.dbs[owner].Slice(ctx, q)
			want := collect(t, local, err)
			remote, err := client.Slice(ctx, q)
			got := collect(t, remote, err)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("partition %s query %+v: got %d rows, want %d (%v vs %v)", partition, q, len(got), len(want), got, want)
			}
			// The trace counts what the local read counts: a reply cut
			// by the budget ends at its last row, and the next request
			// reads on from there, so nothing is read twice.
			if st, lst := remote.Stats(), local.Stats(); st.Rows != lst.Rows || st.LiveCells != lst.LiveCells || st.TombstonesScanned != lst.TombstonesScanned {
				t.Errorf("partition %s query %+v: remote stats %+v, local %+v: want the same rows, cells and tombstones", partition, q, st, lst)
			}
		}
	}
}

// TestMissingShard: with a node stopped, its shards' slices are empty
// and recorded under TrackMisses, fail with ErrShardUnavailable without
// it, replicated tables are read from the other node, and Health names
// the silent node.
func TestMissingShard(t *testing.T) {
	c := startCluster(t)
	c.fill(t)
	client, err := NewClient(c.nc, ClientConfig{Owners: c.owners, NodeTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := client.Health(ctx); err != nil {
		t.Fatalf("health with both nodes up: %v", err)
	}
	if err := c.servers["node-b"].Stop(); err != nil {
		t.Fatal(err)
	}
	var bPartition, aPartition []byte
	for p := 0; bPartition == nil || aPartition == nil; p++ {
		partition := []byte(fmt.Sprintf("p%d", p))
		if c.owners[bucket.Shard(partition, testShards)] == "node-b" {
			bPartition = partition
		} else {
			aPartition = partition
		}
	}
	_, err = client.Slice(ctx, storage.SliceQuery{Table: schema.EventsTable, Partition: bPartition})
	if !errors.Is(err, ErrShardUnavailable) {
		t.Fatalf("slice of a stopped node's shard without TrackMisses: %v, want ErrShardUnavailable", err)
	}
	tctx, missing := TrackMisses(ctx)
	rows, err := client.Slice(tctx, storage.SliceQuery{Table: schema.EventsTable, Partition: bPartition})
	if got := collect(t, rows, err); len(got) != 0 {
		t.Errorf("a missing shard returned %d rows", len(got))
	}
	rows, err = client.Slice(tctx, storage.SliceQuery{Table: schema.EventsTable, Partition: aPartition})
	if got := collect(t, rows, err); len(got) != 30 {
		t.Errorf("node-a's partition returned %d rows, want 30", len(got))
	}
	if got, want := missing(), []int{bucket.Shard(bPartition, testShards)}; !slices.Equal(got, want) {
		t.Errorf("missing shards %v, want %v", got, want)
	}
	// The replicated table of a shard node-b owns is read from node-a.
	var replicated []byte
	for p := 0; replicated == nil; p++ {
		if k := []byte(fmt.Sprintf("settings%d", p)); c.owners[bucket.Shard(k, testShards)] == "node-b" {
			replicated = k
		}
	}
	var b storage.Batch
	b.Put(schema.EventTypesTable, replicated, []byte{1}, []byte("settings"), []byte("v"), 1)
	if err := c.dbs["node-a"].Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	rows, err = client.Slice(ctx, storage.SliceQuery{Table: schema.EventTypesTable, Partition: replicated})
	if got := collect(t, rows, err); len(got) != 1 {
		t.Errorf("replicated table read with its shard's owner down: %d rows, want 1", len(got))
	}
	err = client.Health(ctx)
	if err == nil || !strings.Contains(err.Error(), "node-b (shards 2,3)") || strings.Contains(err.Error(), "node-a") {
		t.Errorf("health with node-b down: %v", err)
	}
	stats, missingNodes := client.Stats(ctx)
	if len(stats) != 1 || stats["node-a"] == nil || !slices.Equal(missingNodes, []string{"node-b"}) || stats["node-a"].Storage.Batches == 0 ||
		stats["node-a"].Writer.AppliedSeq != 42 || !slices.Equal(stats["node-a"].Owned, []int{0, 1}) {
		t.Errorf("stats with node-b down: %+v, missing %v", stats, missingNodes)
	}
	fresh := client.Freshness(ctx)
	if len(fresh) != 1 || fresh["node-a"] == nil || fresh["node-a"].Writer.AppliedSeq != 42 || !slices.Equal(fresh["node-a"].Owned, []int{0, 1}) {
		t.Errorf("freshness with node-b down: %+v", fresh)
	}
}

// TestTooManyTombstonesCrossesTheWire: the node's tombstone abort reaches
// the reader as storage.ErrTooManyTombstones (HTTP 422), not as a failure.
func TestTooManyTombstonesCrossesTheWire(t *testing.T) {
	c := startCluster(t)
	var partition []byte
	for p := 0; partition == nil; p++ {
		if k := []byte(fmt.Sprintf("p%d", p)); c.owners[bucket.Shard(k, testShards)] == "node-a" {
			partition = k
		}
	}
	var b storage.Batch
	for r := range 20 {
		b.Put(schema.EventsTable, partition, []byte{byte(r)}, []byte("data"), []byte("x"), 1)
		b.DeleteRow(schema.EventsTable, partition, []byte{byte(r)}, 2)
	}
	if err := c.dbs["node-a"].Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	client, err := NewClient(c.nc, ClientConfig{Owners: c.owners})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := client.Slice(context.Background(), storage.SliceQuery{Table: schema.EventsTable, Partition: partition, MaxTombstones: 5})
	if err == nil {
		err = rows.Close()
	}
	if !errors.Is(err, storage.ErrTooManyTombstones) {
		t.Errorf("got %v, want an error wrapping storage.ErrTooManyTombstones", err)
	}
}

// TestDeadlineTravels: the node runs a slice under the deadline the
// request carries; one already past is answered 504, not run.
func TestDeadlineTravels(t *testing.T) {
	c := startCluster(t)
	c.fill(t)
	req := appendSliceRequest(nil, &sliceRequest{Query: storage.SliceQuery{Table: schema.EventsTable, Partition: []byte("p0")},
		Deadline: time.Now().Add(-time.Second)})
	owner := c.owners[bucket.Shard([]byte("p0"), testShards)]
	msg, err := c.nc.Request(DefaultSubjectPrefix+"."+owner+".slice", req, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "504" {
		t.Errorf("a request past its deadline: code %q (%s), want 504", code, msg.Header.Get("Nats-Service-Error"))
	}
	req = appendSliceRequest(nil, &sliceRequest{Query: storage.SliceQuery{Table: schema.EventsTable, Partition: []byte("p0")},
		Deadline: time.Now().Add(time.Minute)})
	msg, err = c.nc.Request(DefaultSubjectPrefix+"."+owner+".slice", req, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	reply, err := decodeSliceReply(msg.Data)
	if err != nil || len(reply.Rows) != 30 {
		t.Errorf("a request within its deadline: %v, %v", reply, err)
	}
}

// TestServerStopLeavesNoGoroutines: slices run in goroutines of their
// own; once Stop returned and the last ones answered, none is left.
func TestServerStopLeavesNoGoroutines(t *testing.T) {
	c := startCluster(t)
	c.fill(t)
	client, err := NewClient(c.nc, ClientConfig{Owners: c.owners})
	if err != nil {
		t.Fatal(err)
	}
	for p := range 20 {
		rows, err := client.Slice(context.Background(), storage.SliceQuery{Table: schema.EventsTable, Partition: []byte(fmt.Sprintf("p%d", p))})
		collect(t, rows, err)
	}
	for _, s := range c.servers {
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "queryrpc.(*Server)") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a storage service goroutine outlives Stop:\n%s", stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestServeAnswersOnReturn: a node's endpoints answer a request made on
// another connection as soon as Serve returns. Serve used to return with
// its subscriptions still in its connection's buffer, and a query
// service asking at once got "no responders" (a flaky test showed it).
func TestServeAnswersOnReturn(t *testing.T) {
	ns, err := natsembed.Start(natsembed.Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { natsembed.Stop(ns) })
	db, err := storage.Open(t.TempDir(), storage.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	asker, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(asker.Close)
	for i := range 20 {
		nc, err := nats.Connect(ns.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		node := fmt.Sprintf("node-%d", i)
		srv, err := Serve(nc, ServerConfig{Node: node, Store: db, Shards: 1, Owned: []int{0},
			Writer:  func() ConsumerPosition { return ConsumerPosition{} },
			Ready:   func() error { return nil },
			Metrics: db.Metrics})
		if err != nil {
			t.Fatal(err)
		}
		_, err = asker.Request(DefaultSubjectPrefix+"."+node+".health", nil, 5*time.Second)
		srv.Stop()
		nc.Close()
		if err != nil {
			t.Fatalf("health of %s right after Serve returned: %v", node, err)
		}
	}
}
