package queryrpc

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/internal/natsembed"
	"github.com/eventide/eventide/internal/tail"
	"github.com/eventide/eventide/writer"
)

func sampleTailEvents() []tail.Event {
	return []tail.Event{
		{Seq: 1, ID: uuid.MustParse("7ab09000-e65b-11f1-8a51-2d4e6f01b2c3"), Type: "click", User: "u1", Data: []byte(`{"n":1}`)},
		{Seq: 1, ID: uuid.MustParse("7ab09001-e65b-11f1-8a51-2d4e6f01b2c3"), Type: "click", User: "u2", Data: []byte(`{}`)},
		{Seq: 7, ID: uuid.MustParse("7ab09002-e65b-11f1-8a51-2d4e6f01b2c3"), Type: "post", Author: "a1", Data: []byte(`{"text":"hi"}`)},
	}
}

func TestTailBatchRoundTrip(t *testing.T) {
	in := sampleTailEvents()
	out, err := decodeTailBatch(nil, appendTailBatch(nil, in), nil)
	if err != nil || !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip: %+v -> %+v, %v", in, out, err)
	}
	good := appendTailBatch(nil, in)
	for name, b := range map[string][]byte{
		"empty":       nil,
		"version 2":   append([]byte{2}, good[1:]...),
		"no events":   {tailBatchV1, 0},
		"truncated":   good[:len(good)-1],
		"trailing":    append(slices.Clone(good), 0),
		"huge count":  {tailBatchV1, 0xff, 0xff, 0xff, 0x7f},
		"seq 0":       appendTailBatch(nil, []tail.Event{{Seq: 0, Type: "x"}}),
		"seq falling": appendTailBatch(nil, []tail.Event{{Seq: 5, Type: "x"}, {Seq: 4, Type: "x"}}),
	} {
		if _, err := decodeTailBatch(nil, b, nil); !errors.Is(err, ErrBadMessage) {
			t.Errorf("%s: error %v, want ErrBadMessage", name, err)
		}
	}
}

func FuzzDecodeTailBatch(f *testing.F) {
	f.Add(appendTailBatch(nil, sampleTailEvents()))
	f.Add(appendTailBatch(nil, sampleTailEvents()[2:]))
	f.Add([]byte{tailBatchV1, 1, 1})
	// One set of interned type names across inputs, as a relay keeps it.
	var types typeNames
	f.Fuzz(func(t *testing.T, b []byte) {
		evs, err := decodeTailBatch(nil, b, nil)
		interned, ierr := decodeTailBatch(nil, b, &types)
		if (err == nil) != (ierr == nil) || !reflect.DeepEqual(evs, interned) {
			t.Fatalf("with interned types: %+v, %v; without: %+v, %v", interned, ierr, evs, err)
		}
		if err != nil {
			if !errors.Is(err, ErrBadMessage) {
				t.Fatalf("error %v does not wrap ErrBadMessage", err)
			}
			return
		}
		if again := appendTailBatch(nil, evs); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs: %x -> %x", b, again)
		}
	})
}

