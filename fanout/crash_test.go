package fanout

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// followMany makes n users follow author, 500 follows per batch.
func (e *env) followMany(author string, n int) {
	e.t.Helper()
	var batch []Message
	for i := 0; i < n; i++ {
		batch = append(batch, e.follow(fmt.Sprintf("f%06d", i), author))
		if len(batch) == 500 || i == n-1 {
			e.apply(batch...)
			batch = nil
		}
	}
}

// TestStopMidJobAndResume stops the worker pool in the middle of a
// 2,000-follower fan-out (20 chunks), closes and reopens the store, and
// resumes: every follower ends with the post exactly once, and the chunks
// written twice are at most the ones that were in flight. (The SIGKILL
// variant over JetStream waits for the shared consumer seam.)
func TestStopMidJobAndResume(t *testing.T) {
	o := DefaultOptions()
	o.ChunkSize = 100
	o.Workers = 2
	const followers = 2000
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Run asks WriterBusy before it starts more chunks, after each one
	// ends: the hook stops it there once a quarter of the rows are
	// written. (Polling the metric from the test raced with chunks that
	// no longer wait for an fsync: the whole job could end in one poll.)
	var e *env
	o.WriterBusy = func() bool {
		if e != nil && e.f != nil && e.counter("eventide_fanout_timeline_rows_written_total") >= followers/4 {
			cancel()
		}
		return false
	}
	e = newEnv(t, o)
	e.followMany("star", followers)
	e.apply(e.post("star", "p", "hello"))

	done := make(chan error, 1)
	go func() { done <- e.f.Run(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not stop within 60s")
	}
	o.WriterBusy = nil
	e.opts.WriterBusy = nil
	first := e.counter("eventide_fanout_timeline_rows_written_total")
	if first >= followers {
		t.Fatalf("the job finished (%v rows) before the stop; the test needs a stop in its middle", first)
	}
	e.reopen()
	e.work()
	second := e.counter("eventide_fanout_timeline_rows_written_total")
	if total := first + second; total < followers || total > followers+float64(o.Workers*o.ChunkSize) {
		t.Errorf("rows written %v before the stop + %v after = %v; want %d plus at most the %d chunks in flight",
			first, second, total, followers, o.Workers)
	}
	for i := 0; i < followers; i++ {
		u := fmt.Sprintf("f%06d", i)
		if n := e.rawTimelineRows(u); n != 1 {
			t.Fatalf("%s stores %d rows, want 1", u, n)
		}
	}
	e.wantTimeline("f000000", "p")
	e.wantTimeline(fmt.Sprintf("f%06d", followers-1), "p")
	if refs, err := e.f.PendingChunks(context.Background(), 10); err != nil || len(refs) != 0 {
		t.Errorf("pending chunks after the resume: %v %v", refs, err)
	}
}
