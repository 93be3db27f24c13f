package jspub

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eventide/eventide/internal/natstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestPendingTableExpire(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 2, 0, 0, 0, time.UTC)
	tab := newPendingTable[string]()
	for i, name := range []string{"a", "b", "c"} {
		tab.add(uint64(i+1), pendingOp[string]{op: name, deadline: t0.Add(time.Duration(i+1) * time.Second)})
	}
	steps := []struct {
		at      time.Duration
		closing bool
		want    []string
	}{
		{500 * time.Millisecond, false, nil},
		{time.Second, false, []string{"a"}}, // a deadline is not after now: expired
		{time.Second, false, nil},           // once only
		{10 * time.Second, true, []string{"b", "c"}},
	}
	for i, st := range steps {
		if i == 3 {
			if _, ok := tab.take(2); !ok { // b's reply came first
				t.Fatal("take(2) found nothing before its deadline")
			}
			st.want = []string{"c"}
		}
		got := tab.expire(nil, t0.Add(st.at), st.closing)
		if len(got) != len(st.want) {
			t.Fatalf("step %d: expired %v, want %v", i, got, st.want)
		}
		for j := range got {
			if got[j].op != st.want[j] {
				t.Fatalf("step %d: expired %v, want %v", i, got, st.want)
			}
		}
	}
	if _, ok := tab.take(1); ok {
		t.Fatal("take(1) found a publish already expired")
	}
	if tab.add(4, pendingOp[string]{op: "d"}) {
		t.Fatal("add succeeded on a closed table")
	}
}

type outcome struct {
	op  string
	seq uint64
	err error
}

// startPublisher connects to a real nats-server with stream T on t.ok and
// returns a Publisher whose outcomes arrive on the channel.
func startPublisher(t *testing.T, timeout time.Duration) (*nats.Conn, *Publisher[string], chan outcome) {
	t.Helper()
	s := natstest.StartServer(t)
	nc, js := natstest.Connect(t, s.ClientURL())
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.ok"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	out := make(chan outcome, 16)
	p, err := New(ctx, nc, Config[string]{Timeout: timeout, Done: func(op string, _, _ time.Time, seq uint64, err error) {
		out <- outcome{op, seq, err}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return nc, p, out
}

// Each publish gets exactly its outcome from a real server: acks with
// their sequences, a JetStream API error, and no responders.
func TestPublisherOutcomes(t *testing.T) {
	_, p, out := startPublisher(t, 10*time.Second)
	wrongLast := nats.NewMsg("t.ok")
	wrongLast.Header.Set(jetstream.ExpectedLastSeqHeader, "999")
	tests := []struct {
		name string
		msg  *nats.Msg
		seq  uint64
		want func(error) bool
	}{
		{"first ack", &nats.Msg{Subject: "t.ok", Data: []byte("1")}, 1, nil},
		{"second ack", &nats.Msg{Subject: "t.ok", Data: []byte("2")}, 2, nil},
		{"wrong last sequence", wrongLast, 0, func(err error) bool {
			var a *AckError
			return errors.As(err, &a) && a.ErrCode == uint16(jetstream.JSErrCodeStreamWrongLastSequence)
		}},
		{"no stream", &nats.Msg{Subject: "nostream.x", Data: []byte("3")}, 0, func(err error) bool { return errors.Is(err, ErrNoResponders) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p.Publish(tc.msg, tc.name, time.Now())
			o := <-out
			if o.op != tc.name {
				t.Fatalf("outcome for %q, want for %q", o.op, tc.name)
			}
			if tc.want == nil && (o.err != nil || o.seq != tc.seq) {
				t.Fatalf("outcome = %d, %v; want ack %d", o.seq, o.err, tc.seq)
			}
			if tc.want != nil && !tc.want(o.err) {
				t.Fatalf("outcome = %d, %v; want the %s error", o.seq, o.err, tc.name)
			}
		})
	}
	if p.Pending() != 0 {
		t.Fatalf("%d publishes still pending", p.Pending())
	}
}

// A publish nobody answers within the timeout is reported as ErrTimeout,
// once: the reply that comes after is ignored and counted as late.
func TestPublisherTimeoutThenLateReply(t *testing.T) {
	nc, p, out := startPublisher(t, 50*time.Millisecond)
	held := make(chan *nats.Msg, 1)
	if _, err := nc.Subscribe("silent.x", func(m *nats.Msg) { held <- m }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	p.Publish(&nats.Msg{Subject: "silent.x", Data: []byte("x")}, "silent", time.Now())
	o := <-out
	if o.op != "silent" || !errors.Is(o.err, ErrTimeout) {
		t.Fatalf("outcome = %+v, want ErrTimeout for silent", o)
	}
	m := <-held
	if err := m.Respond([]byte(`{"stream":"T","seq":42}`)); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.LateReplies() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("late replies = %d, want 1", p.LateReplies())
		}
		time.Sleep(time.Millisecond) // polling the handler's count, with a deadline
	}
	select {
	case o := <-out:
		t.Fatalf("second outcome %+v for one publish", o)
	default:
	}
}

// Close reports a publish still pending as cancelled, and later
// publishes too.
func TestPublisherCloseCancelsPending(t *testing.T) {
	nc, p, out := startPublisher(t, time.Hour)
	if _, err := nc.Subscribe("silent.x", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	p.Publish(&nats.Msg{Subject: "silent.x"}, "pending", time.Now())
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p.Publish(&nats.Msg{Subject: "t.ok"}, "after", time.Now())
	for _, want := range []string{"pending", "after"} {
		if o := <-out; o.op != want || !errors.Is(o.err, ErrCancelled) {
			t.Fatalf("outcome = %+v, want ErrCancelled for %s", o, want)
		}
	}
}
