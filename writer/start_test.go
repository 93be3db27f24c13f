package writer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// TestNoJetStream: a server without JetStream gets an error that says to
// enable it, not "no responders".
func TestNoJetStream(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server is not ready")
	}
	nc := connect(t, s.ClientURL())
	_, err = New(context.Background(), nc, openDB(t, t.TempDir()), Config{Logger: testLogger()})
	if !errors.Is(err, ErrNoJetStream) || !strings.Contains(err.Error(), "-js") {
		t.Fatalf("New without JetStream: err = %v, want ErrNoJetStream saying to enable it (-js)", err)
	}
}

// TestReplicasOnSingleServer: more than one replica on a server that is
// not clustered is a checkable configuration error, and leaves no stream.
func TestReplicasOnSingleServer(t *testing.T) {
	s := startNATS(t, t.TempDir(), -1)
	nc := connect(t, s.ClientURL())
	_, err := New(context.Background(), nc, openDB(t, t.TempDir()), Config{Logger: testLogger(), Replicas: 3})
	if !errors.Is(err, ErrReplicasUnsupported) || !strings.Contains(err.Error(), "--replicas 3") {
		t.Fatalf("New with 3 replicas on one server: err = %v, want ErrReplicasUnsupported naming --replicas 3", err)
	}
	if _, err := jsFor(t, nc).Stream(context.Background(), DefaultStream); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream %s after the failed start: err = %v, want not found", DefaultStream, err)
	}
}

// TestFailedStartRemovesStream: when the dead-letter stream cannot be
// created (its subjects belong to another stream), the event stream this
// start created is deleted again; one that existed before is kept.
func TestFailedStartRemovesStream(t *testing.T) {
	s := startNATS(t, t.TempDir(), -1)
	nc := connect(t, s.ClientURL())
	js := jsFor(t, nc)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SQUATTER", Subjects: []string{DLQSubjects}}); err != nil {
		t.Fatal(err)
	}
	db := openDB(t, t.TempDir())
	if _, err := New(ctx, nc, db, Config{Logger: testLogger()}); err == nil || !strings.Contains(err.Error(), DefaultDLQStream) {
		t.Fatalf("New with the dead-letter subjects taken: err = %v, want an error naming %s", err, DefaultDLQStream)
	}
	if _, err := js.Stream(ctx, DefaultStream); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream %s after the failed start: err = %v, want not found", DefaultStream, err)
	}

	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: DefaultStream, Subjects: []string{DefaultSubject}}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(ctx, nc, db, Config{Logger: testLogger()}); err == nil {
		t.Fatal("New with the dead-letter subjects taken succeeded")
	}
	if _, err := js.Stream(ctx, DefaultStream); err != nil {
		t.Errorf("stream %s, which existed before the failed start: %v", DefaultStream, err)
	}
}

// TestTwoDeploymentsShareNATS runs two writers with their own streams on
// one NATS server: each one's rejects land in its own dead-letter stream.
func TestTwoDeploymentsShareNATS(t *testing.T) {
	s := startNATS(t, t.TempDir(), -1)
	nc := connect(t, s.ClientURL())
	js := jsFor(t, nc)
	ctx := context.Background()
	type deployment struct {
		cfg Config
		w   *runningWriter
	}
	var ds []deployment
	for _, name := range []string{"A", "B"} {
		cfg := Config{Stream: "EV_" + name, Subjects: []string{strings.ToLower(name) + ".events.>"},
			DLQStream: "EV_" + name + "_DLQ", Consumer: "writer-" + name}
		w := newWriter(t, nc, openDB(t, t.TempDir()), cfg)
		ds = append(ds, deployment{cfg, runWriter(t, w)})
	}
	for i, d := range ds {
		for range i + 1 {
			publishOne(t, js, strings.TrimSuffix(d.cfg.Subjects[0], ">")+"view", []byte(`{"data":{}}`))
		}
	}
	for i, d := range ds {
		waitApplied(t, d.w.Writer, js, d.cfg.Stream, 20*time.Second)
		d.w.stop(t)
		got := deadLettersBySeq(t, js, d.cfg.DLQStream)
		if len(got) != i+1 {
			t.Errorf("%s holds dead letters of sequences %v, want %d", d.cfg.DLQStream, got, i+1)
		}
		dlq, err := js.Stream(ctx, d.cfg.DLQStream)
		if err != nil {
			t.Fatal(err)
		}
		m, err := dlq.GetMsg(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if want := "dlq." + d.cfg.DLQStream + ".view"; m.Subject != want {
			t.Errorf("dead letter subject %s, want %s", m.Subject, want)
		}
	}
}

// TestAllowTypes: with AllowTypes only the listed types are stored; a type
// with its own settings must be on the list.
func TestAllowTypes(t *testing.T) {
	s := startNATS(t, t.TempDir(), -1)
	nc := connect(t, s.ClientURL())
	db := openDB(t, t.TempDir())
	types := testTypes(t) // has settings for hot and short
	if _, err := New(context.Background(), nc, db, Config{Types: types, AllowTypes: []string{"click"}, Logger: testLogger()}); err == nil ||
		!strings.Contains(err.Error(), "not in AllowTypes") {
		t.Fatalf("AllowTypes without a type that has settings: err = %v", err)
	}
	w := newWriter(t, nc, db, Config{Types: types, AllowTypes: []string{"click", "hot", "short"}})
	if types.AllowOnlyListed {
		t.Error("New changed the caller's EventTypes")
	}
	r := runWriter(t, w)
	js := jsFor(t, nc)
	evs := genEvents(newRand(t), 0, 20, []string{"click", "hot"}, time.Now().Add(-time.Hour), 30*time.Minute)
	if err := publishAll(context.Background(), js, evs); err != nil {
		t.Fatal(err)
	}
	seq := publishOne(t, js, "events.view", []byte(`{"time":1767268740000}`))
	waitApplied(t, w, js, DefaultStream, 20*time.Second)
	r.stop(t)
	checkStoredExactlyOnce(t, db, types, evs)
	if got := deadLettersBySeq(t, js, DefaultDLQStream); got[seq] != 1 || len(got) != 1 {
		t.Errorf("dead letters %v, want only the view event at %d", got, seq)
	}
}
