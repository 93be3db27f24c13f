package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestCompactionPacerReserve drives the token bucket with explicit times:
// the burst passes at once, then each reservation waits for its bytes at
// the rate, behind the ones before it; idle time refills at most the
// burst; a clock going back refills nothing; a refund gives tokens back.
func TestCompactionPacerReserve(t *testing.T) {
	const mib = 1 << 20
	t0 := time.Unix(1_800_000_000, 0)
	p := newCompactionPacer(1*mib, 2*mib) // 1 MiB/s, 2 MiB burst
	steps := []struct {
		at   time.Duration // after t0
		n    int
		want time.Duration
	}{
		{0, 1 * mib, 0},                                // within the burst
		{0, 1 * mib, 0},                                // the burst is used up
		{0, mib / 2, 500 * time.Millisecond},           // half a second of the rate
		{0, mib / 2, time.Second},                      // queued behind the one before
		{time.Second, mib / 2, 500 * time.Millisecond}, // one second later: 1 MiB refilled, 0.5 MiB owed
		{60 * time.Second, 2 * mib, 0},                 // a minute idle refills the burst, no more
		{60 * time.Second, 1, time.Microsecond},        // (1 byte at 1 MiB/s ~ 0.95 µs)
		{30 * time.Second, 1 * mib, 1 * time.Second},   // the clock went back: nothing refilled
	}
	for i, s := range steps {
		got, _ := p.reserve(t0.Add(s.at), s.n)
		if d := got - s.want; d < -time.Microsecond || d > time.Microsecond {
			t.Fatalf("step %d: reserve(t0+%v, %d) waits %v, want %v", i, s.at, s.n, got, s.want)
		}
	}
	p.refund(1 * mib)
	if got, _ := p.reserve(t0.Add(60*time.Second), mib/2); got < 500*time.Millisecond-time.Microsecond || got > 500*time.Millisecond+2*time.Microsecond {
		t.Fatalf("after a refund of the last 1 MiB, reserving 0.5 MiB waits %v, want ~500ms", got)
	}
}

// TestCompactionPacerSpreadsAMerge simulates a merge of 21 MB written in
// the SSTable writer's 256 KiB chunks by a compaction that produces 40 MB
// per second of CPU (the all-in-one's second-tier merge), on a fake clock:
// unpaced it takes ~0.5 s; at 8 MiB/s its duration is set by the limit
// (what the burst does not cover, at the rate), and the share of the
// time it computes falls accordingly.
func TestCompactionPacerSpreadsAMerge(t *testing.T) {
	const (
		mergeBytes = 21_000_000
		chunk      = 256 << 10
		cpuRate    = 40_000_000.0 // bytes of output per CPU second
		limit      = 8 << 20
	)
	p := newCompactionPacer(limit, compactionBurstBytes)
	now := time.Unix(1_800_000_000, 0)
	start := now
	var cpu time.Duration
	for written := 0; written < mergeBytes; written += chunk {
		work := time.Duration(float64(chunk) / cpuRate * float64(time.Second))
		now = now.Add(work)
		cpu += work
		wait, _ := p.reserve(now, chunk)
		now = now.Add(wait)
	}
	took := now.Sub(start)
	want := time.Duration((mergeBytes - compactionBurstBytes) * int64(time.Second) / limit)
	if took < want-50*time.Millisecond || took > want+100*time.Millisecond {
		t.Fatalf("paced merge took %v, want about %v (what the burst does not cover at %d B/s)", took, want, limit)
	}
	if share := cpu.Seconds() / took.Seconds(); share > 0.3 {
		t.Fatalf("paced merge computed %.0f%% of its time, want at most 30%%", share*100)
	}
}

// pacedTestDB opens a DB whose background compactions are paced at one
// byte per second with no burst: the first write of a compaction's output
// waits for days, so the compaction stays paced as long as the test
// needs. Table "t" is size-tiered with the default MinThreshold of 4.
func pacedTestDB(t *testing.T, dir string, stallSSTables int) *DB {
	t.Helper()
	opts := DefaultOptions()
	opts.Clock = &fakeClock{now: time.Unix(1_800_000_000, 0)}
	opts.CompactionThroughput = 1
	opts.compactionBurstBytes = -1
	opts.StallSSTablesPerTable = stallSSTables
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateTable(TableDef{Name: "t"}); err != nil {
		t.Fatal(err)
	}
	return db
}

