package reader

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

// fixedClock is a settable clock shared by the store and the reader.
type fixedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fixedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fixedClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

func openStore(t testing.TB, clock *fixedClock) *storage.DB {
	t.Helper()
	opts := storage.DefaultOptions()
	opts.Clock = clock
	opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, err := storage.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := catalog.EnsureBuiltinTables(db); err != nil {
		t.Fatal(err)
	}
	return db
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

func mustApply(t testing.TB, db *storage.DB, b *storage.Batch) {
	t.Helper()
	if err := db.Apply(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

// putEvents stores n events in db: event(i) gives the i-th's time and
// event (its ID is made here, from the time and i).
func putEvents(t testing.TB, db *storage.DB, n int, event func(i int) (time.Time, schema.Event)) {
	t.Helper()
	var batch storage.Batch
	for i := range n {
		at, e := event(i)
		id, err := bucket.NewTimeUUID(at, [8]byte{0x80, byte(i), byte(i >> 8), 3, 4, 5, 6, 7})
		if err != nil {
			t.Fatal(err)
		}
		e.ID = id
		if err := catalog.PutEvent(&batch, &e, 0, 0, at.UnixMicro()); err != nil {
			t.Fatal(err)
		}
	}
	mustApply(t, db, &batch)
}
