package fanout

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/eventide/eventide/reader"
	"github.com/eventide/eventide/storage"
	"github.com/eventide/eventide/storage/vfs"
)

const (
	trimChecksMetric = "eventide_fanout_trim_checks_total"
	trimsMetric      = "eventide_fanout_trims_total"
)

// trimEnv is one follower u of author a, with posts pushed one at a time.
type trimEnv struct {
	*env
	want []string // labels of every post, newest first
}

func newTrimEnv(t *testing.T, o Options, e *env) *trimEnv {
	t.Helper()
	if e == nil {
		e = newEnv(t, o)
	}
	e.apply(e.follow("u", "a"))
	return &trimEnv{env: e}
}

// push posts one post of a and works its chunk.
func (te *trimEnv) push() {
	te.t.Helper()
	l := fmt.Sprintf("p%04d", len(te.want))
	te.apply(te.post("a", l, l))
	te.want = append([]string{l}, te.want...)
	te.work()
}

// checkNewest fails unless u's timeline shows exactly the newest of the
// posts, as many as it stores up to the cap: trims only ever cut the
// oldest, and reads never show more than the cap. It returns the rows
// stored.
func (te *trimEnv) checkNewest() int {
	te.t.Helper()
	n := te.rawTimelineRows("u")
	shown := min(n, te.opts.TimelineCap)
	got := te.timelineLabels("u", 7)
	if len(got) != shown || !slices.Equal(got, te.want[:min(shown, len(te.want))]) {
		te.t.Fatalf("timeline of u (%d rows stored, cap %d) shows %v, want the newest %d of %v", n, te.opts.TimelineCap, got, shown, te.want)
	}
	return n
}

// TestReadsShowTheCap: between two amortized trims a timeline stores up
// to TrimEvery rows past its cap, and a read never shows them: with the
// default TrimEvery (200) and a cap of 10, 25 posts leave 25 rows stored
// and a read across pages shows the newest 10. The length table tracks
// u's empty timeline from the start: an untracked one would start from a
// bound spread by a hash of user and post id (untrackedStart), and be
// trimmed within 25 posts in about one run in eight, as the test was
// before it did so.
func TestReadsShowTheCap(t *testing.T) {
	if c := DefaultOptions().TimelineCap; c != reader.DefaultTimelineCap {
		t.Fatalf("the fan-out's default cap %d is not the reader's %d", c, reader.DefaultTimelineCap)
	}
	o := DefaultOptions()
	o.TimelineCap = 10
	te := newTrimEnv(t, o, nil)
	te.f.lengths.set(xxhash.Sum64String("u"), 0)
	for range 25 {
		te.push()
	}
	if n := te.rawTimelineRows("u"); n != 25 {
		t.Fatalf("timeline stores %d rows; want 25 (no trim before cap plus TrimEvery)", n)
	}
	if n := te.checkNewest(); n != 25 {
		t.Fatalf("timeline stores %d rows after the read; want 25", n)
	}
}

// TestTrimOneRangeTombstone: a timeline pushed far past its cap is cut
// back to it by one range tombstone at a time, and once the fan-out
// tracks it (its first check) it never holds TrimEvery rows past the cap;
// reads show its newest entries.
func TestTrimOneRangeTombstone(t *testing.T) {
	o := DefaultOptions()
	o.TimelineCap = 10
	o.TrimEvery = 4
	te := newTrimEnv(t, o, nil)
	for i := 0; i < 100; i++ {
		te.push()
		n := te.checkNewest()
		if te.counter(trimChecksMetric) > 0 && n >= o.TimelineCap+o.TrimEvery {
			t.Fatalf("after post %d the timeline holds %d rows; want fewer than the cap %d plus TrimEvery %d", i, n, o.TimelineCap, o.TrimEvery)
		}
	}
	if n := te.rawTimelineRows("u"); n < o.TimelineCap {
		t.Errorf("timeline holds %d rows, fewer than the cap %d", n, o.TimelineCap)
	}
	checks, trims := te.counter(trimChecksMetric), te.counter(trimsMetric)
	// 100 posts: the first check within 14, then a cut every 4.
	if trims < (100-14)/4 || checks > 1+(100-10)/4 {
		t.Errorf("%v trim checks and %v trims for 100 posts, cap 10, TrimEvery 4", checks, trims)
	}
}

