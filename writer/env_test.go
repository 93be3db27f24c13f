package writer

// The environment of the integration tests: a real embedded nats-server
// with JetStream on a loopback port, a real storage directory, and an event
// generator whose output can be checked against what was stored.

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/eventide/eventide/internal/natsembed"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

// startNATS starts a JetStream server on port (-1: any free port) storing
// in storeDir, through natsembed as cmd/ingest does, and shuts it down
// when the test ends.
func startNATS(t testing.TB, storeDir string, port int) *server.Server {
	t.Helper()
	listen := "127.0.0.1:0"
	if port >= 0 {
		listen = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	s, err := natsembed.Start(natsembed.Config{Listen: listen, StoreDir: storeDir})
	if err != nil {
		t.Fatalf("cannot start nats-server: %v", err)
	}
	t.Cleanup(func() { natsembed.Stop(s) })
	return s
}

func natsPort(s *server.Server) int { return s.Addr().(*net.TCPAddr).Port }

// connect opens a client that reconnects forever, quickly.
func connect(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond),
		nats.NoCallbacksAfterClientClose())
	if err != nil {
		t.Fatalf("cannot connect to %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func openDB(t testing.TB, dir string) *storage.DB {
	t.Helper()
	db, err := storage.Open(dir, storage.DefaultOptions())
	if err != nil {
		t.Fatalf("cannot open storage in %s: %v", dir, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// testLogger discards routine logs; set WRITER_TEST_LOG=1 to see them.
func testLogger() *slog.Logger {
	if os.Getenv("WRITER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testTypes: "hot" is split into sub-partitions, "short" has its own TTL.
// shortTTL is the TTL of testTypes' short type; genEvents keeps its
// events at least shortTTLMargin inside it.
const (
	shortTTL       = 3 * time.Hour
	shortTTLMargin = 30 * time.Second
)

func testTypes(t testing.TB) *schema.EventTypes {
	types, err := schema.ParseEventTypes("*:ttl=168h,hot:sub=4,short:ttl=3h")
	if err != nil {
		t.Fatal(err)
	}
	return types
}

func newWriter(t testing.TB, nc *nats.Conn, db *storage.DB, cfg Config) *Writer {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger()
	}
	if cfg.Types == nil {
		cfg.Types = testTypes(t)
	}
	w, err := New(context.Background(), nc, db, cfg)
	if err != nil {
		t.Fatalf("writer.New: %v", err)
	}
	return w
}

// runningWriter is a Writer whose Run goroutine the test controls.
type runningWriter struct {
	*Writer
	cancel context.CancelFunc
	done   chan error
}

func runWriter(t testing.TB, w *Writer) *runningWriter {
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningWriter{Writer: w, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- w.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels Run and waits for it; Run must return nil.
func (r *runningWriter) stop(t testing.TB) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Run returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of cancel")
	}
}

// waitFor polls cond until it holds, failing the test after timeout with
// what describe says.
func waitFor(t testing.TB, timeout time.Duration, cond func() bool, describe func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s: %s", timeout, describe())
		}
		<-tick.C
	}
}

// waitApplied waits until w's checkpoint reaches the stream's last
// sequence.
func waitApplied(t testing.TB, w *Writer, js jetstream.JetStream, stream string, timeout time.Duration) {
	t.Helper()
	last := streamLastSeq(t, js, stream)
	waitFor(t, timeout, func() bool { return w.Stats().LastAppliedSeq >= last },
		func() string { return fmt.Sprintf("writer at %+v, stream last seq %d", w.Stats(), last) })
}

func streamLastSeq(t testing.TB, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

// genEvent is one generated event: body and subject as published, and
// what must be stored.
type genEvent struct {
	n       int // in data as {"n": n}; unique per test
	typ     string
	time    time.Time // whole milliseconds
	subject string
	body    []byte
}

// genEvents makes count events of the given types with times spread at
// random over [from, from+span), in every wire shape: type in the body or
// only in the subject, time as RFC 3339 or unix milliseconds, with an id
// and with or without a time.
func genEvents(rng *rand.Rand, first, count int, types []string, from time.Time, span time.Duration) []genEvent {
	// An event of the short type (ttl=3h) older than that on arrival is
	// dead-lettered (expired_on_arrival), so a test's earliest event must
	// be well inside the TTL: a slow machine can take seconds between
	// this call and the writer's. TestShardedStreamSubjects once started
	// at exactly -3 h and lost an event now and then that way.
	if slices.Contains(types, "short") && time.Since(from) > shortTTL-shortTTLMargin {
		panic(fmt.Sprintf("genEvents: events from %s ago can expire on arrival (the short type's TTL is %s): start at least %s inside it", time.Since(from).Round(time.Second), shortTTL, shortTTLMargin))
	}
	evs := make([]genEvent, count)
	from = from.Truncate(time.Millisecond)
	for i := range evs {
		n := first + i
		typ := types[rng.IntN(len(types))]
		tm := from.Add(time.Duration(rng.Int64N(int64(span/time.Millisecond))) * time.Millisecond).UTC()
		fields := []string{fmt.Sprintf(`"data":{"n":%d}`, n)}
		if rng.IntN(2) == 0 {
			fields = append(fields, fmt.Sprintf(`"type":%q`, typ))
		}
		switch rng.IntN(8) {
		case 0: // id only: the id carries the time
			id, err := bucket.NewRandomTimeUUID(tm, rngReader{rng})
			if err != nil {
				panic(err)
			}
			fields = append(fields, fmt.Sprintf(`"id":%q`, id))
		case 1: // id and time
			id, err := bucket.NewRandomTimeUUID(tm, rngReader{rng})
			if err != nil {
				panic(err)
			}
			fields = append(fields, fmt.Sprintf(`"id":%q`, id), fmt.Sprintf(`"time":%d`, tm.UnixMilli()))
		case 2, 3:
			fields = append(fields, fmt.Sprintf(`"time":%d`, tm.UnixMilli()))
		default:
			fields = append(fields, fmt.Sprintf(`"time":%q`, tm.Format(time.RFC3339Nano)))
		}
		if rng.IntN(4) == 0 {
			fields = append(fields, fmt.Sprintf(`"user":"u%d"`, rng.IntN(100)))
		}
		rng.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
		evs[i] = genEvent{n: n, typ: typ, time: tm, subject: "events." + typ,
			body: []byte("{" + strings.Join(fields, ",") + "}")}
	}
	return evs
}

type rngReader struct{ r *rand.Rand }

func (r rngReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r.r.Uint32())
	}
	return len(p), nil
}

// publishAll publishes evs and waits for every ack, retrying failures
// (each event has a Nats-Msg-Id, so a retry of a publish that did land is
// dropped by the stream as a duplicate).
func publishAll(ctx context.Context, js jetstream.JetStream, evs []genEvent) error {
	const window = 256
	for start := 0; start < len(evs); start += window {
		chunk := evs[start:min(start+window, len(evs))]
		for attempt := 0; len(chunk) > 0; attempt++ {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if attempt > 0 {
				time.Sleep(20 * time.Millisecond) // pacing a retry while NATS restarts
			}
			futures := make([]jetstream.PubAckFuture, len(chunk))
			var failed []genEvent
			for i, ev := range chunk {
				f, err := js.PublishAsync(ev.subject, ev.body, jetstream.WithMsgID(fmt.Sprintf("ev-%d", ev.n)))
				if err != nil {
					failed = append(failed, ev)
					continue
				}
				futures[i] = f
			}
			for i, f := range futures {
				if f == nil {
					continue
				}
				select {
				case <-f.Ok():
				case <-f.Err():
					failed = append(failed, chunk[i])
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			chunk = failed
		}
	}
	return nil
}

// countKey is one per-minute counter.
type countKey struct {
	eventType string
	minute    time.Time
}

// wantCounts is the per-minute counts of a set of events.
func wantCounts(evs []genEvent) map[countKey]int64 {
	m := map[countKey]int64{}
	for _, ev := range evs {
		m[countKey{ev.typ, ev.time.Truncate(time.Minute)}]++
	}
	return m
}

// storedEvent is an event read back from storage.
type storedEvent struct {
	schema.Event
	n int
}

// readEvents reads every stored event of types in the hours covering
// [from, to], and fails on any row that does not decode.
func readEvents(t testing.TB, db *storage.DB, types *schema.EventTypes, typeNames []string, from, to time.Time) []storedEvent {
	t.Helper()
	var out []storedEvent
	for _, hour := range bucket.BucketsCoveringAscending(from, to.Add(time.Nanosecond)) {
		for _, typ := range typeNames {
			keys, err := bucket.PartitionsFor(hour, typ, types.SettingsAt(typ, hour).SubPartitions)
			if err != nil {
				t.Fatal(err)
			}
			for _, pk := range keys {
				partition := []byte(pk.String())
				it, err := db.Slice(context.Background(), storage.SliceQuery{Table: schema.EventsTable, Partition: partition})
				if err != nil {
					t.Fatal(err)
				}
				for it.Next() {
					ev, err := catalog.DecodeEvent(partition, it.Row())
					if err != nil {
						t.Fatal(err)
					}
					var data struct{ N *int }
					if err := json.Unmarshal(ev.Data, &data); err != nil || data.N == nil {
						t.Fatalf("event %s in %s has data %q, want {\"n\":...}", ev.ID, partition, ev.Data)
					}
					out = append(out, storedEvent{Event: ev, n: *data.N})
				}
				if err := it.Err(); err != nil {
					t.Fatal(err)
				}
				it.Close()
			}
		}
	}
	return out
}

// readCounts reads the per-minute counts of types in the hours covering
// [from, to].
func readCounts(t testing.TB, db *storage.DB, typeNames []string, from, to time.Time) map[countKey]int64 {
	t.Helper()
	m := map[countKey]int64{}
	for _, hour := range bucket.BucketsCoveringAscending(from, to.Add(time.Nanosecond)) {
		for _, typ := range typeNames {
			partition, err := schema.CountsPartition(typ, hour)
			if err != nil {
				t.Fatal(err)
			}
			it, err := db.Slice(context.Background(), storage.SliceQuery{Table: schema.CountsTable, Partition: partition})
			if err != nil {
				t.Fatal(err)
			}
			for it.Next() {
				minute, n, err := catalog.DecodeCount(it.Row())
				if err != nil {
					t.Fatal(err)
				}
				m[countKey{typ, minute}] += n
			}
			if err := it.Err(); err != nil {
				t.Fatal(err)
			}
			it.Close()
		}
	}
	return m
}

// checkStoredExactlyOnce checks that the store holds exactly evs: each
// once, with its type and time, and per-minute counts that add up to
// exactly them.
func checkStoredExactlyOnce(t testing.TB, db *storage.DB, types *schema.EventTypes, evs []genEvent) {
	t.Helper()
	if len(evs) == 0 {
		t.Fatal("no events to check")
	}
	byN := map[int]genEvent{}
	typeSet := map[string]bool{}
	from, to := evs[0].time, evs[0].time
	for _, ev := range evs {
		byN[ev.n] = ev
		typeSet[ev.typ] = true
		if ev.time.Before(from) {
			from = ev.time
		}
		if ev.time.After(to) {
			to = ev.time
		}
	}
	var typeNames []string
	for typ := range typeSet {
		typeNames = append(typeNames, typ)
	}
	sort.Strings(typeNames)

	stored := readEvents(t, db, types, typeNames, from, to)
	seen := map[int]uuid.UUID{}
	bad := 0
	for _, s := range stored {
		want, ok := byN[s.n]
		switch {
		case !ok:
			t.Errorf("stored event %s n=%d was never published", s.ID, s.n)
		case seen[s.n] != uuid.Nil:
			t.Errorf("event n=%d stored twice: %s and %s", s.n, seen[s.n], s.ID)
		case s.Type != want.typ || s.Time().UnixMilli() != want.time.UnixMilli():
			t.Errorf("event n=%d stored as %s at %s, want %s at %s", s.n, s.Type, s.Time(), want.typ, want.time)
		default:
			seen[s.n] = s.ID
			continue
		}
		if bad++; bad > 10 {
			t.Fatal("too many errors")
		}
	}
	if len(seen) != len(evs) {
		missing := 0
		for n := range byN {
			if seen[n] == uuid.Nil {
				if missing < 5 {
					t.Errorf("event n=%d (%s) was not stored", n, byN[n].body)
				}
				missing++
			}
		}
		t.Errorf("%d of %d events stored, %d missing", len(seen), len(evs), missing)
	}

	got := readCounts(t, db, typeNames, from, to)
	want := wantCounts(evs)
	mismatches := 0
	for k, n := range want {
		if got[k] != n {
			if mismatches < 5 {
				t.Errorf("count of %s at %s = %d, want %d", k.eventType, k.minute.Format(time.RFC3339), got[k], n)
			}
			mismatches++
		}
	}
	for k, n := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("count of %s at %s = %d, want none", k.eventType, k.minute.Format(time.RFC3339), n)
			mismatches++
		}
	}
	if mismatches > 0 {
		t.Errorf("%d per-minute counts are wrong", mismatches)
	}
}

// concurrentPublisher publishes batches of events in the background while
// a test does other things, remembering what it published.
type concurrentPublisher struct {
	mu        sync.Mutex
	published []genEvent
	err       error
	done      chan struct{}
	stopping  chan struct{}
}

// startPublisher publishes evs in chunks of chunk events, pausing pause
// between chunks, until all are published or stop is called. A chunk is
// always published whole, so published is exactly what is in the stream.
func startPublisher(js jetstream.JetStream, evs []genEvent, chunk int, pause time.Duration) *concurrentPublisher {
	p := &concurrentPublisher{done: make(chan struct{}), stopping: make(chan struct{})}
	go func() {
		defer close(p.done)
		for start := 0; start < len(evs); start += chunk {
			part := evs[start:min(start+chunk, len(evs))]
			if err := publishAll(context.Background(), js, part); err != nil {
				p.mu.Lock()
				p.err = err
				p.mu.Unlock()
				return
			}
			p.mu.Lock()
			p.published = append(p.published, part...)
			p.mu.Unlock()
			select {
			case <-p.stopping:
				return
			case <-time.After(pause):
			}
		}
	}()
	return p
}

func (p *concurrentPublisher) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.published)
}

// stop asks the publisher to stop after the chunk it is publishing.
func (p *concurrentPublisher) stop() { close(p.stopping) }

// wait waits for the publisher to finish and returns what it published.
func (p *concurrentPublisher) wait(t testing.TB) []genEvent {
	t.Helper()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		t.Fatalf("publisher: %v", p.err)
	}
	return p.published
}
