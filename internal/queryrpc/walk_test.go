package queryrpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/reader"
	"github.com/eventide/eventide/storage"
)

// walkFixture is one storage node holding events over 48 hours: a sparse
// type (one event every 5 hours), a hot type in 4 sub-partitions with
// every 5th row deleted, and readers of the same data through cmd/query's
// client and locally.
type walkFixture struct {
	db    *storage.DB
	nc    *nats.Conn
	now   time.Time
	types *schema.EventTypes
	local *reader.Reader
}

func newWalkFixture(t *testing.T) *walkFixture {
	connect := startNATS(t)
	db := openStore(t)
	f := &walkFixture{db: db, nc: connect(), now: time.Date(2026, 11, 24, 2, 40, 0, 0, time.UTC),
		types: &schema.EventTypes{Types: map[string]schema.TypeSettings{"hot": {SubPartitions: 4}, "sparse": {}}}}
	rng := rand.New(rand.NewPCG(12, 7))
	var b storage.Batch
	put := func(typ string, at time.Time, i int) {
		id, err := bucket.NewTimeUUID(at, [8]byte{0x80, byte(rng.Uint32()), byte(i), byte(i >> 8), 4, 5, 6, 7})
		if err != nil {
			t.Fatal(err)
		}
		e := schema.Event{ID: id, Type: typ, User: fmt.Sprintf("u%d", i%13), Data: fmt.Appendf(nil, `{"i":%d,"pad":%q}`, i, strings.Repeat("x", rng.IntN(200)))}
		sub := f.types.Settings(typ).SubPartitions
		if err := catalog.PutEvent(&b, &e, sub, 0, f.now.UnixMicro()); err != nil {
			t.Fatal(err)
		}
		if typ == "hot" && i%5 == 0 {
			pk, _ := bucket.PartitionKeyFor(id, typ, sub)
			b.DeleteRow(schema.EventsTable, []byte(pk.String()), schema.EventClusteringKey(id), f.now.UnixMicro()+1)
		}
	}
	for i := range 10 {
		put("sparse", f.now.Add(-time.Duration(i)*5*time.Hour-time.Minute), i)
	}
	for i := range 600 {
		put("hot", f.now.Add(-time.Duration(rng.Int64N(int64(6*time.Hour)))), i)
	}
	if err := db.Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	nodeConn := connect()
	srv, err := Serve(nodeConn, ServerConfig{Node: "local", Store: db, Shards: 1, Owned: []int{0},
		Writer: func() ConsumerPosition { return ConsumerPosition{} }, Ready: func() error { return nil }, Metrics: db.Metrics})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	// The service's subscriptions are on the server once it has answered
	// a ping after them.
	if err := nodeConn.Flush(); err != nil {
		t.Fatal(err)
	}
	if f.local, err = reader.New(db, reader.Options{Types: f.types, Now: func() time.Time { return f.now }, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	return f
}

// hotGroups is the walk groups of the hot type's last 8 hours, newest
// first: each hour's 4 sub-partitions.
func (f *walkFixture) hotGroups(t *testing.T) [][][]byte {
	t.Helper()
	var groups [][][]byte
	for h := range 8 {
		keys, err := bucket.PartitionsFor(f.now.Add(-time.Duration(h)*time.Hour), "hot", 4)
		if err != nil {
			t.Fatal(err)
		}
		var g [][]byte
		for _, k := range keys {
			g = append(g, []byte(k.String()))
		}
		groups = append(groups, g)
	}
	return groups
}

// remote is a reader through a client of the node with byteBudget per
// reply, and the count of walk requests it sends.
func (f *walkFixture) remote(t *testing.T, byteBudget int, failTombstones int) (*reader.Reader, func() float64) {
	reg := prometheus.NewRegistry()
	client, err := NewClient(f.nc, ClientConfig{Owners: []string{"local"}, ByteBudget: byteBudget, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	r, err := reader.New(client, reader.Options{Types: f.types, Now: func() time.Time { return f.now },
		ParallelHours: reader.RemoteParallelHours, FailTombstones: failTombstones, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return r, func() float64 { return testutil.ToFloat64(client.requests.WithLabelValues("local", "walk", "ok")) }
}

// pages runs q page by page and returns every page.
func pages(t *testing.T, r *reader.Reader, q reader.EventQuery) []*reader.EventPage {
	t.Helper()
	var out []*reader.EventPage
	for {
		p, err := r.Events(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		// What the page says, not the memory behind it (its data arena,
		// its Reader's pool).
		out = append(out, &reader.EventPage{Events: p.Events, NextPage: p.NextPage})
		if p.NextPage == "" || len(out) > 1000 {
			return out
		}
		q.PageToken = p.NextPage
	}
}

// TestEventWalkIsOneRoundTrip: an event query through cmd/query's client
// walks all its hour buckets and sub-partitions in one request to the
// node (not one per partition), and answers exactly what the same reader
// answers over the local store, page by page, in both orders, also when a
// small byte budget cuts every reply so the walk resumes across groups.
func TestEventWalkIsOneRoundTrip(t *testing.T) {
	f := newWalkFixture(t)
	queries := []reader.EventQuery{
		{Type: "sparse", From: f.now.Add(-48 * time.Hour), To: f.now, Limit: 3},
		{Type: "sparse", From: f.now.Add(-48 * time.Hour), To: f.now, Limit: 4, Order: reader.Asc},
		{Type: "hot", From: f.now.Add(-7 * time.Hour), To: f.now, Limit: 50},
		{Type: "hot", From: f.now.Add(-7 * time.Hour), To: f.now, Limit: 120, Order: reader.Asc},
		{Type: "hot", From: f.now.Add(-time.Hour), To: f.now, Limit: 1},
		{Type: "missing", From: f.now.Add(-48 * time.Hour), To: f.now, Limit: 10},
	}
	for _, budget := range []int{0, 300} {
		remote, walks := f.remote(t, budget, 0)
		for _, q := range queries {
			t.Run(fmt.Sprintf("budget %d %s %s limit %d", budget, q.Type, q.Order, q.Limit), func(t *testing.T) {
				before := walks()
				got := pages(t, remote, q)
				want := pages(t, f.local, q)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("remote pages differ from local: %d vs %d pages", len(got), len(want))
				}
				n := 0
				for _, p := range want {
					n += len(p.Events)
				}
				if q.Type != "missing" && n == 0 {
					t.Fatal("the query found nothing: the fixture is wrong")
				}
				if sent := walks() - before; budget == 0 && sent != float64(len(got)) {
					t.Errorf("%v walk requests for %d pages; want one per page", sent, len(got))
				}
			})
		}
	}
}

// TestEventWalkTombstoneHour: a walk that passes the tombstone budget
// fails through the client as locally, naming the same hour bucket (and
// still fails when byte budgets cut the walk into several requests).
func TestEventWalkTombstoneHour(t *testing.T) {
	f := newWalkFixture(t)
	for _, budget := range []int{0, 300} {
		t.Run(fmt.Sprintf("budget %d", budget), func(t *testing.T) { testEventWalkTombstoneHour(t, f, budget) })
	}
}

func testEventWalkTombstoneHour(t *testing.T, f *walkFixture, budget int) {
	// 60 tombstones run out in the second hour walked, so a walk cut by
	// the byte budget has resumed in a later group by then.
	remote, _ := f.remote(t, budget, 60)
	local, err := reader.New(f.db, reader.Options{Types: f.types, Now: func() time.Time { return f.now }, FailTombstones: 60, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	q := reader.EventQuery{Type: "hot", From: f.now.Add(-7 * time.Hour), To: f.now, Limit: 400}
	_, gotErr := remote.Events(t.Context(), q)
	_, wantErr := local.Events(t.Context(), q)
	if !errors.Is(gotErr, storage.ErrTooManyTombstones) || !errors.Is(wantErr, storage.ErrTooManyTombstones) {
		t.Fatalf("errors: remote %v, local %v; want both too many tombstones", gotErr, wantErr)
	}
	hour := func(err error) string {
		msg := err.Error()
		i := strings.Index(msg, "(hour bucket ")
		if i < 0 {
			t.Fatalf("error names no hour bucket: %v", err)
		}
		return msg[i:]
	}
	if budget > 0 {
		// A reply cut by the byte budget counts the tombstones between
		// its last row and the row that did not fit, and the resumed
		// walk scans them again, as a cut slice does: the remote walk
		// may give up sooner than the local one.
		return
	}
	if hour(gotErr) != hour(wantErr) {
		t.Errorf("remote error %q, local %q: want the same hour", hour(gotErr), hour(wantErr))
	}
	if newest := bucket.HourOf(f.now).Format(time.RFC3339); strings.Contains(hour(wantErr), newest) {
		t.Errorf("the walk gave up in the newest hour %s; the test wants a later group", newest)
	}
}

// TestWalkGroupsMatchesRunWalk: the client's walk emits the rows the
// node's store holds, each with the index of its group in the walk asked,
// whether or not byte budgets cut it into requests resumed in later
// groups.
func TestWalkGroupsMatchesRunWalk(t *testing.T) {
	f := newWalkFixture(t)
	groups := f.hotGroups(t)
	type emitted struct {
		group int
		key   string
	}
	collect := func(walk func(emit func(int, *storage.Row) bool) (reader.Trace, error)) []emitted {
		var out []emitted
		if _, err := walk(func(g int, row *storage.Row) bool {
			out = append(out, emitted{g, string(row.Clustering)})
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, budget := range []int{0, 300} {
		client, err := NewClient(f.nc, ClientConfig{Owners: []string{"local"}, ByteBudget: budget})
		if err != nil {
			t.Fatal(err)
		}
		for _, limit := range []int{0, 1, 77, 1000} {
			w := reader.Walk{Table: schema.EventsTable, Groups: groups, Reverse: false, Limit: limit}
			want := collect(func(emit func(int, *storage.Row) bool) (reader.Trace, error) {
				return reader.RunWalk(t.Context(), f.db, &w, emit)
			})
			got := collect(func(emit func(int, *storage.Row) bool) (reader.Trace, error) {
				return client.WalkGroups(t.Context(), &w, emit)
			})
			if !reflect.DeepEqual(got, want) {
				t.Errorf("budget %d, limit %d: the client's walk emitted %d rows, the store's %d, or different groups", budget, limit, len(got), len(want))
			}
			if len(want) == 0 || want[len(want)-1].group == 0 && limit != 1 {
				t.Errorf("budget %d, limit %d: the walk ends in group %d after %d rows; the fixture should reach later groups", budget, limit, want[len(want)-1].group, len(want))
			}
		}
	}
}

// TestWalkGroupsCountsTombstonesOnce: a walk that byte budgets cut into
// several requests reads the rows and counts the tombstones the same walk
// over the local store does, so its trace says what was read and a
// tombstone limit the local walk meets exactly does not fail remotely.
// The node cuts a reply right after the row that spends its budget:
// reading on to the next row, as it did, scanned the tombstones between
// the two, which the next request, resuming after the row, scanned and
// counted again. With several partitions in a group, the walk has read
// ahead to each partition's next row when it is cut, and those rows and
// tombstones are read again (reader.Walk says so): the remote counts are
// then at least the local ones.
func TestWalkGroupsCountsTombstonesOnce(t *testing.T) {
	f := newWalkFixture(t)
	whole := f.hotGroups(t) // four sub-partitions per hour
	var single [][][]byte   // the first of them
	for _, g := range whole {
		single = append(single, g[:1])
	}
	for _, c := range []struct {
		name   string
		groups [][][]byte
		exact  bool
	}{{"one partition per group", single, true}, {"four partitions per group", whole, false}} {
		for _, reverse := range []bool{false, true} {
			// An event's clustering key sorts newest first: a forward walk
			// goes from the newest hour back, a reverse one the other way.
			w := reader.Walk{Table: schema.EventsTable, Groups: slices.Clone(c.groups), Reverse: reverse}
			if reverse {
				slices.Reverse(w.Groups)
			}
			var localRows, remoteRows []string
			want, err := reader.RunWalk(t.Context(), f.db, &w, func(_ int, r *storage.Row) bool {
				localRows = append(localRows, string(r.Clustering))
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
			if want.Tombstones < 20 {
				t.Fatalf("%s: the local walk scanned %d tombstones; the fixture deletes every 5th row", c.name, want.Tombstones)
			}
			for _, budget := range []int{0, 1, 300, 2000} {
				client, err := NewClient(f.nc, ClientConfig{Owners: []string{"local"}, ByteBudget: budget})
				if err != nil {
					t.Fatal(err)
				}
				remoteRows = remoteRows[:0]
				got, err := client.WalkGroups(t.Context(), &w, func(_ int, r *storage.Row) bool {
					remoteRows = append(remoteRows, string(r.Clustering))
					return true
				})
				if err != nil {
					t.Fatalf("%s, reverse %v, budget %d: %v", c.name, reverse, budget, err)
				}
				if !slices.Equal(remoteRows, localRows) {
					t.Errorf("%s, reverse %v, budget %d: the remote walk emitted %d rows, the local one %d, or others", c.name, reverse, budget, len(remoteRows), len(localRows))
				}
				if got.Rows < want.Rows || got.Tombstones < want.Tombstones || c.exact && (got.Rows != want.Rows || got.Tombstones != want.Tombstones) {
					t.Errorf("%s, reverse %v, budget %d: the remote walk read %d rows and counted %d tombstones, the local one %d and %d",
						c.name, reverse, budget, got.Rows, got.Tombstones, want.Rows, want.Tombstones)
				}
				if !c.exact {
					continue
				}
				limited := w
				limited.MaxTombstones = want.Tombstones
				if _, err := client.WalkGroups(t.Context(), &limited, func(int, *storage.Row) bool { return true }); err != nil {
					t.Errorf("%s, reverse %v, budget %d: a walk allowed the %d tombstones the local walk scans failed: %v", c.name, reverse, budget, want.Tombstones, err)
				}
			}
		}
	}
}
