package writer

// Tests of the dead-letter path when the dead-letter stream is missing,
// refuses writes, or answers late: a rejected message is acked only after
// its dead letter is acked by the stream, and nothing is lost.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/eventide/eventide/writer/consumer"
)

// publishOne publishes body to subject and returns its stream sequence.
func publishOne(t testing.TB, js jetstream.JetStream, subject string, body []byte) uint64 {
	t.Helper()
	ack, err := js.Publish(context.Background(), subject, body)
	if err != nil {
		t.Fatalf("publish to %s: %v", subject, err)
	}
	return ack.Sequence
}

// consumerAckFloor is the stream sequence below which the consumer has
// every message acked.
func consumerAckFloor(t testing.TB, js jetstream.JetStream, stream, consumer string) uint64 {
	t.Helper()
	cons, err := js.Consumer(context.Background(), stream, consumer)
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.AckFloor.Stream
}

// deadLettersBySeq returns the dead letters in stream dlq, counted by the
// event-stream sequence they carry.
func deadLettersBySeq(t testing.TB, js jetstream.JetStream, dlq string) map[uint64]int {
	t.Helper()
	s, err := js.Stream(context.Background(), dlq)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]int{}
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(context.Background(), seq)
		if err != nil {
			continue // a deleted (filler) message
		}
		if v := m.Header.Get(HeaderStreamSeq); v != "" {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("dead letter %d: bad %s %q", seq, HeaderStreamSeq, v)
			}
			out[n]++
		}
	}
	return out
}

// TestDLQStreamDeleted deletes the dead-letter stream while the writer
// runs: a reject cannot be dead-lettered, so neither it nor anything after
// it is acked or checkpointed, however long the writer retries, and
// stopping the writer then leaves it unacked. A new writer recreates the
// stream and dead-letters it once; the events around it are stored once.
func TestDLQStreamDeleted(t *testing.T) {
	s := startNATS(t, t.TempDir(), -1)
	nc := connect(t, s.ClientURL())
	dir := t.TempDir()
	db := openDB(t, dir)
	types := testTypes(t)
	js := jsFor(t, nc)
	rng := newRand(t)
	evs := genEvents(rng, 0, 40, testEventTypes, time.Now().Add(-time.Hour), 50*time.Minute)

	w := newWriter(t, nc, db, Config{Types: types})
	r := runWriter(t, w)
	if err := publishAll(context.Background(), js, evs[:20]); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, w, js, DefaultStream, 20*time.Second)
	if err := js.DeleteStream(context.Background(), DefaultDLQStream); err != nil {
		t.Fatal(err)
	}
	badSeq := publishOne(t, js, "events.view", []byte(`{"data":{}}`)) // missing_time
	if err := publishAll(context.Background(), js, evs[20:]); err != nil {
		t.Fatal(err)
	}
	// Several failed attempts: the writer is retrying, not done.
	waitFor(t, 20*time.Second, func() bool {
		return testutil.ToFloat64(w.m.dlqFailures) >= 3 || w.Stats().LastAppliedSeq >= badSeq
	}, func() string { return fmt.Sprintf("writer at %+v never tried the dead-letter stream", w.Stats()) })
	if st := w.Stats(); st.LastAppliedSeq >= badSeq || st.Rejected != 0 {
		t.Fatalf("with no dead-letter stream, the writer moved its checkpoint to %d (reject at %d), rejected %d",
			st.LastAppliedSeq, badSeq, st.Rejected)
	}
	if floor := consumerAckFloor(t, js, DefaultStream, DefaultConsumer); floor >= badSeq {
		t.Fatalf("with no dead-letter stream, the consumer's ack floor is %d, past the reject at %d", floor, badSeq)
	}
	r.stop(t)
	if floor := consumerAckFloor(t, js, DefaultStream, DefaultConsumer); floor >= badSeq {
		t.Fatalf("after stopping with the dead letter unpublished, the ack floor is %d, past the reject at %d", floor, badSeq)
	}
	if ckpt, err := consumer.ReadCheckpoint(db, DefaultConsumer); err != nil || ckpt.Seq >= badSeq {
		t.Fatalf("stored checkpoint = %+v, %v; want below the reject at %d", ckpt, err, badSeq)
	}

	w = newWriter(t, nc, db, Config{Types: types}) // recreates the dead-letter stream
	r = runWriter(t, w)
	waitApplied(t, w, js, DefaultStream, 20*time.Second)
	r.stop(t)
	checkStoredExactlyOnce(t, db, types, evs)
	if got := deadLettersBySeq(t, js, DefaultDLQStream); got[badSeq] != 1 || len(got) != 1 {
		t.Errorf("dead letters by sequence = %v, want only the reject at %d, once", got, badSeq)
	}
}

