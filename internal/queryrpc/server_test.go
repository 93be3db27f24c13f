package queryrpc

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/storage"
)

// gateStore is a node's store whose slices wait at a gate: it records how
// many run at once and lets them all go when release is closed.
type gateStore struct {
	db       *storage.DB
	release  chan struct{}
	mu       sync.Mutex
	inFlight int
	maxSeen  int
	started  chan struct{} // one send per slice that reached the gate
}

func (s *gateStore) Slice(ctx context.Context, q storage.SliceQuery) (storage.Rows, error) {
	s.mu.Lock()
	s.inFlight++
	s.maxSeen = max(s.maxSeen, s.inFlight)
	s.mu.Unlock()
	s.started <- struct{}{}
	<-s.release
	s.mu.Lock()
	s.inFlight--
	s.mu.Unlock()
	return s.db.Slice(ctx, q)
}

// TestServerMaxConcurrent: a node runs at most MaxConcurrent reads at
// once, holds the others until a worker is free, and answers every one;
// its workers, started as needed, serve the next requests once free.
func TestServerMaxConcurrent(t *testing.T) {
	connect := startNATS(t)
	db := openStore(t)
	var b storage.Batch
	b.Put(schema.EventsTable, []byte("p"), []byte{1}, []byte("data"), []byte("x"), 1)
	if err := db.Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	const maxConcurrent, requests = 3, 10
	store := &gateStore{db: db, release: make(chan struct{}), started: make(chan struct{}, 2*requests)}
	srv, err := Serve(connect(), ServerConfig{Node: "n", Store: store, Shards: 1, Owned: []int{0}, MaxConcurrent: maxConcurrent,
		Writer: func() ConsumerPosition { return ConsumerPosition{} }, Ready: func() error { return nil }, Metrics: db.Metrics})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	client, err := NewClient(connect(), ClientConfig{Owners: []string{"n"}, NodeTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	slice := func() error {
		rows, err := client.Slice(t.Context(), storage.SliceQuery{Table: schema.EventsTable, Partition: []byte("p")})
		if err != nil {
			return err
		}
		n := 0
		for rows.Next() {
			n++
		}
		if n != 1 {
			t.Errorf("slice returned %d rows; want 1", n)
		}
		return rows.Close()
	}
	run := func(round int, gated bool) {
		errs := make(chan error, requests)
		for range requests {
			go func() { errs <- slice() }()
		}
		if gated {
			for range maxConcurrent {
				select {
				case <-store.started:
				case <-time.After(10 * time.Second):
					t.Fatalf("round %d: fewer than %d slices started", round, maxConcurrent)
				}
			}
			// No further slice may reach the gate while those hold
			// their workers. (The wait only bounds how long a node
			// that breaks the limit has to show it.)
			select {
			case <-store.started:
				t.Errorf("round %d: a slice beyond MaxConcurrent %d started", round, maxConcurrent)
			case <-time.After(300 * time.Millisecond):
			}
			close(store.release)
		}
		for range requests {
			select {
			case err := <-errs:
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: a slice did not return", round)
			}
		}
		for len(store.started) > 0 {
			<-store.started
		}
	}
	run(1, true)
	// The gate is open now: round 1's workers serve round 2.
	run(2, false)
	store.mu.Lock()
	defer store.mu.Unlock()
	if store.maxSeen > maxConcurrent {
		t.Errorf("%d slices ran at once; MaxConcurrent is %d", store.maxSeen, maxConcurrent)
	}
}

// recordingRequest is a micro.Request that records whether it was
// answered through its own methods, which micro's request backs with
// state that micro reads when the handler returns.
type recordingRequest struct {
	micro.Request
	answered atomic.Bool
}

func (r *recordingRequest) Respond([]byte, ...micro.RespondOpt) error {
	r.answered.Store(true)
	return nil
}

func (r *recordingRequest) RespondJSON(any, ...micro.RespondOpt) error {
	r.answered.Store(true)
	return nil
}

func (r *recordingRequest) Error(string, string, []byte, ...micro.RespondOpt) error {
	r.answered.Store(true)
	return nil
}

func (r *recordingRequest) Reply() string   { return "reply.to.client" }
func (r *recordingRequest) Subject() string { return "eventide.node-a.slice" }

// TestWorkersAnswerOutsideMicrosRequest: a read endpoint's worker answers
// by publishing to the request's reply subject itself, never through
// micro's request, whose Error records the error that micro reads when
// the handler returns: the handler returns as soon as a worker has the
// request, so that was a data race (found by -race in
// TestTooManyTombstonesCrossesTheWire). The answers carry micro's error
// headers, which the client reads.
func TestWorkersAnswerOutsideMicrosRequest(t *testing.T) {
	nc := startNATS(t)()
	sub, err := nc.SubscribeSync("reply.to.client")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &Server{nc: nc, jobs: make(chan readJob), workers: make(chan struct{}, 1), ctx: ctx, stop: cancel}
	for _, tc := range []struct {
		name     string
		serve    func(micro.Request)
		wantCode string
	}{
		{"error", func(req micro.Request) { req.Error("429", "too many tombstones", nil) }, "429"},
		{"respond", func(req micro.Request) { req.Respond([]byte("rows")) }, ""},
	} {
		req := &recordingRequest{}
		s.concurrently(tc.serve)(req)
		msg, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("%s: no answer: %v", tc.name, err)
		}
		if req.answered.Load() {
			t.Errorf("%s: the worker answered through micro's request", tc.name)
		}
		if got := msg.Header.Get(micro.ErrorCodeHeader); got != tc.wantCode {
			t.Errorf("%s: error code header %q, want %q", tc.name, got, tc.wantCode)
		}
	}
}
