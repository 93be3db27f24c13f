package catalog

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/storage"
)

// fixedClock is an engine clock that stays at one instant, so every
// flush of a test lands in the same time window.
type fixedClock struct{ at time.Time }

func (c fixedClock) Now() time.Time { return c.at }

// TestEventsActiveWindowMergesAtThreshold: flushes of events written in
// the active window are merged only once EventsActiveWindowMinThreshold
// of them are there, in one compaction of them all. With storage's
// default threshold (four) the same flushes are merged twice as they
// come (flushes 1-4, then that output with 5-7), and the eighth stays
// beside the result.
func TestEventsActiveWindowMergesAtThreshold(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 20, 0, 0, time.UTC)
	opts := storage.DefaultOptions()
	opts.Clock = fixedClock{now}
	db, err := storage.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := EnsureBuiltinTables(db); err != nil {
		t.Fatal(err)
	}
	events := func() storage.TableMetrics {
		for _, tm := range db.Metrics().Tables {
			if tm.Name == schema.EventsTable {
				return tm
			}
		}
		t.Fatalf("no metrics for table %s", schema.EventsTable)
		return storage.TableMetrics{}
	}
	var r EventRowBuilder
	n := 0
	for flush := 1; flush <= EventsActiveWindowMinThreshold; flush++ {
		b := &storage.Batch{}
		for range 200 {
			n++
			id, err := bucket.NewTimeUUID(now.Add(-time.Duration(n)*time.Millisecond), [8]byte{2: byte(n), 3: byte(n >> 8)})
			if err != nil {
				t.Fatal(err)
			}
			e := schema.Event{ID: id, Type: fmt.Sprintf("t%d", n%5), User: "u", Data: []byte(`{"k":1}`)}
			if err := r.Put(b, &e, 0, 3600, now.UnixMicro()); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Apply(context.Background(), b); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		if flush < EventsActiveWindowMinThreshold {
			if m, tm := db.Metrics(), events(); m.Compactions != 0 || tm.SSTables != flush {
				t.Fatalf("after %d flushes: %d compactions, events table holds %d SSTables; want none and %d", flush, m.Compactions, tm.SSTables, flush)
			}
		}
	}
	// The last flush makes EventsActiveWindowMinThreshold SSTables: one
	// compaction merges them into one.
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, tm := db.Metrics(), events()
		if m.Compactions > 1 {
			t.Fatalf("%d compactions of %d flushes in one window; want 1", m.Compactions, EventsActiveWindowMinThreshold)
		}
		if m.Compactions == 1 && tm.Compacting == 0 && tm.SSTables == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %d compactions, events table holds %d SSTables (%d compacting); want 1 of 1", m.Compactions, tm.SSTables, tm.Compacting)
		}
		time.Sleep(5 * time.Millisecond) // polling the engine's background compaction, with a deadline
	}
}
