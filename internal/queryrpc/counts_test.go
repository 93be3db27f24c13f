package queryrpc

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/reader"
	"github.com/eventide/eventide/storage"
)

// concurrencyStore is a node's store that records how many counts-table
// slices run at once. The first slice waits (up to a deadline, never
// needed when the reader runs hours in parallel) for a second to start,
// so a reader that sliced the hours one after the other shows a maximum
// of 1 without depending on the machine's speed.
type concurrencyStore struct {
	db       *storage.DB
	mu       sync.Mutex
	inFlight int
	maxSeen  int
	second   chan struct{}
	once     sync.Once
}

func (s *concurrencyStore) Slice(ctx context.Context, q storage.SliceQuery) (storage.Rows, error) {
	if q.Table == schema.CountsTable {
		s.mu.Lock()
		s.inFlight++
		s.maxSeen = max(s.maxSeen, s.inFlight)
		n := s.inFlight
		s.mu.Unlock()
		if n >= 2 {
			s.once.Do(func() { close(s.second) })
		}
		select {
		case <-s.second:
		case <-time.After(3 * time.Second):
		}
		defer func() {
			s.mu.Lock()
			s.inFlight--
			s.mu.Unlock()
		}()
	}
	return s.db.Slice(ctx, q)
}

// sliceOnly hides the client's walks: the reader sees a plain Store, as
// with storage nodes of a release without the walk endpoint.
type sliceOnly struct{ reader.Store }

// TestCountsSliceHoursInParallel: a count query over 24 hours through a
// remote store that cannot walk slices its hour partitions concurrently
// (not 25 round trips one after the other) and answers exactly what the
// same reader answers over the local store.
func TestCountsSliceHoursInParallel(t *testing.T) {
	connect := startNATS(t)
	db := openStore(t)
	to := time.Date(2026, 11, 24, 1, 30, 0, 0, time.UTC)
	from := to.Add(-24 * time.Hour)
	var b storage.Batch
	for m := range 24 * 60 {
		if m%7 == 0 {
			continue
		}
		if err := catalog.AddCount(&b, "click", from.Add(time.Duration(m)*time.Minute), int64(1+m%5)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	store := &concurrencyStore{db: db, second: make(chan struct{})}
	srv, err := Serve(connect(), ServerConfig{Node: "local", Store: store, Shards: 1, Owned: []int{0},
		Writer: func() ConsumerPosition { return ConsumerPosition{} }, Ready: func() error { return nil }, Metrics: db.Metrics})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	client, err := NewClient(connect(), ClientConfig{Owners: []string{"local"}})
	if err != nil {
		t.Fatal(err)
	}
	remote, err := reader.New(sliceOnly{client}, reader.Options{ParallelHours: reader.RemoteParallelHours})
	if err != nil {
		t.Fatal(err)
	}
	local, err := reader.New(db, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q := reader.CountQuery{Type: "click", From: from, To: to, Step: time.Minute}
	got, gotTrace, err := remote.CountsTrace(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	want, wantTrace, err := local.CountsTrace(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 24*60 || !reflect.DeepEqual(got, want) {
		t.Errorf("remote counts differ from local: %d points vs %d", len(got), len(want))
	}
	if gotTrace.Partitions != 25 || gotTrace.Rows != wantTrace.Rows || gotTrace.Partitions != wantTrace.Partitions {
		t.Errorf("traces: remote %+v, local %+v; want 25 partitions and the same rows", gotTrace, wantTrace)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if store.maxSeen < 2 {
		t.Errorf("at most %d hour slices ran at once; want them in parallel", store.maxSeen)
	}
	if store.maxSeen > reader.RemoteParallelHours {
		t.Errorf("%d hour slices ran at once, more than the %d asked", store.maxSeen, reader.RemoteParallelHours)
	}
}

// TestCountsOneWalk: through the client (a reader.GroupWalker) a count
// query over 24 hours is one walk request to the node for its 25 hour
// partitions, and answers what the local reader answers.
func TestCountsOneWalk(t *testing.T) {
	f := newWalkFixture(t)
	from := f.now.Add(-24 * time.Hour)
	var b storage.Batch
	for m := range 24 * 60 {
		if m%7 == 0 {
			continue
		}
		if err := catalog.AddCount(&b, "click", from.Add(time.Duration(m)*time.Minute), int64(1+m%5)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.db.Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	remote, walks := f.remote(t, 0, 0)
	for _, step := range []time.Duration{time.Minute, 7 * time.Minute, time.Hour} {
		q := reader.CountQuery{Type: "click", From: from, To: f.now, Step: step}
		before := walks()
		got, gotTrace, err := remote.CountsTrace(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		want, wantTrace, err := f.local.CountsTrace(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("step %s: remote counts differ from local (%d points vs %d)", step, len(got), len(want))
		}
		if gotTrace.Partitions != 25 || gotTrace.Rows != wantTrace.Rows || gotTrace.Partitions != wantTrace.Partitions {
			t.Errorf("step %s: traces: remote %+v, local %+v; want 25 partitions and the same rows", step, gotTrace, wantTrace)
		}
		if n := walks() - before; n != 1 {
			t.Errorf("step %s: %v walk requests; want 1", step, n)
		}
	}
}
