package storage

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eventide/eventide/storage/internal/memtable"
	"github.com/eventide/eventide/storage/internal/sstable"
)

// windowCodecs returns the compression of each SSTable of table.
func windowCodecs(db *DB, table string) []sstable.Compression {
	db.mu.Lock()
	defer db.mu.Unlock()
	var out []sstable.Compression
	for _, h := range db.current.sstables[db.tables[table].id] {
		out = append(out, h.props.Compression)
	}
	return out
}

func putWindowRows(t *testing.T, db *DB, table string, n int) {
	t.Helper()
	var b Batch
	for i := 0; i < n; i++ {
		b.Put(table, []byte("p"), []byte(fmt.Sprintf("ck%04d", i)), []byte("data"), fmt.Appendf(nil, `{"i":%d,"s":"some event payload"}`, i), db.NowMicros())
	}
	if err := db.Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
}

// TestIdleRewriteClosedWindow: a zstd time-window table's window that
// closes with one short-lived S2 SSTable (a single flush) is rewritten as
// zstd by the picker once the engine is idle, and only then: not while the
// window is active, not while a memtable waits for a flush or another
// compaction is due, and never for an s2 table or a window already zstd.
func TestIdleRewriteClosedWindow(t *testing.T) {
	db, clock, wall := openRewriteTestDB(t,
		TableDef{Name: "ev", Compaction: TimeWindow, WindowSeconds: 60},
		TableDef{Name: "fast", Compaction: TimeWindow, WindowSeconds: 60, Compression: "s2"})
	putWindowRows(t, db, "ev", 200)
	putWindowRows(t, db, "fast", 200)
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := windowCodecs(db, "ev"); len(got) != 1 || got[0] != sstable.CompressionS2 {
		t.Fatalf("after one flush the window holds %v, want one S2 SSTable", got)
	}
	pick := func() *compaction {
		db.mu.Lock()
		defer db.mu.Unlock()
		return db.pickCompactionLocked()
	}
	if c := pick(); c != nil {
		t.Fatalf("active window: picked %q, want nothing", c.reason)
	}

	// The window closes, and the writes have been quiet long enough.
	clock.Advance(2 * time.Minute)
	wall.Advance(rewriteQuietPeriod)
	// Busy: a frozen memtable waits for a flush, or a compaction runs.
	db.mu.Lock()
	db.current.imms = append(db.current.imms, &immMemtable{mem: memtable.New()})
	c := db.pickCompactionLocked()
	db.current.imms = db.current.imms[:len(db.current.imms)-1]
	db.compactions++
	c2 := db.pickCompactionLocked()
	db.compactions--
	db.mu.Unlock()
	if c != nil || c2 != nil {
		t.Fatalf("with a memtable waiting for a flush: picked %v; with a compaction running: %v; want nothing", c, c2)
	}
	c = pick()
	if c == nil || c.table.def.Name != "ev" || len(c.inputs) != 1 || c.intermediate {
		t.Fatalf("idle, window closed: picked %+v, want a long-lived rewrite of ev's one SSTable", c)
	}
	db.mu.Lock()
	db.startCompactionLocked(c)
	db.mu.Unlock()
	if err := db.runCompaction(c); err != nil {
		t.Fatal(err)
	}
	if got := windowCodecs(db, "ev"); len(got) != 1 || got[0] != sstable.CompressionZstd {
		t.Fatalf("after the rewrite the window holds %v, want one zstd SSTable", got)
	}
	if got := windowCodecs(db, "fast"); len(got) != 1 || got[0] != sstable.CompressionS2 {
		t.Fatalf("the s2 table holds %v, want its S2 SSTable untouched", got)
	}
	if c := pick(); c != nil {
		t.Fatalf("after the rewrite: picked %q for %s, want nothing", c.reason, c.table.def.Name)
	}
	rows, _ := readAll(t, db, SliceQuery{Table: "ev", Partition: []byte("p")})
	if len(rows) != 200 {
		t.Fatalf("after the rewrite the partition has %d rows, want 200", len(rows))
	}
}