// TestTrimChecksAmortized: a tracked timeline below its cap is not read
// again until it may have passed the cap by TrimEvery, and a full one
// once per TrimEvery posts: the checks a timeline costs do not grow with
// the posts pushed to it while it fills. (Before the length table every
// one in TrimEvery copies read the timeline: about 26 checks here.)
func TestTrimChecksAmortized(t *testing.T) {
	o := DefaultOptions()
	o.TimelineCap = 100
	o.TrimEvery = 5
	te := newTrimEnv(t, o, nil)
	for i := 0; i < 100; i++ {
		te.push()
	}
	if c := te.counter(trimChecksMetric); c > 1 {
		t.Errorf("%v trim checks while 100 posts filled a timeline of cap 100; want at most the one that started tracking it", c)
	}
	for i := 0; i < 30; i++ {
		te.push()
		if n := te.checkNewest(); n >= o.TimelineCap+o.TrimEvery {
			t.Fatalf("timeline holds %d rows; want fewer than %d", n, o.TimelineCap+o.TrimEvery)
		}
	}
	// The first check (within 105 copies), the one at 105 copies, then
	// one in 5.
	if c := te.counter(trimChecksMetric); c > 2+(130-105)/5 {
		t.Errorf("%v trim checks for 130 posts (cap 100, TrimEvery 5); want at most %d", c, 2+(130-105)/5)
	}
	if te.counter(trimsMetric) < 30/5 {
		t.Errorf("%v trims for 30 posts past the cap, TrimEvery 5", te.counter(trimsMetric))
	}
}

// TestTrimAfterCrash: the length table is memory only, so a crash
// between rows pushed past the cap and the trim that cuts them, or one
// that loses the chunk that trimmed (a power loss: chunk batches do not
// wait for their fsync), is harmless: the redone chunks and later posts
// show the newest entries, and the timeline is cut back to the cap again.
func TestTrimAfterCrash(t *testing.T) {
	o := DefaultOptions()
	o.TimelineCap = 10
	o.TrimEvery = 4
	for _, lose := range []string{"rows past the cap", "the chunk that trimmed"} {
		t.Run(lose, func(t *testing.T) {
			m := vfs.NewCrashableMem()
			te := newTrimEnv(t, o, newEnvStorage(t, o, memStorage(m)))
			for steps := 0; ; steps++ {
				if steps > 400 {
					t.Fatal("no state to crash in after 400 posts")
				}
				trims := te.counter(trimsMetric)
				te.push()
				n := te.checkNewest()
				if lose == "rows past the cap" && te.counter(trimChecksMetric) > 0 && n > o.TimelineCap {
					break
				}
				if lose == "the chunk that trimmed" && te.counter(trimsMetric) > trims {
					break
				}
			}
			// The post's batch was synced, its chunk was not: the power
			// loss takes the chunk (and any trim in it) and the table.
			te.powerLoss(m, nil)
			if n := te.work(); n == 0 {
				t.Fatal("no chunk to redo after the power loss")
			}
			n := te.checkNewest()
			if n < o.TimelineCap {
				t.Fatalf("after the crash the timeline holds %d rows, fewer than the cap", n)
			}
			for i := 0; i < 60; i++ {
				te.push()
				te.checkNewest()
			}
			if n := te.checkNewest(); n < o.TimelineCap || n >= o.TimelineCap+o.TrimEvery {
				t.Errorf("60 posts after the crash the timeline holds %d rows; want the cap %d to %d", n, o.TimelineCap, o.TimelineCap+o.TrimEvery-1)
			}
			if te.counter(trimsMetric) == 0 {
				t.Error("no trim after the crash")
			}
		})
	}
}

// TestTrimAfterBackfill: a follow's backfill can put more rows than the
// cap into a timeline the length table does not track; the next copy
// pushed to it checks it and cuts it back.
func TestTrimAfterBackfill(t *testing.T) {
	o := DefaultOptions()
	o.TimelineCap = 5
	o.TrimEvery = 50
	o.Backfill = 20
	e := newEnv(t, o)
	var want []string
	for i := 0; i < 20; i++ {
		l := fmt.Sprintf("p%02d", i)
		e.apply(e.post("a", l, l))
		want = append([]string{l}, want...)
	}
	e.apply(e.follow("u", "a"))
	if n := e.rawTimelineRows("u"); n != 20 {
		t.Fatalf("the follow backfilled %d rows, want 20", n)
	}
	e.apply(e.post("a", "new", "new"))
	e.work()
	want = append([]string{"new"}, want...)
	if got := e.timelineLabels("u", 3); !slices.Equal(got, want[:o.TimelineCap]) {
		t.Errorf("after the next post the timeline shows %v, want the newest %d: %v", got, o.TimelineCap, want[:o.TimelineCap])
	}
}

// TestTrimUntrackedTimelines: timelines the length table cannot hold (a
// table of 2 slots for 6 followers, which evict each other at every
// post) are still cut back, by the checks of untracked timelines (one in
// TimelineCap+TrimEvery = 14 of their copies).
func TestTrimUntrackedTimelines(t *testing.T) {
	o := DefaultOptions()
	o.TimelineCap = 10
	o.TrimEvery = 4
	o.TrimTracked = 2
	e := newEnv(t, o)
	users := []string{"u0", "u1", "u2", "u3", "u4", "u5"}
	for _, u := range users {
		e.apply(e.follow(u, "a"))
	}
	var want []string
	for i := 0; i < 300; i++ {
		l := fmt.Sprintf("p%04d", i)
		e.apply(e.post("a", l, l))
		want = append([]string{l}, want...)
		e.work()
	}
	for _, u := range users {
		n := e.rawTimelineRows(u)
		// Untracked, a timeline is checked at about one in 14 posts:
		// none in the 290 past the cap has a chance of 5e-10.
		if n < o.TimelineCap || n >= 300 {
			t.Errorf("%s holds %d rows; want it cut back to the cap %d at least once", u, n, o.TimelineCap)
		}
		if got := e.timelineLabels(u, 9); !slices.Equal(got, want[:min(n, o.TimelineCap)]) {
			t.Errorf("%s shows %v, want the newest %d", u, got, min(n, o.TimelineCap))
		}
	}
}

