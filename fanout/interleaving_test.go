package fanout

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/eventide/eventide/storage"
)

func smallOptions() Options {
	o := DefaultOptions()
	o.ChunkSize = 1
	return o
}

func (e *env) wantTimeline(user string, want ...string) {
	e.t.Helper()
	got := e.timelineLabels(user, 2)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		e.t.Errorf("timeline of %s = %v, want %v", user, got, want)
	}
}

// workN works n chunks, oldest job first.
func (e *env) workN(n int) {
	e.t.Helper()
	for i := 0; i < n; i++ {
		refs, err := e.f.PendingChunks(context.Background(), 1)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(refs) == 0 {
			e.t.Fatalf("only %d of %d chunks pending", i, n)
		}
		if _, err := e.f.WorkChunk(context.Background(), refs[0]); err != nil {
			e.t.Fatal(err)
		}
	}
}

// TestDeleteBeforeFanoutFinished: a post_delete that arrives while the
// post's fan-out is half done hides the post at once, cancels the rest of
// its job and removes the copies already made.
func TestDeleteBeforeFanoutFinished(t *testing.T) {
	e := newEnv(t, smallOptions())
	for _, u := range []string{"f1", "f2", "f3", "f4"} {
		e.apply(e.follow(u, "a"))
	}
	e.apply(e.post("a", "p", "hello"))
	e.workN(2) // f1 and f2 have their copy
	if e.rawTimelineRows("f1") != 1 || e.rawTimelineRows("f3") != 0 {
		t.Fatalf("after 2 chunks: f1 %d rows, f3 %d rows", e.rawTimelineRows("f1"), e.rawTimelineRows("f3"))
	}
	e.apply(e.del("a", "p"))
	// Right at once, before any cleanup ran.
	for _, u := range []string{"f1", "f2", "f3", "f4"} {
		e.wantTimeline(u)
	}
	if e.rawTimelineRows("f1") != 1 {
		t.Fatal("test assumption: the copy is still stored until the delete job runs")
	}
	e.work()
	for _, u := range []string{"f1", "f2", "f3", "f4"} {
		if n := e.rawTimelineRows(u); n != 0 {
			t.Errorf("%s still stores %d copies after the delete job", u, n)
		}
		e.wantTimeline(u)
	}
}

// TestLateChunkAfterDelete: a chunk that read the job before the delete
// and writes after it (a chunk in flight) leaves no visible copy.
func TestLateChunkAfterDelete(t *testing.T) {
	e := newEnv(t, smallOptions())
	e.apply(e.follow("f1", "a"))
	post := e.post("a", "p", "hello")
	e.apply(post)
	del := e.del("a", "p")
	e.apply(del)
	e.work() // the delete job
	// The post's chunk lands now, at the post's position.
	var b storage.Batch
	e.f.putTimelineRow(&b, []byte("f1"), post.Event.ID, "a", post.Event.Data, WriteTimestamp(post.Pos))
	if err := e.db.Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if n := e.rawTimelineRows("f1"); n != 0 {
		t.Errorf("a late copy older than the delete is stored (%d rows): the delete's tombstone must shadow it", n)
	}
	e.wantTimeline("f1")
}

// TestFollowBetweenPostAndFanout: a follow that comes after a post but
// before its fan-out reached anyone gives exactly what applying the two
// in stream order gives: the post when the follow's backfill takes it,
// nothing when the backfill is already full of newer posts.
func TestFollowBetweenPostAndFanout(t *testing.T) {
	o := smallOptions()
	o.Backfill = 1
	e := newEnv(t, o)
	e.apply(e.follow("f1", "a"))
	e.apply(e.post("a", "p1", "one"), e.post("a", "p2", "two"))
	e.apply(e.follow("u", "a")) // backfill: p2 only
	e.wantTimeline("u", "p2")
	e.work()
	e.wantTimeline("u", "p2")
	e.wantTimeline("f1", "p2", "p1")
	if n := e.rawTimelineRows("u"); n != 1 {
		t.Errorf("u stores %d rows, want 1: the chunk of p1 must skip a follower who followed after p1", n)
	}
}

