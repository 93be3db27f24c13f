package main

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/internal/natstest"
	"github.com/eventide/eventide/loadtest/internal/rawjs"
)

// TestRawConsumeAcksAsTheWriter: the raw pipeline's consumer has the
// writer's ack policy (AckAll) and acks once per fetch, not per message,
// and every message ends acknowledged in JetStream. Acks are counted on the
// wire by a plain subscription to the consumer's ack subjects.
func TestRawConsumeAcksAsTheWriter(t *testing.T) {
	s := natstest.StartServer(t)
	nc, js := natstest.Connect(t, s.ClientURL())
	ctx := context.Background()
	subject, cons, remove, err := createRawStream(ctx, js, "rawtest")
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	var acks atomic.Int64
	sub, err := nc.Subscribe("$JS.ACK."+rawStreamName("rawtest")+".raw.>", func(*nats.Msg) { acks.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	const n = 2000
	var futures []jetstream.PubAckFuture
	for range n {
		f, err := js.PublishAsync(subject, []byte(`{"data":{}}`))
		if err != nil {
			t.Fatal(err)
		}
		futures = append(futures, f)
	}
	natstest.AwaitAcks(t, futures)

	var handled, acked atomic.Int64
	stop := rawjs.Consume(ctx, cons, func(jetstream.Msg) { handled.Add(1) }, func(k int) { acked.Add(int64(k)) })
	deadline := time.Now().Add(20 * time.Second)
	for acked.Load() < n {
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("%d of %d messages acked", acked.Load(), n)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	stop()
	if handled.Load() != n {
		t.Errorf("%d messages handled, want %d", handled.Load(), n)
	}
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Config.AckPolicy != jetstream.AckAllPolicy {
			t.Fatalf("raw consumer's ack policy %v, want %v (the writer's)", info.Config.AckPolicy, jetstream.AckAllPolicy)
		}
		if info.AckFloor.Stream == n && info.NumAckPending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ack floor %d with %d pending, want %d with none", info.AckFloor.Stream, info.NumAckPending, n)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// 2,000 messages in fetches of at most 1,000: a few acks, not 2,000.
	if got := acks.Load(); got < 2 || got > n/10 {
		t.Errorf("%d acks for %d messages: want one per fetch", got, n)
	}
}

// A raw message's body carries its intended start (to the nanosecond),
// has the events' median size less 8 bytes at --payload 200, and is JSON.
func TestRawBodyIntended(t *testing.T) {
	intended := time.Unix(1795000000, 123456789)
	pad := strings.Repeat("x", 200-8-66)
	body := appendRawBody(nil, intended, pad)
	if len(body) != 192 {
		t.Errorf("body of %d bytes, want 192: %s", len(body), body)
	}
	if !json.Valid(body) {
		t.Errorf("body is not JSON: %s", body)
	}
	got, ok := rawIntended(body)
	if !ok || !got.Equal(intended) {
		t.Errorf("rawIntended = %v, %v; want %v", got, ok, intended)
	}
	for _, bad := range []string{``, `{"t":"12`, `{"x":"0001795000000123456789"}`, `{"t":"00017950000x0123456789"}`, `{"t":"9999999999999999999"}`} {
		if _, ok := rawIntended([]byte(bad)); ok {
			t.Errorf("rawIntended(%q) accepted", bad)
		}
	}
}

// FuzzRawIntended: rawIntended never panics, and what appendRawBody
// writes it reads back.
func FuzzRawIntended(f *testing.F) {
	f.Add([]byte(`{"t":"1795000000123456789","time":1795000000123,"data":{"pad":"x"}}`), int64(1795000000123456789))
	f.Add([]byte(`{"t":"9999999999999999999"}`), int64(0))
	f.Add([]byte(`{"t":"`), int64(1))
	f.Fuzz(func(t *testing.T, body []byte, ns int64) {
		rawIntended(body)
		if ns < 0 {
			ns = -ns
		}
		if ns < 0 {
			return
		}
		at := time.Unix(0, ns)
		if got, ok := rawIntended(appendRawBody(nil, at, "x")); !ok || !got.Equal(at) {
			t.Fatalf("round trip of %d: %v, %v", ns, got, ok)
		}
	})
}
