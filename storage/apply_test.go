package storage

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestApplyStalledHonoursContext: a write stalled behind compaction returns
// once its context is cancelled, with an error wrapping context.Canceled,
// having written nothing; a stalled write with no deadline returns when
// the DB closes, so neither delays shutdown.
func TestApplyStalledHonoursContext(t *testing.T) {
	opts := DefaultOptions()
	opts.StallSSTablesPerTable = 2
	opts.DisableAutoCompaction = true
	db, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateTable(TableDef{Name: "t"}); err != nil {
		t.Fatal(err)
	}
	put := func(ck string) *Batch {
		var b Batch
		b.Put("t", []byte("p"), []byte(ck), []byte("x"), []byte("v"), 1)
		return &b
	}
	for _, ck := range []string{"a", "b"} {
		if err := db.Apply(context.Background(), put(ck)); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// Two SSTables, compaction off: every write now stalls.
	waitStalls := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for db.Metrics().WriteStalls < n {
			if time.Now().After(deadline) {
				t.Fatalf("no write stalled (%d stalls)", db.Metrics().WriteStalls)
			}
			time.Sleep(time.Millisecond)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- db.Apply(ctx, put("c")) }()
	waitStalls(1)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled stalled Apply returned %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stalled Apply did not return after its context was cancelled")
	}
	if rows, _ := readAll(t, db, SliceQuery{Table: "t", Partition: []byte("p")}); len(rows) != 2 {
		t.Fatalf("after the cancelled write the partition has %d rows, want 2:\n%s", len(rows), rowsString(rows))
	}

	// An expired deadline before any wait also fails at once.
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	if err := db.Apply(expired, put("d")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Apply with an expired deadline: %v, want context.DeadlineExceeded", err)
	}

	go func() { done <- db.Apply(context.Background(), put("e")) }()
	waitStalls(2)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("stalled Apply during Close returned %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stalled Apply did not return when the DB closed")
	}
}
