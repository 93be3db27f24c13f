package writer

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/eventide/eventide/storage"
)

// TestStorageOlderThanConsumer: the storage directory is replaced by a
// copy taken earlier while NATS keeps the consumer, whose ack floor is now
// past the checkpoint. With limits retention the stream still holds the
// messages: they are redelivered and everything is stored exactly once.
func TestStorageOlderThanConsumer(t *testing.T) {
	s := startNATS(t, t.TempDir(), -1)
	nc := connect(t, s.ClientURL())
	types := testTypes(t)
	js := jsFor(t, nc)
	rng := newRand(t)
	evs := genEvents(rng, 0, 400, testEventTypes, time.Now().Add(-2*time.Hour), 110*time.Minute)

	dir := t.TempDir()
	db, err := storage.Open(dir, storage.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	w := newWriter(t, nc, db, Config{Types: types})
	r := runWriter(t, w)
	if err := publishAll(context.Background(), js, evs[:150]); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, w, js, DefaultStream, 20*time.Second)
	r.stop(t)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	old := t.TempDir() + "/old"
	if err := os.CopyFS(old, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if db, err = storage.Open(dir, storage.DefaultOptions()); err != nil {
		t.Fatal(err)
	}
	w = newWriter(t, nc, db, Config{Types: types})
	r = runWriter(t, w)
	if err := publishAll(context.Background(), js, evs[150:]); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, w, js, DefaultStream, 20*time.Second)
	r.stop(t)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if floor := consumerAckFloor(t, js, DefaultStream, DefaultConsumer); floor != uint64(len(evs)) {
		t.Fatalf("ack floor %d, want %d", floor, len(evs))
	}

	// The older copy: checkpoint 150, ack floor 400.
	db = openDB(t, old)
	w = newWriter(t, nc, db, Config{Types: types})
	r = runWriter(t, w)
	waitApplied(t, w, js, DefaultStream, 20*time.Second)
	if err := w.Health(); err != nil {
		t.Errorf("Health() = %v, want nil: every message was still in the stream", err)
	}
	r.stop(t)
	checkStoredExactlyOnce(t, db, types, evs)
	if n := testutil.ToFloat64(w.m.consumer.AckedUnstored); n != 0 {
		t.Errorf("acked-unstored messages = %v, want 0", n)
	}
}

// TestStorageOlderThanConsumerWorkQueue: as above with work-queue
// retention, where acked messages are gone from the stream: the lost
// range is counted and Health fails naming it; the writer goes on storing
// new messages.
func TestStorageOlderThanConsumerWorkQueue(t *testing.T) {
	s := startNATS(t, t.TempDir(), -1)
	nc := connect(t, s.ClientURL())
	types := testTypes(t)
	js := jsFor(t, nc)
	rng := newRand(t)
	evs := genEvents(rng, 0, 200, testEventTypes, time.Now().Add(-2*time.Hour), 110*time.Minute)
	cfg := Config{Types: types, Retention: "workqueue"}

	db1, err := storage.Open(t.TempDir(), storage.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	w := newWriter(t, nc, db1, cfg)
	r := runWriter(t, w)
	if err := publishAll(context.Background(), js, evs[:120]); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, w, js, DefaultStream, 20*time.Second)
	r.stop(t)
	db1.Close()
	waitFor(t, 10*time.Second, func() bool { return consumerAckFloor(t, js, DefaultStream, DefaultConsumer) == 120 },
		func() string { return "the consumer's ack floor did not reach 120" })

	// A fresh storage directory: checkpoint 0, ack floor 120, and the
	// work queue has removed 1-120.
	db := openDB(t, t.TempDir())
	w = newWriter(t, nc, db, cfg)
	r = runWriter(t, w)
	waitFor(t, 20*time.Second, func() bool { return w.Health() != nil && errors.Is(w.Health(), ErrAckedNotStored) },
		func() string { return "Health() = " + errString(w.Health()) })
	if err := w.Health(); !strings.Contains(err.Error(), "1-120") {
		t.Errorf("Health() = %v, want the range 1-120", err)
	}
	if n := testutil.ToFloat64(w.m.consumer.AckedUnstored); n != 120 {
		t.Errorf("acked-unstored messages = %v, want 120", n)
	}
	if err := publishAll(context.Background(), js, evs[120:]); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, w, js, DefaultStream, 20*time.Second)
	r.stop(t)
	checkStoredExactlyOnce(t, db, types, evs[120:])
	if n := testutil.ToFloat64(w.m.consumer.AckedUnstored); n != 120 {
		t.Errorf("acked-unstored messages = %v after more repositions, want still 120", n)
	}
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