// TestUnfollowDuringFanout: an unfollow while a post is being pushed
// removes the copies made, stops the rest, and hides any a chunk in flight
// writes later; a refollow then gets the post back through its backfill.
func TestUnfollowDuringFanout(t *testing.T) {
	e := newEnv(t, smallOptions())
	for _, u := range []string{"f1", "f2", "f3"} {
		e.apply(e.follow(u, "a"))
	}
	post := e.post("a", "p", "hello")
	e.apply(post)
	e.workN(1) // f1 has it
	e.apply(e.unfollow("f1", "a"), e.unfollow("f3", "a"))
	e.wantTimeline("f1")
	e.wantTimeline("f3")
	if n := e.rawTimelineRows("f1"); n != 0 {
		t.Errorf("f1 still stores %d rows after its unfollow", n)
	}
	// A chunk that read f3 as a follower before the unfollow lands now.
	var b storage.Batch
	e.f.putTimelineRow(&b, []byte("f3"), post.Event.ID, "a", post.Event.Data, WriteTimestamp(post.Pos))
	if err := e.db.Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	e.wantTimeline("f3")
	e.work()
	e.wantTimeline("f2", "p")
	e.wantTimeline("f3")
	e.apply(e.follow("f3", "a"))
	e.wantTimeline("f3", "p")
	e.work()
	e.wantTimeline("f3", "p")
}

// TestReapplyChangesNothing: applying every message a second time, at the
// same positions, leaves every read as it was.
func TestReapplyChangesNothing(t *testing.T) {
	e := newEnv(t, DefaultOptions())
	msgs := []Message{
		e.follow("u1", "a"), e.follow("u2", "a"), e.follow("u1", "b"),
		e.post("a", "a1", "x"), e.post("b", "b1", "y"), e.unfollow("u2", "a"),
		e.post("a", "a2", "z"), e.del("b", "b1"), e.follow("u2", "a"),
	}
	for _, m := range msgs {
		e.apply(m)
	}
	e.work()
	snapshot := func() string {
		var s []string
		for _, u := range []string{"u1", "u2"} {
			s = append(s, fmt.Sprint(e.timelineLabels(u, 5)))
			p, err := e.tl.Following(context.Background(), u, 10, "")
			if err != nil {
				t.Fatal(err)
			}
			s = append(s, fmt.Sprint(p.Names))
		}
		for _, a := range []string{"a", "b"} {
			info, err := e.f.Author(context.Background(), a)
			if err != nil {
				t.Fatal(err)
			}
			s = append(s, fmt.Sprint(info))
		}
		return strings.Join(s, "; ")
	}
	before := snapshot()
	for _, m := range msgs {
		e.apply(m)
	}
	e.work()
	if after := snapshot(); after != before {
		t.Errorf("re-applying changed the state:\nbefore %s\nafter  %s", before, after)
	}
	if !slices.Equal(e.timelineLabels("u2", 5), []string{"a2", "a1"}) {
		t.Errorf("u2 = %v", e.timelineLabels("u2", 5))
	}
}

// TestUnfollowRefollowDuringFanout: a copy that a chunk in flight writes
// after an unfollow and a new follow of the same author is from the
// earlier follow period: stream order says the new follow's backfill
// decides, so the copy is hidden.
func TestUnfollowRefollowDuringFanout(t *testing.T) {
	o := smallOptions()
	o.Backfill = 1
	e := newEnv(t, o)
	e.apply(e.follow("f1", "a"))
	p1 := e.post("a", "p1", "one")
	e.apply(p1)
	e.apply(e.unfollow("f1", "a"), e.post("a", "p2", "two"), e.follow("f1", "a")) // backfill: p2
	var b storage.Batch
	e.f.putTimelineRow(&b, []byte("f1"), p1.Event.ID, "a", p1.Event.Data, WriteTimestamp(p1.Pos))
	if err := e.db.Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	e.wantTimeline("f1", "p2")
	e.work()
	e.wantTimeline("f1", "p2")
}

