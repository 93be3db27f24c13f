package writer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/writer/consumer"
)

func newRand(t testing.TB) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if s := strings.TrimSpace(os.Getenv("WRITER_TEST_SEED")); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d (rerun with WRITER_TEST_SEED=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

var testEventTypes = []string{"click", "view", "hot", "short"}

func jsFor(t testing.TB, nc *nats.Conn) jetstream.JetStream {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// checkNoWriterGoroutines fails if a goroutine of this package outlives
// Run.
func checkNoWriterGoroutines(t testing.TB) {
	t.Helper()
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		ours := strings.Contains(g, "eventide/writer.(*Writer)") || strings.Contains(g, "eventide/writer/consumer.(*Consumer)")
		if ours && !strings.Contains(g, "_test.go") {
			t.Errorf("writer goroutine still running after Run returned:\n%s", g)
		}
	}
}

// TestIngest publishes many events in every wire shape across types
// (one split into sub-partitions), hours and minutes, and checks each is
// stored exactly once and every per-minute count is exact.
func TestIngest(t *testing.T) {
	count := 100_000
	if testing.Short() {
		count = 10_000
	}
	rng := newRand(t)
	s := startNATS(t, t.TempDir(), -1)
	nc := connect(t, s.ClientURL())
	db := openDB(t, t.TempDir())
	types := testTypes(t)
	w := newWriter(t, nc, db, Config{Types: types})
	// New is idempotent: a second one against the same server succeeds.
	newWriter(t, nc, db, Config{Types: types})
	r := runWriter(t, w)

	js := jsFor(t, nc)
	now := time.Now()
	evs := genEvents(rng, 0, count, testEventTypes, now.Add(-2*time.Hour), 2*time.Hour-time.Minute)
	start := time.Now()
	if err := publishAll(context.Background(), js, evs); err != nil {
		t.Fatal(err)
	}
	published := time.Since(start)
	waitApplied(t, w, js, DefaultStream, 60*time.Second)
	t.Logf("%d events: published in %s, stored in %s", count, published.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	if !w.Ready() {
		t.Error("Ready() = false while running and connected")
	}
	r.stop(t)
	if w.Ready() {
		t.Error("Ready() = true after Run returned")
	}
	checkNoWriterGoroutines(t)

	st := w.Stats()
	if st.Ingested != uint64(count) || st.Rejected != 0 || st.LastAppliedSeq != uint64(count) {
		t.Errorf("Stats = %+v, want %d ingested, none rejected, last seq %d", st, count, count)
	}
	checkStoredExactlyOnce(t, db, types, evs)

	ckpt, err := consumer.ReadCheckpoint(db, DefaultConsumer)
	if err != nil || ckpt.Seq != uint64(count) {
		t.Errorf("stored checkpoint = %+v, %v; want seq %d", ckpt, err, count)
	}
	cons, err := js.Consumer(context.Background(), DefaultStream, DefaultConsumer)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, func() bool {
		info, err := cons.Info(context.Background())
		return err == nil && info.AckFloor.Stream == uint64(count) && info.NumAckPending == 0
	}, func() string { return "consumer did not receive every ack" })
}

// A message of each invalid kind, with valid events on either side.
type rejectCase struct {
	subject string
	body    string
	reason  string
	dlqType string
}

func rejectCases(now time.Time) []rejectCase {
	recent := now.Add(-time.Minute).UTC()
	ts := strconv.Quote(recent.Format(time.RFC3339Nano))
	return []rejectCase{
		{"events.view", `{"time":` + ts + `,"data":{"pad":"` + strings.Repeat("x", DefaultMaxPayload) + `"}}`, reasonPayloadTooLarge, "view"},
		{"events.view", `{"time":` + ts + `,`, reasonMalformedJSON, "view"},
		{"raw.events", `{"time":` + ts + `}`, reasonMissingType, "unknown"},
		{"events.Bad", `{"time":` + ts + `}`, reasonInvalidType, "unknown"},
		{"events.click", `{"type":"view","time":` + ts + `}`, reasonTypeMismatch, "click"},
		{"events.secret", `{"time":` + ts + `}`, reasonTypeNotAllowed, "secret"},
		{"events.view", `{"id":"9a3e2f7c-1d2b-4c5e-8f6a-0b1c2d3e4f50"}`, reasonInvalidID, "view"},
		{"events.view", `{"data":{}}`, reasonMissingTime, "view"},
		{"events.view", `{"time":"yesterday"}`, reasonInvalidTime, "view"},
		{"events.view", `{"id":"353c91a0-e705-11f0-9234-0123456789ab","time":` + ts + `}`, reasonIDTimeMismatch, "view"},
		{"events.view", `{"time":` + ts + `,"ttl":0}`, reasonInvalidTTL, "view"},
		{"events.view", `{"time":` + ts + `,"user":1}`, reasonInvalidUser, "view"},
		{"events.view", `{"time":` + ts + `,"author":[]}`, reasonInvalidAuthor, "view"},
		{"events.view", `{"time":` + ts + `,"data":[1]}`, reasonInvalidData, "view"},
		{"events.view", `{"time":` + strconv.Quote(now.Add(time.Hour).UTC().Format(time.RFC3339)) + `}`, reasonTimeInFuture, "view"},
		{"events.view", `{"time":` + ts + `,"ttl":1}`, reasonExpiredOnArrival, "view"},
	}
}

// TestDeadLetters publishes every kind of invalid message between valid
// events: each reject lands in the dead-letter stream once, with its
// reason, origin and body, and the valid events around it are stored.
func TestDeadLetters(t *testing.T) {
	s := startNATS(t, t.TempDir(), -1)
	nc := connect(t, s.ClientURL())
	db := openDB(t, t.TempDir())
	types := testTypes(t)
	types.AllowOnlyListed = true
	types.Types["click"] = schema.TypeSettings{}
	types.Types["view"] = schema.TypeSettings{}
	reg := prometheus.NewPedanticRegistry()
	w := newWriter(t, nc, db, Config{Types: types, Subjects: []string{"events.>", "raw.events"}, Registerer: reg})
	r := runWriter(t, w)
	js := jsFor(t, nc)

	now := time.Now()
	cases := rejectCases(now)
	rng := newRand(t)
	valid := genEvents(rng, 0, 2*len(cases)+2, []string{"click", "view", "hot"}, now.Add(-30*time.Minute), 20*time.Minute)
	bySeq := map[uint64]rejectCase{}
	publish := func(subject string, body []byte, header nats.Header) uint64 {
		m := &nats.Msg{Subject: subject, Data: body, Header: header}
		ack, err := js.PublishMsg(context.Background(), m)
		if err != nil {
			t.Fatalf("publish to %s: %v", subject, err)
		}
		return ack.Sequence
	}
	for i, c := range cases {
		publish(valid[2*i].subject, valid[2*i].body, nil)
		hdr := nats.Header{"X-Trace": []string{"t-" + strconv.Itoa(i)}, "Nats-Msg-Id": []string{"producer-" + strconv.Itoa(i)}}
		bySeq[publish(c.subject, []byte(c.body), hdr)] = c
		publish(valid[2*i+1].subject, valid[2*i+1].body, nil)
	}
	// A body as large as the server accepts: its dead letter, which adds
	// headers, must be cut to fit.
	huge := make([]byte, nc.MaxPayload()-200)
	for i := range huge {
		huge[i] = 'x'
	}
	hugeSeq := publish("events.view", huge, nil)
	bySeq[hugeSeq] = rejectCase{"events.view", string(huge), reasonPayloadTooLarge, "view"}
	last := valid[len(valid)-2:]
	for _, ev := range last {
		publish(ev.subject, ev.body, nil)
	}

	waitApplied(t, w, js, DefaultStream, 30*time.Second)
	r.stop(t)
	if st := w.Stats(); st.Rejected != uint64(len(bySeq)) || st.Ingested != uint64(len(valid)) {
		t.Errorf("Stats = %+v, want %d rejected and %d ingested", st, len(bySeq), len(valid))
	}
	checkStoredExactlyOnce(t, db, types, valid)

	dlq, err := js.Stream(context.Background(), DefaultDLQStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := dlq.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(len(bySeq)) {
		t.Fatalf("dead-letter stream holds %d messages, want %d", info.State.Msgs, len(bySeq))
	}
	for dseq := uint64(1); dseq <= info.State.LastSeq; dseq++ {
		m, err := dlq.GetMsg(context.Background(), dseq)
		if err != nil {
			t.Fatal(err)
		}
		seq, err := strconv.ParseUint(m.Header.Get(HeaderStreamSeq), 10, 64)
		c, ok := bySeq[seq]
		if err != nil || !ok {
			t.Errorf("dead letter %d has %s %q, which is not a rejected message", dseq, HeaderStreamSeq, m.Header.Get(HeaderStreamSeq))
			continue
		}
		delete(bySeq, seq)
		if want := DLQSubjectPrefix + c.dlqType; m.Subject != want {
			t.Errorf("seq %d: dead letter subject %s, want %s", seq, m.Subject, want)
		}
		if got := m.Header.Get(HeaderError); !strings.HasPrefix(got, c.reason+": ") || len(got) <= len(c.reason)+2 {
			t.Errorf("seq %d: %s = %q, want reason %s and a message", seq, HeaderError, got, c.reason)
		}
		if got := m.Header.Get(HeaderOriginalSubject); got != c.subject {
			t.Errorf("seq %d: %s = %q, want %q", seq, HeaderOriginalSubject, got, c.subject)
		}
		if got, want := m.Header.Get(jetstream.MsgIDHeader), fmt.Sprintf("dlq-%s-%d", DefaultStream, seq); got != want {
			t.Errorf("seq %d: Nats-Msg-Id = %q, want %q", seq, got, want)
		}
		if seq == hugeSeq {
			if got := m.Header.Get(HeaderTruncated); got != strconv.Itoa(len(huge)) || len(m.Data) >= len(huge) || string(m.Data) != string(huge[:len(m.Data)]) {
				t.Errorf("huge reject: %s = %q and %d bytes of body, want the original length %d and a prefix of the body",
					HeaderTruncated, got, len(m.Data), len(huge))
			}
			continue
		}
		if string(m.Data) != c.body {
			t.Errorf("seq %d: dead letter body %.80q, want the original %.80q", seq, m.Data, c.body)
		}
		if !strings.HasPrefix(m.Header.Get("X-Trace"), "t-") {
			t.Errorf("seq %d: the producer's X-Trace header was not kept: %v", seq, m.Header)
		}
	}
	for seq, c := range bySeq {
		t.Errorf("seq %d (%s) was not dead-lettered", seq, c.reason)
	}

	want := map[string]float64{}
	for _, c := range rejectCases(now) {
		want[c.reason]++
	}
	want[reasonPayloadTooLarge]++
	for reason, n := range want {
		if got := testutil.ToFloat64(w.m.rejected.WithLabelValues(reason)); got != n {
			t.Errorf("eventide_writer_events_rejected_total{reason=%q} = %v, want %v", reason, got, n)
		}
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
}

// TestFailedApplyIsRetriedNotAcked runs the writer on a storage that fails
// every Apply: it keeps the batch (waiting-on-storage gauge up, nothing
// acked, nothing redelivered though AckWait passes many times, checkpoint
// unmoved) and on cancel returns without acking. A new
// writer on the reopened storage then stores everything once, and the
// reject it dead-letters again is deduplicated by the stream.
func TestFailedApplyIsRetriedNotAcked(t *testing.T) {
	s := startNATS(t, t.TempDir(), -1)
	nc := connect(t, s.ClientURL())
	dir := t.TempDir()
	db := openDB(t, dir)
	types := testTypes(t)
	// One message per fetch (and so at most 2 delivered and unacked): the
	// reject is the first batch, stuck in Apply, and the first event the
	// second, fetched and validated behind it, which must wait its turn and
	// never be acked when the writer stops (its checkpoint would cover the
	// first batch).
	// A short AckWait: the batches must still not be redelivered while
	// storage fails for several times that long.
	w := newWriter(t, nc, db, Config{Types: types, FetchBatch: 1, ackWait: time.Second})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	r := runWriter(t, w)
	js := jsFor(t, nc)
	rng := newRand(t)
	evs := genEvents(rng, 0, 2, []string{"click"}, time.Now().Add(-time.Hour), time.Minute)
	pub := func(subject string, body []byte) {
		if _, err := js.Publish(context.Background(), subject, body); err != nil {
			t.Fatal(err)
		}
	}
	pub("events.click", []byte("{not json"))
	pub(evs[0].subject, evs[0].body)
	pub(evs[1].subject, evs[1].body)

	waitFor(t, 10*time.Second, func() bool {
		return testutil.ToFloat64(w.m.consumer.ApplyFailures) >= 5 && testutil.ToFloat64(w.m.consumer.WaitingStorage) == 1
	}, func() string { return "the writer did not retry the failing Apply" })
	cons, err := js.Consumer(context.Background(), DefaultStream, DefaultConsumer)
	if err != nil {
		t.Fatal(err)
	}
	if w.Ready() {
		t.Error("Ready() = true while every storage Apply fails")
	}
	// Past AckWait the batch would be handed to the next puller, unless
	// the writer keeps saying it is in progress.
	other, err := cons.Fetch(10, jetstream.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for m := range other.Messages() {
		md, _ := m.Metadata()
		t.Errorf("another client was handed stream sequence %d while the writer was storing it", md.Sequence.Stream)
	}
	if info, err := cons.Info(context.Background()); err != nil || info.NumRedelivered != 0 || info.NumAckPending != 2 {
		t.Fatalf("while storage fails: consumer info %+v (%v); want nothing redelivered and 2 ack pending "+
			"(the stuck batch and the one behind it)", info, err)
	}
	dlqMsgs := func() uint64 {
		st, err := js.Stream(context.Background(), DefaultDLQStream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	if n := dlqMsgs(); n != 1 {
		t.Fatalf("dead-letter stream holds %d messages before Apply succeeded, want 1", n)
	}
	r.stop(t)
	if st := w.Stats(); st.LastAppliedSeq != 0 || st.Ingested != 0 {
		t.Errorf("after failed applies, Stats = %+v, want nothing applied", st)
	}
	if info, err := cons.Info(context.Background()); err != nil || info.AckFloor.Stream != 0 {
		t.Fatalf("consumer ack floor = %+v (%v), want 0: a message was acked without being stored", info.AckFloor, err)
	}

	db2 := openDB(t, dir)
	w2 := newWriter(t, nc, db2, Config{Types: types})
	r2 := runWriter(t, w2)
	waitApplied(t, w2, js, DefaultStream, 10*time.Second)
	r2.stop(t)
	checkStoredExactlyOnce(t, db2, types, evs)
	if n := dlqMsgs(); n != 1 {
		t.Errorf("dead-letter stream holds %d messages after the reject was redelivered, want 1", n)
	}
	if st := w2.Stats(); st.Rejected != 1 || st.Ingested != 2 {
		t.Errorf("Stats = %+v, want 2 ingested and 1 rejected", st)
	}
}

// TestRedeliveryIsNotReapplied checks exactly-once effect under the ways a
// message comes back or goes astray: a consumer that redelivers the whole
// stream (how the writer restarts on servers before 2.14), deliveries
// outstanding to a process that died, deliveries taken by another client
// mid-run, an outside reset of the consumer to sequence 1, and the
// consumer deleted mid-run.
func TestRedeliveryIsNotReapplied(t *testing.T) {
	s := startNATS(t, t.TempDir(), -1)
	nc := connect(t, s.ClientURL())
	db := openDB(t, t.TempDir())
	types := testTypes(t)
	js := jsFor(t, nc)
	rng := newRand(t)
	now := time.Now()
	var all []genEvent
	publish := func(n int) {
		evs := genEvents(rng, len(all), n, testEventTypes, now.Add(-90*time.Minute), 80*time.Minute)
		if err := publishAll(context.Background(), js, evs); err != nil {
			t.Fatal(err)
		}
		all = append(all, evs...)
	}
	w := newWriter(t, nc, db, Config{Types: types, FetchBatch: 100})
	r := runWriter(t, w)
	publish(2000)
	waitApplied(t, w, js, DefaultStream, 20*time.Second)
	r.stop(t)
	checkStoredExactlyOnce(t, db, types, all)

	// 1. The consumer is recreated and redelivers everything from 1.
	w = newWriter(t, nc, db, Config{Types: types, FetchBatch: 100, noConsumerReset: true})
	r = runWriter(t, w)
	publish(500)
	waitApplied(t, w, js, DefaultStream, 20*time.Second)
	r.stop(t)
	if st := w.Stats(); st.Skipped != 2000 || st.Ingested != 500 {
		t.Errorf("after recreating the consumer: Stats = %+v, want 2000 skipped and 500 ingested", st)
	}
	checkStoredExactlyOnce(t, db, types, all)

	// 2. A process took deliveries and died without acking them: the next
	// writer must not let its checkpoint pass them.
	publish(300)
	cons, err := js.Consumer(context.Background(), DefaultStream, DefaultConsumer)
	if err != nil {
		t.Fatal(err)
	}
	taken, err := cons.FetchNoWait(50)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range taken.Messages() {
		n++
	}
	if n == 0 {
		t.Fatal("could not take deliveries from the consumer")
	}
	w = newWriter(t, nc, db, Config{Types: types, FetchBatch: 100})
	r = runWriter(t, w)
	waitApplied(t, w, js, DefaultStream, 20*time.Second)
	checkStoredExactlyOnce(t, db, types, all)

	// 3. Another client steals deliveries while the writer runs, and the
	// consumer is reset to sequence 1 from outside.
	stolen := make(chan int)
	go func() {
		total := 0
		for range 20 {
			b, err := cons.Fetch(7, jetstream.FetchMaxWait(20*time.Millisecond))
			if err != nil {
				break
			}
			for range b.Messages() {
				total++
			}
		}
		stolen <- total
	}()
	publish(1000)
	t.Logf("another client took %d deliveries mid-run", <-stolen)
	if _, err := js.ResetConsumerToSequence(context.Background(), DefaultStream, DefaultConsumer, 1); err != nil {
		t.Fatal(err)
	}
	publish(200)
	waitApplied(t, w, js, DefaultStream, 20*time.Second)
	// Deliveries the writer never saw make it reposition; wait until the
	// consumer is quiet so none is still outstanding.
	waitFor(t, 20*time.Second, func() bool {
		info, err := cons.Info(context.Background())
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0
	}, func() string { return "consumer still has outstanding deliveries" })
	// 4. The consumer is deleted from outside while the writer runs.
	if err := js.DeleteConsumer(context.Background(), DefaultStream, DefaultConsumer); err != nil {
		t.Fatal(err)
	}
	publish(300)
	waitApplied(t, w, js, DefaultStream, 20*time.Second)
	r.stop(t)
	checkStoredExactlyOnce(t, db, types, all)
	if resets := testutil.ToFloat64(w.m.consumer.Resets); resets < 2 {
		t.Errorf("consumer resets = %v, want the start plus at least one for the lost deliveries", resets)
	}
	checkNoWriterGoroutines(t)
}

// TestStreamRecreated: a checkpoint past the end of a recreated stream is
// refused with ErrCheckpointAhead; ResetCheckpoint then stores the new
// stream from its start, keeping what was stored, and the new stream's
// events get new ids even where sequence and time repeat.
func TestStreamRecreated(t *testing.T) {
	s := startNATS(t, t.TempDir(), -1)
	nc := connect(t, s.ClientURL())
	db := openDB(t, t.TempDir())
	types := testTypes(t)
	js := jsFor(t, nc)
	rng := newRand(t)
	old := genEvents(rng, 0, 300, testEventTypes, time.Now().Add(-time.Hour), 50*time.Minute)

	w := newWriter(t, nc, db, Config{Types: types})
	r := runWriter(t, w)
	if err := publishAll(context.Background(), js, old); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, w, js, DefaultStream, 20*time.Second)
	r.stop(t)

	if err := js.DeleteStream(context.Background(), DefaultStream); err != nil {
		t.Fatal(err)
	}
	_, err := New(context.Background(), nc, db, Config{Types: types, Logger: testLogger()})
	if !errors.Is(err, ErrCheckpointAhead) || !strings.Contains(err.Error(), "ResetCheckpoint") {
		t.Fatalf("New after the stream was recreated: err = %v, want ErrCheckpointAhead saying how to fix it", err)
	}

	// The same sequences and times again, sent without ids.
	var renewed []genEvent
	for i, ev := range old[:100] {
		n := len(old) + i
		renewed = append(renewed, genEvent{n: n, typ: ev.typ, time: ev.time, subject: ev.subject,
			body: fmt.Appendf(nil, `{"time":%q,"data":{"n":%d}}`, ev.time.Format(time.RFC3339Nano), n)})
	}
	if err := publishAll(context.Background(), js, renewed); err != nil {
		t.Fatal(err)
	}
	w = newWriter(t, nc, db, Config{Types: types, ResetCheckpoint: true})
	r = runWriter(t, w)
	waitApplied(t, w, js, DefaultStream, 20*time.Second)
	r.stop(t)
	checkStoredExactlyOnce(t, db, types, append(append([]genEvent(nil), old...), renewed...))
	ckpt, err := consumer.ReadCheckpoint(db, DefaultConsumer)
	if err != nil || ckpt.Epoch != 1 || ckpt.Seq != uint64(len(renewed)) {
		t.Errorf("checkpoint = %+v, %v; want epoch 1 at seq %d", ckpt, err, len(renewed))
	}
	// Leaving ResetCheckpoint set, or clearing it, changes nothing now.
	newWriter(t, nc, db, Config{Types: types, ResetCheckpoint: true})
	newWriter(t, nc, db, Config{Types: types})
	if ckpt2, _ := consumer.ReadCheckpoint(db, DefaultConsumer); ckpt2 != ckpt {
		t.Errorf("checkpoint moved from %+v to %+v without a reason", ckpt, ckpt2)
	}
}

// TestNATSRestart restarts the NATS server twice while events are
// published and ingested: the writer resumes, and every event the
// publisher got an ack for is stored exactly once.
func TestNATSRestart(t *testing.T) {
	storeDir := t.TempDir()
	s := startNATS(t, storeDir, -1)
	port := natsPort(s)
	url := s.ClientURL()
	nc := connect(t, url)
	db := openDB(t, t.TempDir())
	types := testTypes(t)
	w := newWriter(t, nc, db, Config{Types: types, FetchBatch: 200})
	r := runWriter(t, w)

	pnc := connect(t, url)
	js := jsFor(t, pnc)
	rng := newRand(t)
	count := 20_000
	if testing.Short() {
		count = 5_000
	}
	evs := genEvents(rng, 0, count, testEventTypes, time.Now().Add(-time.Hour), 50*time.Minute)
	p := startPublisher(js, evs, 500, 5*time.Millisecond)

	for restart := range 2 {
		target := uint64(count * (restart + 1) / 4)
		waitFor(t, 30*time.Second, func() bool { return w.Stats().LastAppliedSeq >= target },
			func() string { return fmt.Sprintf("writer stuck at %+v before restart %d", w.Stats(), restart) })
		s.Shutdown()
		s.WaitForShutdown()
		if w.Ready() {
			// Ready follows the connection; give the client a moment to notice.
			waitFor(t, 5*time.Second, func() bool { return !w.Ready() }, func() string { return "Ready() stayed true with NATS down" })
		}
		s = startNATS(t, storeDir, port)
		t.Logf("restart %d: writer was at %+v", restart, w.Stats())
	}
	published := p.wait(t)
	if len(published) != count {
		t.Fatalf("published %d of %d", len(published), count)
	}
	waitFor(t, 10*time.Second, w.Ready, func() string { return "writer not Ready after NATS came back" })
	waitApplied(t, w, jsFor(t, nc), DefaultStream, 60*time.Second)
	r.stop(t)
	if last := streamLastSeq(t, jsFor(t, nc), DefaultStream); last != uint64(count) {
		t.Errorf("stream last seq %d, want %d (one message per event)", last, count)
	}
	checkStoredExactlyOnce(t, db, types, published)
}

// TestMetricsLint checks the writer's metrics pass Prometheus' lint, and
// that registering twice on one registry is refused.
func TestMetricsLint(t *testing.T) {
	s := startNATS(t, t.TempDir(), -1)
	nc := connect(t, s.ClientURL())
	db := openDB(t, t.TempDir())
	reg := prometheus.NewPedanticRegistry()
	w := newWriter(t, nc, db, Config{Registerer: reg})
	r := runWriter(t, w)
	js := jsFor(t, nc)
	evs := genEvents(newRand(t), 0, 10, testEventTypes, time.Now().Add(-time.Hour), time.Minute)
	if err := publishAll(context.Background(), js, evs); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(context.Background(), "events.x", []byte("[]")); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, w, js, DefaultStream, 10*time.Second)
	r.stop(t)

	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	for _, want := range []string{
		"eventide_writer_events_ingested_total", "eventide_writer_events_rejected_total",
		"eventide_writer_messages_skipped_total", "eventide_writer_batch_messages",
		"eventide_writer_apply_duration_seconds", "eventide_writer_consumer_pending_messages",
		"eventide_writer_waiting_on_storage", "eventide_writer_last_applied_sequence",
	} {
		if !names[want] {
			t.Errorf("metric %s is not registered", want)
		}
	}
	if got := testutil.ToFloat64(w.m.consumer.LastApplied); got != 11 {
		t.Errorf("last applied sequence gauge = %v, want 11", got)
	}
	if _, err := New(context.Background(), nc, db, Config{Registerer: reg, Logger: testLogger()}); err == nil {
		t.Error("a second writer registered its metrics on the same registry")
	}
}