// TestDLQStreamRefusesWrites: a dead-letter stream that is full (max
// messages, discard new) answers the dead-letter publish with an error.
// The reject stays unacked and retried; once the stream takes messages
// again it is dead-lettered and everything after it stored.
func TestDLQStreamRefusesWrites(t *testing.T) {
	s := startNATS(t, t.TempDir(), -1)
	nc := connect(t, s.ClientURL())
	db := openDB(t, t.TempDir())
	types := testTypes(t)
	js := jsFor(t, nc)
	rng := newRand(t)
	evs := genEvents(rng, 0, 30, testEventTypes, time.Now().Add(-time.Hour), 50*time.Minute)

	w := newWriter(t, nc, db, Config{Types: types})
	dlq, err := js.Stream(context.Background(), DefaultDLQStream)
	if err != nil {
		t.Fatal(err)
	}
	full := dlq.CachedInfo().Config
	full.MaxMsgs = 1
	full.Discard = jetstream.DiscardNew
	if _, err := js.UpdateStream(context.Background(), full); err != nil {
		t.Fatal(err)
	}
	publishOne(t, js, DLQSubjectPrefix+"filler", []byte("fills the dead-letter stream"))
	r := runWriter(t, w)

	if err := publishAll(context.Background(), js, evs[:10]); err != nil {
		t.Fatal(err)
	}
	badSeq := publishOne(t, js, "events.view", []byte(`{"time":"yesterday"}`)) // invalid_time
	if err := publishAll(context.Background(), js, evs[10:]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() bool {
		return testutil.ToFloat64(w.m.dlqFailures) >= 3 || w.Stats().LastAppliedSeq >= badSeq
	}, func() string { return fmt.Sprintf("writer at %+v never tried the dead-letter stream", w.Stats()) })
	if st := w.Stats(); st.LastAppliedSeq >= badSeq || st.Rejected != 0 {
		t.Fatalf("with a full dead-letter stream, the writer moved its checkpoint to %d (reject at %d), rejected %d",
			st.LastAppliedSeq, badSeq, st.Rejected)
	}
	if floor := consumerAckFloor(t, js, DefaultStream, DefaultConsumer); floor >= badSeq {
		t.Fatalf("with a full dead-letter stream, the consumer's ack floor is %d, past the reject at %d", floor, badSeq)
	}

	full.MaxMsgs = -1
	if _, err := js.UpdateStream(context.Background(), full); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, w, js, DefaultStream, 30*time.Second)
	r.stop(t)
	checkStoredExactlyOnce(t, db, types, evs)
	if got := deadLettersBySeq(t, js, DefaultDLQStream); got[badSeq] != 1 || len(got) != 1 {
		t.Errorf("dead letters by sequence = %v, want only the reject at %d, once", got, badSeq)
	}
	if st := w.Stats(); st.Rejected != 1 {
		t.Errorf("Stats = %+v, want 1 rejected", st)
	}
}

// TestDLQAckAwaited answers the dead-letter publishes itself, late: the
// dead-letter stream is deleted and a plain subscriber on its subjects
// holds each publish. The first is answered with an error, which must make
// the writer publish again; the second with an ack, and only then may the
// reject be acked. Until then the checkpoint stays below it.
func TestDLQAckAwaited(t *testing.T) {
	s := startNATS(t, t.TempDir(), -1)
	nc := connect(t, s.ClientURL())
	db := openDB(t, t.TempDir())
	types := testTypes(t)
	js := jsFor(t, nc)

	w := newWriter(t, nc, db, Config{Types: types})
	if err := js.DeleteStream(context.Background(), DefaultDLQStream); err != nil {
		t.Fatal(err)
	}
	fake := connect(t, s.ClientURL())
	requests := make(chan *nats.Msg, 16)
	sub, err := fake.ChanSubscribe(DLQSubjectPrefix+">", requests)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := fake.Flush(); err != nil {
		t.Fatal(err)
	}
	r := runWriter(t, w)

	now := time.Now().Add(-time.Minute).UTC()
	publishOne(t, js, "events.click", fmt.Appendf(nil, `{"time":%d,"data":{"n":1}}`, now.UnixMilli()))
	badSeq := publishOne(t, js, "events.view", []byte(`{"data":{}}`))
	publishOne(t, js, "events.click", fmt.Appendf(nil, `{"time":%d,"data":{"n":2}}`, now.UnixMilli()))

	next := func(what string) *nats.Msg {
		t.Helper()
		select {
		case m := <-requests:
			return m
		case <-time.After(20 * time.Second):
			t.Fatalf("no dead-letter publish %s within 20s (writer at %+v)", what, w.Stats())
			return nil
		}
	}
	var mu sync.Mutex
	respond := func(m *nats.Msg, body any) {
		mu.Lock()
		defer mu.Unlock()
		b, _ := json.Marshal(body)
		if err := m.Respond(b); err != nil {
			t.Fatal(err)
		}
	}
	checkHeld := func(when string) {
		t.Helper()
		if st := w.Stats(); st.LastAppliedSeq >= badSeq {
			t.Fatalf("%s: checkpoint %d covers the reject at %d before its dead letter was acked", when, st.LastAppliedSeq, badSeq)
		}
		if floor := consumerAckFloor(t, js, DefaultStream, DefaultConsumer); floor >= badSeq {
			t.Fatalf("%s: ack floor %d covers the reject at %d before its dead letter was acked", when, floor, badSeq)
		}
	}

	first := next("at all")
	if got := first.Header.Get(HeaderStreamSeq); got != strconv.FormatUint(badSeq, 10) {
		t.Fatalf("dead letter for seq %s, want %d", got, badSeq)
	}
	checkHeld("first publish held")
	respond(first, map[string]any{"error": map[string]any{"code": 503, "err_code": 10077,
		"description": "test: the dead-letter stream is unavailable"}})

	second := next("after an error answer (the error was not noticed)")
	if second.Header.Get(jetstream.MsgIDHeader) != first.Header.Get(jetstream.MsgIDHeader) {
		t.Errorf("retry has Nats-Msg-Id %q, first publish %q", second.Header.Get(jetstream.MsgIDHeader), first.Header.Get(jetstream.MsgIDHeader))
	}
	checkHeld("second publish held")
	respond(second, map[string]any{"stream": DefaultDLQStream, "seq": 1})

	waitApplied(t, w, js, DefaultStream, 20*time.Second)
	r.stop(t)
	if st := w.Stats(); st.Rejected != 1 || st.Ingested != 2 {
		t.Errorf("Stats = %+v, want 1 rejected, 2 ingested", st)
	}
}