// TestIdleRewriteInBackground: with automatic compaction on, a closed
// window's lone S2 SSTable reaches zstd without any write or manual
// compaction (the periodic picker, or here a flush of another table, finds
// the engine idle).
func TestIdleRewriteInBackground(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 11, 21, 12, 0, 30, 0, time.UTC)}
	opts := DefaultOptions()
	opts.Clock = clock
	db, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.CreateTable(TableDef{Name: "ev", Compaction: TimeWindow, WindowSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	putWindowRows(t, db, "ev", 200)
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Minute)
	db.maybeScheduleCompaction()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := windowCodecs(db, "ev")
		if len(got) == 1 && got[0] == sstable.CompressionZstd {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the closed window still holds %v, want one zstd SSTable", got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRewriteRateLimitedWhenBusy: an engine that always has a compaction
// due still rewrites a closed window's lone S2 SSTable, one every
// rewriteIntervalWhenBusy, ahead of the other work.
func TestRewriteRateLimitedWhenBusy(t *testing.T) {
	db, clock, wall := openRewriteTestDB(t, TableDef{Name: "ev", Compaction: TimeWindow, WindowSeconds: 60})
	// Window 1: one flush. Window 2: two flushes, a merge due for good
	// (nothing runs it here).
	putWindowRows(t, db, "ev", 100)
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	for range 2 {
		putWindowRows(t, db, "ev", 100)
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(2 * time.Minute) // both windows closed
	pick := func() *compaction {
		db.mu.Lock()
		defer db.mu.Unlock()
		return db.pickCompactionLocked()
	}
	isRewrite := func(c *compaction) bool { return c != nil && len(c.inputs) == 1 && !c.intermediate }
	if c := pick(); c == nil || isRewrite(c) {
		t.Fatalf("busy, just opened: picked %+v, want the merge of window 2", c)
	}
	// The interval is wall-clock time: the engine clock moving on does
	// not count (a replay moves it hours in seconds).
	clock.Advance(rewriteIntervalWhenBusy)
	if c := pick(); c == nil || isRewrite(c) {
		t.Fatalf("busy for %s of the engine clock only: picked %+v, want the merge of window 2", rewriteIntervalWhenBusy, c)
	}
	wall.Advance(rewriteIntervalWhenBusy)
	c := pick()
	if !isRewrite(c) || c.inputs[0].props.Compression != sstable.CompressionS2 {
		t.Fatalf("busy for %s: picked %+v, want the rewrite of window 1", rewriteIntervalWhenBusy, c)
	}
	if c := pick(); c == nil || isRewrite(c) {
		t.Fatalf("right after a rewrite: picked %+v, want the merge of window 2 again", c)
	}
}

// TestRewriteWaitsForQuietWrites: while batches keep arriving, a closed
// window's lone S2 SSTable is not rewritten, however far the engine clock
// runs ahead (a replay, or loadtest/peers' clock at each batch's event
// time, closes a window every few hundred milliseconds, and each rewrite
// used to take a core from the writer); once no batch has been applied for
// rewriteQuietPeriod of wall-clock time, it is.
func TestRewriteWaitsForQuietWrites(t *testing.T) {
	db, clock, wall := openRewriteTestDB(t, TableDef{Name: "ev", Compaction: TimeWindow, WindowSeconds: 60})
	pick := func() *compaction {
		db.mu.Lock()
		defer db.mu.Unlock()
		return db.pickCompactionLocked()
	}
	// A replay: each minute of the engine clock (one window) is one
	// flush, written within a few milliseconds of wall-clock time.
	for w := range 5 {
		putWindowRows(t, db, "ev", 100)
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Minute)
		wall.Advance(10 * time.Millisecond)
		if w > 0 {
			// The writes of the next window go on in the background.
			if c := pick(); c != nil {
				t.Fatalf("window %d closed during the writes: picked %q, want nothing", w, c.reason)
			}
		}
	}
	wall.Advance(rewriteQuietPeriod - 10*time.Millisecond - time.Nanosecond)
	if c := pick(); c != nil {
		t.Fatalf("writes quiet for just under %s: picked %q, want nothing", rewriteQuietPeriod, c.reason)
	}
	wall.Advance(time.Nanosecond)
	c := pick()
	if c == nil || len(c.inputs) != 1 || c.inputs[0].props.Compression != sstable.CompressionS2 || c.intermediate {
		t.Fatalf("writes quiet for %s: picked %+v, want the rewrite of a closed window", rewriteQuietPeriod, c)
	}
}

// openRewriteTestDB opens a store with tables defs, no automatic
// compaction, an engine clock in a window of 2026-11-21 and a scheduling
// (wall) clock of its own, both fake.
func openRewriteTestDB(t *testing.T, defs ...TableDef) (db *DB, clock, wall *fakeClock) {
	t.Helper()
	clock = &fakeClock{now: time.Date(2026, 11, 21, 12, 0, 30, 0, time.UTC)}
	wall = &fakeClock{now: time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)}
	db = openTestDBIn(t, t.TempDir(), clock, func(o *Options) { o.schedulingClock = wall }, defs...)
	return db, clock, wall
}