// tailNATS starts a NATS server and returns a connection factory.
func tailNATS(t *testing.T) func() *nats.Conn {
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

func stored(seqs ...uint64) []writer.StoredEvent {
	out := make([]writer.StoredEvent, len(seqs))
	for i, s := range seqs {
		out[i] = writer.StoredEvent{Seq: s, Event: schema.Event{ID: uuid.Must(uuid.NewUUID()), Type: "click", User: "u", Data: []byte(`{"seq":` + itoa(s) + `}`)}}
	}
	return out
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// takeSeqs reads n events from sub, failing after a generous deadline.
func takeSeqs(t *testing.T, sub *tail.Subscription, n int) []uint64 {
	t.Helper()
	var seqs []uint64
	var evs []*tail.Event
	deadline := time.After(20 * time.Second)
	for len(seqs) < n {
		select {
		case <-sub.Ready():
			var err error
			if evs, err = sub.Take(evs[:0]); err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				seqs = append(seqs, e.Seq)
			}
		case <-deadline:
			t.Fatalf("got %v, want %d events", seqs, n)
		}
	}
	return seqs
}

// TestTailRelayOrdersNodes: two nodes' stored events, published
// interleaved and each node's later sequences first, reach the query
// service's tail in stream order, and a resume replays from its ring.
func TestTailRelayOrdersNodes(t *testing.T) {
	connect := tailNATS(t)
	b := tail.New(tail.Options{}, 0)
	defer b.Close()
	relayNC := connect()
	// A hold far above the time two back-to-back publishes take to
	// arrive: the order does not depend on the machine's speed.
	r, err := StartTailRelay(relayNC, 2*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	r.Feed(b)
	if err := relayNC.Flush(); err != nil {
		t.Fatal(err)
	}
	sub, err := b.Subscribe(nil, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	a, bn := connect(), connect()
	pubA, pubB := TailPublisher(a, "node-a", nil), TailPublisher(bn, "node-b", nil)
	pubB(stored(2, 4, 6))
	bn.Flush()
	pubA(stored(1, 3))
	pubA(stored(5))
	a.Flush()
	if got := takeSeqs(t, sub, 6); !slices.Equal(got, []uint64{1, 2, 3, 4, 5, 6}) {
		t.Errorf("relayed %v, want 1..6 in order", got)
	}
	resumed, err := b.Subscribe([]string{"click"}, 3, true)
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	if got := takeSeqs(t, resumed, 3); !slices.Equal(got, []uint64{4, 5, 6}) {
		t.Errorf("resumed after 3: %v, want 4 5 6", got)
	}
	if r.Late() != 0 {
		t.Errorf("%d events late", r.Late())
	}
}

// TestTailPublisherSplitsLargeBatches: a stored batch above the message
// bound goes out as several messages, all relayed.
func TestTailPublisherSplitsLargeBatches(t *testing.T) {
	connect := tailNATS(t)
	b := tail.New(tail.Options{ReplayBytes: 64 << 20}, 0)
	defer b.Close()
	relayNC := connect()
	r, err := StartTailRelay(relayNC, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	r.Feed(b)
	relayNC.Flush()
	sub, err := b.Subscribe(nil, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	big := stored(1, 2, 3, 4, 5, 6)
	for i := range big {
		big[i].Event.Data = []byte(`{"pad":"` + strings.Repeat("x", 300<<10) + `"}`)
	}
	pub := connect()
	TailPublisher(pub, "node-a", nil)(big)
	pub.Flush()
	if got := takeSeqs(t, sub, 6); !slices.Equal(got, []uint64{1, 2, 3, 4, 5, 6}) {
		t.Errorf("relayed %v", got)
	}
}

// TestTailPublisherCoalesces: what the shards' writers store within the
// coalescing time goes out as one message, its events in sequence order
// (the writers interleave), copied before the writer reuses its buffers;
// nothing is published before the time is up.
func TestTailPublisherCoalesces(t *testing.T) {
	connect := tailNATS(t)
	nc := connect()
	sub, err := nc.SubscribeSync(DefaultTailSubjectPrefix + ".node-a")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	p := newTailPublisher(connect(), "node-a", nil, time.Hour, nil)
	shard0, shard1 := stored(2, 5, 9), stored(3, 4)
	p.add(shard0)
	p.add(shard1)
	p.add(stored(10))
	for i := range shard0 {
		shard0[i].Event.Data = []byte(`{"reused":true}`) // the writer's buffers
	}
	p.nc.Flush()
	if msg, err := sub.NextMsg(50 * time.Millisecond); err == nil {
		t.Fatalf("published before the coalescing time: %d bytes", len(msg.Data))
	}
	p.flush()
	p.nc.Flush()
	evs := nextTailBatch(t, sub)
	var seqs []uint64
	for _, e := range evs {
		seqs = append(seqs, e.Seq)
		if want := `{"seq":` + itoa(e.Seq) + `}`; string(e.Data) != want {
			t.Errorf("event %d: data %s, want %s", e.Seq, e.Data, want)
		}
	}
	if !slices.Equal(seqs, []uint64{2, 3, 4, 5, 9, 10}) {
		t.Errorf("one message of %v, want 2 3 4 5 9 10", seqs)
	}
	if msg, err := sub.NextMsg(50 * time.Millisecond); err == nil {
		t.Fatalf("a second message: %d bytes", len(msg.Data))
	}
}

// TestListenedTailPublisherOnlyWithInterest: on a connection to the
// embedded server, stored events go out only while a subscription matches
// the node's tail subject (a relay's wildcard included); before one
// exists, and after it is gone, nothing is published.
func TestListenedTailPublisherOnlyWithInterest(t *testing.T) {
	ns, err := natsembed.Start(natsembed.Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { natsembed.Stop(ns) })
	pubNC, err := nats.Connect("", nats.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer pubNC.Close()
	p := newTailPublisher(pubNC, "node-a", nil, 0, natsembed.Interest(ns))
	published := func() uint64 {
		t.Helper()
		if err := pubNC.Flush(); err != nil {
			t.Fatal(err)
		}
		return pubNC.Stats().OutMsgs
	}

	p.add(stored(1, 2))
	if n := published(); n != 0 {
		t.Fatalf("%d messages published with no subscriber", n)
	}

	relayNC, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer relayNC.Close()
	sub, err := relayNC.SubscribeSync(DefaultTailSubjectPrefix + ".*")
	if err != nil {
		t.Fatal(err)
	}
	if err := relayNC.Flush(); err != nil {
		t.Fatal(err)
	}
	p.add(stored(3, 4))
	if n := published(); n != 1 {
		t.Fatalf("%d messages published with a subscriber, want 1", n)
	}
	evs := nextTailBatch(t, sub)
	if len(evs) != 2 || evs[0].Seq != 3 || evs[1].Seq != 4 {
		t.Fatalf("received %+v, want the events of sequences 3 and 4", evs)
	}

	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if err := relayNC.Flush(); err != nil {
		t.Fatal(err)
	}
	p.add(stored(5))
	if n := published(); n != 1 {
		t.Fatalf("%d messages published in all, want still 1 once the subscriber left", n)
	}
}

// nextTailBatch receives the next tail message on sub and decodes it.
func nextTailBatch(t *testing.T, sub *nats.Subscription) []tail.Event {
	t.Helper()
	msg, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := decodeTailBatch(nil, msg.Data, nil)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestTailRelayRelease: release publishes, in sequence order (equal
// sequences in arrival order), every held event up to the highest
// sequence held the hold; what arrived later stays held, in arrival
// order, for the next release; an event below one already published
// counts as late.
func TestTailRelayRelease(t *testing.T) {
	b := tail.New(tail.Options{}, 0)
	defer b.Close()
	r := &TailRelay{b: b, hold: 20 * time.Millisecond}
	t0 := time.Date(2026, 11, 24, 16, 0, 0, 0, time.UTC)
	hold := func(at time.Time, node string, seqs ...uint64) {
		for _, s := range seqs {
			r.pending = append(r.pending, heldEvent{e: tail.Event{Seq: s, Type: node}, at: at})
		}
	}
	released := func(now time.Time) []string {
		out := r.release(now, nil)
		b.Publish(out)
		var got []string
		for _, e := range out {
			got = append(got, fmt.Sprintf("%s%d", e.Type, e.Seq))
		}
		return got
	}
	// Node b's 6 arrives first, then a's 1 3 and b's 2 4 interleaved,
	// a's second copy of 3 (equal sequence, later arrival), then,
	// within the hold, a's 5 and b's 7.
	hold(t0, "b", 6)
	hold(t0.Add(time.Millisecond), "a", 1, 3)
	hold(t0.Add(2*time.Millisecond), "b", 2, 4)
	hold(t0.Add(3*time.Millisecond), "a", 3)
	hold(t0.Add(15*time.Millisecond), "a", 5)
	hold(t0.Add(16*time.Millisecond), "b", 7)
	if got := released(t0.Add(10 * time.Millisecond)); got != nil {
		t.Errorf("before the hold: released %v", got)
	}
	// At 21 ms only b's 6 is held 20 ms: everything up to 6 goes, a's 5
	// with it although it arrived within the hold.
	if got := strings.Join(released(t0.Add(21*time.Millisecond)), " "); got != "a1 b2 a3 a3 b4 a5 b6" {
		t.Errorf("at 21 ms: released %s", got)
	}
	if len(r.pending) != 1 || r.pending[0].e.Seq != 7 {
		t.Errorf("still held %+v, want b7 alone", r.pending)
	}
	hold(t0.Add(30*time.Millisecond), "a", 8)
	hold(t0.Add(31*time.Millisecond), "a", 5) // later than the hold: late
	if got := strings.Join(released(t0.Add(60*time.Millisecond)), " "); got != "a5 b7 a8" {
		t.Errorf("at 60 ms: released %s", got)
	}
	if r.Late() != 1 || len(r.pending) != 0 {
		t.Errorf("late %d, held %d; want 1 late, none held", r.Late(), len(r.pending))
	}
}

// BenchmarkTailRelay: what the query service's relay spends per event
// stored: two nodes' tail messages of 50 events each (as a node publishes
// at ~27,000 events/s over both) decoded and held, released every tick.
func BenchmarkTailRelay(b *testing.B) {
	bc := tail.New(tail.Options{}, 0)
	defer bc.Close()
	r := &TailRelay{b: bc, hold: time.Nanosecond}
	const perMsg = 50
	pad := strings.Repeat("x", 150)
	seq := uint64(0)
	msgs := make([][]byte, 0, 2)
	evs := make([][]tail.Event, 2)
	for node := range 2 {
		for i := range perMsg {
			evs[node] = append(evs[node], tail.Event{ID: uuid.Must(uuid.NewUUID()), Type: fmt.Sprintf("t%02d", i%20), User: fmt.Sprintf("u%d", i),
				Data: []byte(fmt.Sprintf(`{"seq":%d,"pad":"%s"}`, i, pad))})
		}
		msgs = append(msgs, nil)
	}
	b.ReportAllocs()
	var out []tail.Event
	for b.Loop() {
		// The nodes' messages interleave: a's events 2k, b's 2k+1.
		for node := range 2 {
			for i := range evs[node] {
				evs[node][i].Seq = seq + uint64(2*i+node) + 1
			}
			msgs[node] = appendTailBatch(msgs[node][:0], evs[node])
		}
		seq += 2 * perMsg
		for node := range 2 {
			r.receive(&nats.Msg{Data: msgs[node]})
		}
		out = r.release(time.Now().Add(time.Second), out[:0])
		if len(out) != 2*perMsg {
			b.Fatalf("released %d events, want %d", len(out), 2*perMsg)
		}
		clear(out)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2*perMsg), "ns/event")
}