// TestPendingMetrics: the pending-chunk gauges follow the jobs, and a
// finished post's lag is observed.
func TestPendingMetrics(t *testing.T) {
	o := DefaultOptions()
	o.ChunkSize = 2
	o.Workers = 1 // one part per job: the chunk counts below are exact
	e := newEnv(t, o)
	var msgs []Message
	for _, u := range []string{"f1", "f2", "f3", "f4", "f5"} {
		msgs = append(msgs, e.follow(u, "a"))
	}
	msgs = append(msgs, e.follow("f1", "b"), e.post("a", "p", "x"), e.post("b", "q", "y"))
	e.apply(msgs...)
	if err := e.f.RefreshPendingMetrics(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := e.counter("eventide_fanout_pending_chunks"); got != 4 {
		t.Errorf("pending chunks %v, want 3 for a's 5 followers + 1 for b's", got)
	}
	if got := e.counter("eventide_fanout_largest_pending_followers"); got != 5 {
		t.Errorf("largest pending %v, want 5", got)
	}
	if n := e.work(); n != 4 {
		t.Errorf("worked %d chunks, want 4", n)
	}
	if _, err := e.f.PendingChunks(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	if got := e.counter("eventide_fanout_pending_chunks"); got != 0 {
		t.Errorf("pending chunks %v after the work, want 0", got)
	}
	if got := e.counter("eventide_fanout_timeline_rows_written_total"); got != 6 {
		t.Errorf("rows written %v, want 6", got)
	}
	mfs, _ := e.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "eventide_fanout_lag_seconds" {
			if c := mf.GetMetric()[0].GetHistogram().GetSampleCount(); c != 2 {
				t.Errorf("lag observed %d times, want 2", c)
			}
		}
	}
}

// TestShardCountChangeMidJob: a job split into 2 shards finishes as it was
// split when the fan-out restarts with 3.
func TestShardCountChangeMidJob(t *testing.T) {
	o := DefaultOptions()
	o.ChunkSize = 2
	o.Shards = 2
	e := newEnv(t, o)
	var users []string
	for i := 0; i < 20; i++ {
		users = append(users, fmt.Sprintf("u%02d", i))
	}
	var msgs []Message
	for _, u := range users {
		msgs = append(msgs, e.follow(u, "a"))
	}
	e.apply(msgs...)
	e.apply(e.post("a", "p", "x"))
	e.workN(1)
	e.opts.Shards = 3
	e.reopen()
	e.work()
	for _, u := range users {
		e.wantTimeline(u, "p")
	}
}

// TestPendingScanSkipsFinishedJobs: looking for pending chunks does not
// walk the row tombstones that finished jobs leave in the jobs partition.
func TestPendingScanSkipsFinishedJobs(t *testing.T) {
	e := newEnv(t, DefaultOptions())
	e.apply(e.follow("u", "a"))
	for i := 0; i < 200; i++ {
		e.apply(e.post("a", fmt.Sprintf("p%d", i), "x"))
		e.work()
	}
	e.apply(e.post("a", "last", "x"))
	before := e.db.Metrics().TombstonesRead
	refs, err := e.f.PendingChunks(context.Background(), 10)
	if err != nil || len(refs) != 1 {
		t.Fatalf("pending %v %v, want the last post's job", refs, err)
	}
	if n := e.db.Metrics().TombstonesRead - before; n > 10 {
		t.Errorf("listing pending chunks read %d tombstones; the 200 finished jobs' must be skipped", n)
	}
	e.work()
	if got := e.timelineLabels("u", 50); len(got) != 201 || got[0] != "last" || got[200] != "p0" {
		t.Errorf("timeline of u has %d posts (%v ... ), want 201 from last to p0", len(got), got[:min(3, len(got))])
	}
}

// TestDeleteRemovesBackfilledCopies: a post made before its author had
// followers is copied by a later follow's backfill; its delete must
// remove that copy from storage too, not only hide it.
func TestDeleteRemovesBackfilledCopies(t *testing.T) {
	e := newEnv(t, DefaultOptions())
	e.apply(e.post("a", "p", "x"))
	e.apply(e.follow("u", "a"))
	e.wantTimeline("u", "p")
	e.apply(e.del("a", "p"))
	e.wantTimeline("u")
	e.work()
	if n := e.rawTimelineRows("u"); n != 0 {
		t.Errorf("u still stores %d copies of the deleted post", n)
	}
}