// TestDiscardedChunkForgetsChecks: a chunk that checked timelines and is
// then dropped unapplied (a read-ahead chunk whose part moved on) must
// not leave the length table believing in trims that never happened.
func TestDiscardedChunkForgetsChecks(t *testing.T) {
	o := DefaultOptions()
	o.TimelineCap = 10
	o.TrimEvery = 4
	e := newEnv(t, o)
	e.apply(e.follow("u", "a"))
	e.apply(e.post("a", "p", "p"))
	refs, err := e.f.PendingChunks(context.Background(), 1)
	if err != nil || len(refs) != 1 {
		t.Fatalf("pending %v %v", refs, err)
	}
	// The table bounds u one copy short of a check: the chunk checks it
	// (one row: the bound becomes 1).
	h := xxhash.Sum64String("u")
	e.f.lengths.set(h, uint32(o.TimelineCap+o.TrimEvery-1))
	pc, err := e.f.prepareChunk(context.Background(), refs[0])
	if err != nil {
		t.Fatal(err)
	}
	if b, known := e.f.lengths.add(h, 0); !known || b != 1 || e.counter(trimChecksMetric) != 1 {
		t.Fatalf("after the chunk's check the table bounds u at %d (known %v; want 1), %v checks", b, known, e.counter(trimChecksMetric))
	}
	e.f.discardChunk(pc)
	if b, known := e.f.lengths.add(h, 0); known {
		t.Errorf("after the chunk was discarded the table still bounds u at %d", b)
	}
}

func TestLengths(t *testing.T) {
	l := newLengths(4) // two buckets of two
	h := func(bucket, tag uint64) uint64 { return tag<<32 | bucket }
	if _, known := l.add(h(0, 1), 1); known {
		t.Fatal("empty table knows a timeline")
	}
	l.set(h(0, 1), 10)
	if b, known := l.add(h(0, 1), 3); !known || b != 13 {
		t.Fatalf("add after set: %d %v, want 13", b, known)
	}
	if _, known := l.add(h(1, 1), 1); known {
		t.Fatal("a timeline of another bucket with the same tag is known")
	}
	l.set(h(0, 2), 5)
	if b, _ := l.add(h(0, 1), 0); b != 13 {
		t.Fatalf("the bucket's second timeline changed the first: %d", b)
	}
	l.set(h(0, 3), 7) // the bucket is full: evicts one
	known := 0
	for _, tag := range []uint64{1, 2, 3} {
		if _, ok := l.add(h(0, tag), 0); ok {
			known++
		}
	}
	if b, ok := l.add(h(0, 3), 0); known != 2 || !ok || b != 7 {
		t.Fatalf("after an eviction %d of 3 known (want 2), the newest %d %v", known, b, ok)
	}
	l.forget(h(0, 3))
	if _, ok := l.add(h(0, 3), 0); ok {
		t.Fatal("forgotten timeline still known")
	}
	l.set(h(1, 0), maxLength) // tag 0 is stored as 1
	if b, ok := l.add(h(1, 0), 5); !ok || b != maxLength {
		t.Fatalf("bound past the maximum: %d %v", b, ok)
	}
}

// TestTrimBoundFromSSTables: the trim's cut is at the last row its slice
// read, a key that must be copied before the slice ends, since ending it
// releases the SSTable blocks the key lives in. The store here overwrites
// released blocks (storage.Options.PoisonReleasedBlocks) and keeps none
// cached, so a cut taken from the released key lands at 0xdb bytes instead
// of the cap; the timeline is flushed before each post so the trims read
// it from SSTables.
func TestTrimBoundFromSSTables(t *testing.T) {
	o := DefaultOptions()
	o.TimelineCap = 10
	o.TrimEvery = 4
	e := newEnvStorage(t, o, func(so *storage.Options) {
		so.BlockCacheSize = 1
		so.PoisonReleasedBlocks = true
	})
	te := newTrimEnv(t, o, e)
	for i := 0; i < 40; i++ {
		if err := te.db.Flush(); err != nil {
			t.Fatal(err)
		}
		te.push()
		if n := te.checkNewest(); te.counter(trimsMetric) > 0 && n < o.TimelineCap {
			t.Fatalf("after post %d and %v trims the timeline holds %d rows, fewer than the cap %d", i, te.counter(trimsMetric), n, o.TimelineCap)
		}
	}
	if te.counter(trimsMetric) == 0 {
		t.Fatal("no trim ran: the test checks nothing")
	}
}