// flushRows writes rows [from, from+n) of partition "p" and flushes them
// into one SSTable.
func flushRows(t *testing.T, db *DB, from, n int) {
	t.Helper()
	apply(t, db, func(b *Batch) {
		for i := from; i < from+n; i++ {
			ck := binary.BigEndian.AppendUint32(nil, uint32(i))
			b.Put("t", []byte("p"), ck, []byte("c"), []byte(fmt.Sprintf("value %d", i)), int64(i+1))
		}
	})
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
}

func countRows(t *testing.T, db *DB) int {
	t.Helper()
	rows, _ := readAll(t, db, SliceQuery{Table: "t", Partition: []byte("p")})
	return len(rows)
}

// TestPacedCompactionBlocksNothing checks that a background compaction
// waiting for the throughput limit holds up none of Apply, Slice, Flush,
// Metrics and Close: Close cuts the wait short, the compaction finishes
// unpaced, and the store reopens with every row.
func TestPacedCompactionBlocksNothing(t *testing.T) {
	dir := t.TempDir()
	db := pacedTestDB(t, dir, 48)
	for i := 0; i < 4; i++ {
		flushRows(t, db, i*100, 100)
	}
	waitFor(t, "the compaction of 4 SSTables to wait for the limit", func() bool { return db.Metrics().CompactionsPaced == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b Batch
	b.Put("t", []byte("p"), binary.BigEndian.AppendUint32(nil, 400), []byte("c"), []byte("late"), 401)
	if err := db.Apply(ctx, &b); err != nil {
		t.Fatalf("Apply during a paced compaction: %v", err)
	}
	if n := countRows(t, db); n != 401 {
		t.Fatalf("read during a paced compaction: %d rows, want 401", n)
	}
	if err := db.Flush(); err != nil {
		t.Fatalf("Flush during a paced compaction: %v", err)
	}
	m := db.Metrics()
	if m.CompactionsPaced != 1 || m.Tables[0].SSTables != 5 || m.Tables[0].Compacting != 4 || m.Compactions != 0 {
		t.Fatalf("want the compaction still paced, 5 SSTables of which 4 compacting, none compacted; metrics:\n%s(paced now %d)", m, m.CompactionsPaced)
	}

	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close waited for the paced compaction (at 1 byte/s it would take days)")
	}
	if db.Metrics().CompactionPacedTime <= 0 {
		t.Fatal("CompactionPacedTime is 0 after a paced wait")
	}

	opts := DefaultOptions()
	opts.DisableAutoCompaction = true
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := countRows(t, db); n != 401 {
		t.Fatalf("after reopening: %d rows, want 401", n)
	}
	if got := db.Metrics().Tables[0].SSTables; got != 2 {
		t.Fatalf("after reopening: %d SSTables, want 2 (the 4 compacted at Close, and the last flush)", got)
	}
	if err := db.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestPacingBacksOffNearTheStall checks that a limit cannot let
// compactions fall behind the flushes: a compaction waiting for a limit
// it would need days to meet runs at full speed once its table holds half
// of StallSSTablesPerTable SSTables, and the writes never stall.
func TestPacingBacksOffNearTheStall(t *testing.T) {
	db := pacedTestDB(t, t.TempDir(), 16)
	defer db.Close()
	for i := 0; i < 4; i++ {
		flushRows(t, db, i*100, 100)
	}
	waitFor(t, "the compaction of 4 SSTables to wait for the limit", func() bool { return db.Metrics().CompactionsPaced == 1 })
	// 7 SSTables: still under half of 16, the compaction stays paced.
	for i := 4; i < 7; i++ {
		flushRows(t, db, i*100, 100)
	}
	if m := db.Metrics(); m.Compactions != 0 || m.CompactionsPaced != 1 {
		t.Fatalf("with 7 of 16 SSTables the compaction should still be paced:\n%s", m)
	}
	// The 8th reaches half of 16: pacing is off, and the compactions
	// catch up (the first, then the next one the picker finds) unpaced.
	flushRows(t, db, 700, 100)
	waitFor(t, "the paced compaction to finish once 8 of 16 SSTables are there", func() bool { return db.Metrics().Compactions >= 1 })
	for i := 8; i < 12; i++ {
		flushRows(t, db, i*100, 100)
	}
	m := db.Metrics()
	if m.WriteStalls != 0 {
		t.Fatalf("writes stalled %d times:\n%s", m.WriteStalls, m)
	}
	if m.Tables[0].SSTables >= 16 {
		t.Fatalf("the table reached the stall count:\n%s", m)
	}
	if n := countRows(t, db); n != 1200 {
		t.Fatalf("%d rows, want 1200", n)
	}
}

// TestManualCompactionIsNotPaced checks that DB.Compact ignores the limit:
// its caller waits for it.
func TestManualCompactionIsNotPaced(t *testing.T) {
	opts := DefaultOptions()
	opts.CompactionThroughput = 1
	opts.compactionBurstBytes = -1
	opts.DisableAutoCompaction = true
	db, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.CreateTable(TableDef{Name: "t"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		flushRows(t, db, i*100, 100)
	}
	compactWithinAMinute(t, db, "the limit")
	if m := db.Metrics(); m.CompactionPacedTime != 0 || m.Tables[0].SSTables != 1 {
		t.Fatalf("want one SSTable and no paced time:\n%s", m)
	}
}

// TestManualCompactionHurriesThePacedOne checks that DB.Compact, which
// waits for the running background compactions of its table, turns their
// pacing off instead of waiting for it.
func TestManualCompactionHurriesThePacedOne(t *testing.T) {
	db := pacedTestDB(t, t.TempDir(), 48)
	defer db.Close()
	for i := 0; i < 4; i++ {
		flushRows(t, db, i*100, 100)
	}
	waitFor(t, "the compaction of 4 SSTables to wait for the limit", func() bool { return db.Metrics().CompactionsPaced == 1 })
	compactWithinAMinute(t, db, "the paced background compaction")
	if m := db.Metrics(); m.Tables[0].SSTables != 1 || m.Compactions < 2 {
		t.Fatalf("want the background compaction and the manual one done, one SSTable:\n%s", m)
	}
	if n := countRows(t, db); n != 400 {
		t.Fatalf("%d rows, want 400", n)
	}
}

// TestClosedWindowsDoNotStallWrites: a TimeWindow table keeps one SSTable
// per closed window until the window expires (the events table: an hour
// window and a 7-day TTL, 168 of them), which no compaction can merge
// away. They must count neither toward the write stall nor toward the
// pacer's back-off, or after StallSSTablesPerTable hours of ingest every
// write would stall for good. The active window's SSTables, and a closed
// window's beyond its first, still count.
func TestClosedWindowsDoNotStallWrites(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 11, 24, 0, 30, 0, 0, time.UTC)}
	opts := DefaultOptions()
	opts.Clock = clock
	opts.StallSSTablesPerTable = 4
	opts.DisableAutoCompaction = true
	db, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.CreateTable(TableDef{Name: "w", Compaction: TimeWindow, WindowSeconds: 3600}); err != nil {
		t.Fatal(err)
	}
	put := func(i int) error {
		timeout := 5 * time.Second
		if i == 10 {
			timeout = 100 * time.Millisecond // expected to stall
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		var b Batch
		b.Put("w", []byte("p"), binary.BigEndian.AppendUint32(nil, uint32(i)), []byte("c"), []byte("v"), clock.Now().UnixMicro())
		return db.Apply(ctx, &b)
	}
	// Six hours, one flush each: six SSTables in six windows, five closed.
	for i := range 6 {
		if err := put(i); err != nil {
			t.Fatalf("write %d (hour %d, %d SSTables in as many windows): %v", i, i, db.Metrics().Tables[0].SSTables, err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		if i < 5 {
			clock.Advance(time.Hour)
		}
	}
	if err := put(6); err != nil {
		t.Fatalf("write after 6 windows of one SSTable each: %v", err)
	}
	if db.compactionsBehind() {
		t.Fatal("the pacer backs off for closed windows of one SSTable each")
	}
	// Three more flushes in the active window: 4 SSTables compaction
	// could merge, the stall count.
	for i := 7; i < 10; i++ {
		if err := put(i); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := put(10); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("write with 4 SSTables in the active window: %v, want a stall until the deadline", err)
	}
	// The hour turns: that window is closed now, and only 3 of its 4
	// SSTables can still be merged away. The count is remembered per
	// version (no flush since), so this checks it is redone when the
	// active window changes.
	clock.Advance(time.Hour)
	if err := put(11); err != nil {
		t.Fatalf("write once the window of 4 SSTables has closed: %v", err)
	}
}

// compactWithinAMinute runs DB.Compact of table "t" and fails the test if
// it has not returned within a minute: at the tests' 1 byte/s it would
// have waited for what, days.
func compactWithinAMinute(t *testing.T, db *DB, what string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- db.Compact("t") }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("DB.Compact waited for %s (at 1 byte/s it would take days)", what)
	}
}
