package fanout

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventide/eventide/internal/natsembed"
	"github.com/eventide/eventide/reader"
	"github.com/eventide/eventide/storage"
	"github.com/eventide/eventide/writer"
)

// natsEnv is a real embedded JetStream server, a store on real files, a
// running writer and a running fan-out worker.
type natsEnv struct {
	t      testing.TB
	nc     *nats.Conn
	js     jetstream.JetStream
	db     *storage.DB
	reg    *prometheus.Registry
	wr     *writer.Writer
	opts   []func(*Options)
	f      *Fanout
	w      *Worker
	stop   func()
	events *reader.Reader
	tl     *reader.Timelines
}

func newNATSEnv(t testing.TB, opts ...func(*Options)) *natsEnv {
	t.Helper()
	ns, err := natsembed.Start(natsembed.Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { natsembed.Stop(ns) })
	nc, err := nats.Connect("nats://"+ns.Addr().(*net.TCPAddr).String(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	db, err := storage.Open(t.TempDir(), storage.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e := &natsEnv{t: t, nc: nc, js: js, db: db, opts: opts}

	ctx, cancel := context.WithCancel(context.Background())
	wr, err := writer.New(ctx, nc, db, writer.Config{FetchWait: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e.wr = wr
	wdone := make(chan error, 1)
	go func() { wdone <- wr.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-wdone; err != nil {
			t.Error(err)
		}
	})
	if e.events, err = reader.New(db, reader.Options{}); err != nil {
		t.Fatal(err)
	}
	if e.tl, err = reader.NewTimelines(db, reader.TimelineOptions{}); err != nil {
		t.Fatal(err)
	}
	e.startWorker()
	t.Cleanup(func() { e.stop() })
	return e
}

// startWorker opens a Fanout and runs a Worker on it, as a process start
// does.
func (e *natsEnv) startWorker() {
	e.t.Helper()
	e.reg = prometheus.NewRegistry()
	o := DefaultOptions()
	o.PostTypes = []string{"post", "post"} // a type twice must not make overlapping filters
	for _, set := range e.opts {
		set(&o)
	}
	o.Registerer = e.reg
	if o.WriterBusy == nil {
		o.WriterBusy = WriterBacklog(e.wr) // as cmd/ingest wires it
	}
	var err error
	if e.f, err = Open(e.db, o); err != nil {
		e.t.Fatal(err)
	}
	if e.w, err = NewWorker(context.Background(), e.nc, e.db, e.f, WorkerConfig{
		Writer: writer.Config{FetchWait: 10 * time.Millisecond}, FetchWait: 10 * time.Millisecond, Registerer: e.reg,
	}); err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.w.Run(ctx) }()
	e.stop = func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Error(err)
		}
	}
}

// publish publishes body to events.<typ> and returns its stream sequence.
func (e *natsEnv) publish(typ, body string) uint64 {
	e.t.Helper()
	ack, err := e.js.Publish(context.Background(), "events."+typ, []byte(body))
	if err != nil {
		e.t.Fatal(err)
	}
	return ack.Sequence
}

// waitFor polls cond until it holds, failing after 30s.
func (e *natsEnv) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}

func (e *natsEnv) timelineIDs(user string) []uuid.UUID {
	e.t.Helper()
	p, err := e.tl.Timeline(context.Background(), reader.TimelineQuery{User: user, Limit: 100})
	if err != nil {
		e.t.Fatal(err)
	}
	var ids []uuid.UUID
	for _, post := range p.Posts {
		ids = append(ids, post.ID)
	}
	return ids
}

// TestWorkerOverJetStream publishes the seed graph and posts without ids
// (and an event of another type, and a body the writer rejects) over
// real NATS: the worker's timelines hold exactly the writer's stored
// events, under the ids the writer derived, newest first; a restarted
// worker applies nothing twice.
func TestWorkerOverJetStream(t *testing.T) {
	e := newNATSEnv(t)
	base := time.Now().Add(-time.Minute).UTC()
	at := func(i int) string { return base.Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano) }
	e.publish("follow", `{"time":"`+at(0)+`","user":"gmason","author":"phenry"}`)
	e.publish("follow", `{"time":"`+at(1)+`","user":"gmason","author":"gwashington"}`)
	e.publish("follow", `{"time":"`+at(2)+`","user":"ahamilton","author":"jadams"}`)
	e.publish("follow", `{"time":"`+at(3)+`","user":"ahamilton","author":"gwashington"}`)
	e.publish("click", `{"time":"`+at(4)+`","user":"gmason"}`)
	e.publish("post", `{"time":"`+at(5)+`","author":"phenry","data":{"text":"give me liberty"}}`)
	e.publish("post", `{"time":"`+at(6)+`","author":"gwashington","data":{"text":"first in war"}}`)
	e.publish("post", `not json`)
	e.publish("post", `{"time":"`+at(7)+`","author":"jadams","data":{"text":"facts are stubborn"}}`)
	last := e.publish("post", `{"time":"`+at(8)+`","author":"gwashington","data":{"text":"first in peace"}}`)
	e.waitFor("the worker's checkpoint", func() bool { return e.w.LastAppliedSeq() >= last })
	e.waitFor("the fan-out", func() bool { return len(e.timelineIDs("gmason")) == 3 && len(e.timelineIDs("ahamilton")) == 3 })

	// The stored posts, newest first, by author.
	stored := map[string][]uuid.UUID{}
	e.waitFor("the writer", func() bool {
		p, err := e.events.Events(context.Background(), reader.EventQuery{Type: "post", From: base.Add(-time.Hour), To: base.Add(time.Hour), Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Events) != 4 {
			return false
		}
		clear(stored)
		for _, ev := range p.Events {
			stored[ev.Author] = append(stored[ev.Author], ev.ID)
		}
		return true
	})
	want := map[string][]uuid.UUID{
		// Newest first: gwashington's second post, then phenry's, then gwashington's first.
		"gmason":    {stored["gwashington"][0], stored["gwashington"][1], stored["phenry"][0]},
		"ahamilton": {stored["gwashington"][0], stored["jadams"][0], stored["gwashington"][1]},
	}
	check := func() {
		t.Helper()
		for user, ids := range want {
			if got := e.timelineIDs(user); fmt.Sprint(got) != fmt.Sprint(ids) {
				t.Errorf("timeline of %s = %v, want the stored ids %v", user, got, ids)
			}
		}
	}
	check()
	if got := counterValue(t, e.reg, "eventide_fanout_skipped_total", SkipRejectedPrefix+"malformed_json"); got != 1 {
		t.Errorf("skips of the rejected body = %v, want 1", got)
	}

	// A restart redelivers nothing the checkpoint covers: the same
	// timelines, no row written again.
	e.stop()
	e.startWorker()
	last = e.publish("post", `{"time":"`+at(9)+`","author":"phenry","data":{"text":"caesar had his brutus"}}`)
	e.waitFor("the restarted worker", func() bool { return e.w.LastAppliedSeq() >= last && len(e.timelineIDs("gmason")) == 4 })
	if got := counterValue(t, e.reg, "eventide_fanout_timeline_rows_written_total", ""); got != 1 {
		t.Errorf("the restarted worker wrote %v timeline rows, want 1 (the new post's)", got)
	}
	want["gmason"] = append([]uuid.UUID{e.timelineIDs("gmason")[0]}, want["gmason"]...)
	check()
}

// counterValue is the value of a counter (with reason label, if not
// empty) in reg; 0 if absent.
func counterValue(t testing.TB, reg *prometheus.Registry, name, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := reason == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					match = true
				}
			}
			if match {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
