package storage

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/eventide/eventide/storage/internal/sstable"
)

// tableMetrics returns the metrics of one table.
func tableMetrics(t *testing.T, db *DB, name string) TableMetrics {
	t.Helper()
	for _, tm := range db.Metrics().Tables {
		if tm.Name == name {
			return tm
		}
	}
	t.Fatalf("no metrics for table %q", name)
	return TableMetrics{}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// deleteOldest90 writes partitions of rows and deletes the oldest 90% of
// each, half of the partitions by DeleteCell and half by DeleteRow, with a
// flush after the writes and after the deletes.
func deleteOldest90(t *testing.T, db *DB, table string, partitions, rows int, clock *fakeClock) {
	t.Helper()
	key := func(i int) []byte { return binary.BigEndian.AppendUint64(nil, ^uint64(i)) }
	rng := rand.New(rand.NewPCG(1, 2))
	ts := clock.Now().UnixMicro()
	for p := 0; p < partitions; p++ {
		apply(t, db, func(b *Batch) {
			for i := 0; i < rows; i++ {
				// Incompressible, so that bytes follow rows.
				value := binary.LittleEndian.AppendUint64(nil, rng.Uint64())
				for len(value) < 120 {
					value = binary.LittleEndian.AppendUint64(value, rng.Uint64())
				}
				b.Put(table, fmt.Appendf(nil, "p%d", p), key(i), []byte("data"), value, ts)
			}
		})
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	for p := 0; p < partitions; p++ {
		apply(t, db, func(b *Batch) {
			for i := 0; i < rows*9/10; i++ {
				if p%2 == 0 {
					b.DeleteCell(table, fmt.Appendf(nil, "p%d", p), key(i), []byte("data"), ts+1)
				} else {
					b.DeleteRow(table, fmt.Appendf(nil, "p%d", p), key(i), ts+1)
				}
			}
		})
	}
}

// TestTombstoneCompaction checks that, once the tombstones of 90% point
// deletes may be purged, background compaction alone (no Compact call)
// rewrites the tombstone SSTable with the data it shadows: the table's
// bytes fall and a read scans no tombstones. Before gc_grace has passed,
// or before the SSTable is older than the interval, nothing is picked.
func TestTombstoneCompaction(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)}
	opts := DefaultOptions()
	opts.Clock = clock
	opts.WALSyncMode = WALPeriodic
	db, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const gcGrace, interval = 3600, 7200
	// A high min_threshold keeps size-tiered compaction out of it.
	if err := db.CreateTable(TableDef{Name: "t", GCGraceSeconds: int64p(gcGrace), MinThreshold: 32,
		TombstoneCompactionIntervalSeconds: int64p(interval)}); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateTable(TableDef{Name: "o"}); err != nil {
		t.Fatal(err)
	}
	const partitions, rows = 20, 200
	deleteOldest90(t, db, "t", partitions, rows, clock)
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	before := tableMetrics(t, db, "t")
	_, stats := readAll(t, db, SliceQuery{Table: "t", Partition: []byte("p1")})
	if before.SSTables != 2 || stats.TombstonesScanned < rows*9/10 {
		t.Fatalf("before: %d SSTables, read scanned %d tombstones", before.SSTables, stats.TombstonesScanned)
	}

	// Within gc_grace, then past gc_grace but within the interval,
	// nothing is picked (a flush wakes the picker).
	nudge := func() {
		t.Helper()
		apply(t, db, func(b *Batch) {
			b.Put("t", []byte("other"), []byte("k"), []byte("c"), []byte("v"), clock.Now().UnixMicro())
		})
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []time.Duration{gcGrace / 2 * time.Second, gcGrace * time.Second} {
		clock.Advance(step)
		compactions := db.Metrics().Compactions
		nudge()
		db.mu.Lock()
		picked := db.pickTombstoneLocked(db.tables["t"], clock.Now().Unix())
		db.mu.Unlock()
		if picked != nil || db.Metrics().Compactions != compactions {
			t.Fatalf("a tombstone compaction was picked too early: %+v", picked)
		}
	}

	// Past both: the next wake-up compacts by itself, even with an
	// unflushed write of another table at a timestamp of another scale
	// (stream positions, as the fan-out's) in the memtable: only this
	// table's writes there could hold its tombstones back.
	clock.Advance(interval * time.Second)
	apply(t, db, func(b *Batch) { b.Put("o", []byte("p"), []byte("k"), []byte("c"), []byte("v"), 1) })
	db.maybeScheduleCompaction()
	waitFor(t, "a tombstone compaction to purge the deletes", func() bool {
		return tableMetrics(t, db, "t").Tombstones == 0 && db.Metrics().PurgedTombstones > 0
	})
	after := tableMetrics(t, db, "t")
	rowsLeft, stats := readAll(t, db, SliceQuery{Table: "t", Partition: []byte("p1")})
	if len(rowsLeft) != rows/10 || stats.TombstonesScanned != 0 {
		t.Fatalf("after: %d rows, %d tombstones scanned, want %d rows and none", len(rowsLeft), stats.TombstonesScanned, rows/10)
	}
	if after.Bytes*3 > before.Bytes {
		t.Fatalf("table bytes %d -> %d: want at most a third", before.Bytes, after.Bytes)
	}
	t.Logf("table bytes %d -> %d, tombstones in the table %d -> 0", before.Bytes, after.Bytes, before.Tombstones)
}

// TestTombstoneCompactionAcrossWindows checks a TimeWindow table: rows
// written in one window and deleted (row deletes) in a later one. No window
// compaction ever merges the two windows' SSTables; the tombstone
// compaction takes the older window's SSTable in, purges the deleted rows
// with their tombstones (immediate mode), and writes what is left back
// into the older window, where it will still expire whole.
func TestTombstoneCompactionAcrossWindows(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 11, 24, 0, 10, 0, 0, time.UTC)}
	opts := DefaultOptions()
	opts.Clock = clock
	opts.WALSyncMode = WALPeriodic
	db, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.CreateTable(TableDef{Name: "tw", Compaction: TimeWindow, WindowSeconds: 3600, MinThreshold: 32,
		TombstoneGC: TombstoneGCImmediate, TombstoneCompactionIntervalSeconds: int64p(0)}); err != nil {
		t.Fatal(err)
	}
	const partitions, rows = 10, 200
	key := func(i int) []byte { return binary.BigEndian.AppendUint64(nil, ^uint64(i)) }
	rng := rand.New(rand.NewPCG(3, 4))
	dataTS := clock.Now().UnixMicro()
	for p := 0; p < partitions; p++ {
		apply(t, db, func(b *Batch) {
			for i := 0; i < rows; i++ {
				value := binary.LittleEndian.AppendUint64(nil, rng.Uint64())
				for len(value) < 120 {
					value = binary.LittleEndian.AppendUint64(value, rng.Uint64())
				}
				b.Put("tw", fmt.Appendf(nil, "p%d", p), key(i), []byte("data"), value, dataTS)
			}
		})
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	delTS := clock.Now().UnixMicro()
	for p := 0; p < partitions; p++ {
		apply(t, db, func(b *Batch) {
			for i := 0; i < rows*9/10; i++ {
				b.DeleteRow("tw", fmt.Appendf(nil, "p%d", p), key(i), delTS)
			}
		})
	}
	clock.Advance(time.Second)
	before := tableMetrics(t, db, "tw") // the data alone
	if err := db.Flush(); err != nil {  // wakes the picker
		t.Fatal(err)
	}
	waitFor(t, "a tombstone compaction across windows", func() bool {
		return tableMetrics(t, db, "tw").Tombstones == 0 && tableMetrics(t, db, "tw").SSTables > 0
	})
	after := tableMetrics(t, db, "tw")
	if after.SSTables != 1 {
		t.Fatalf("%d SSTables left, want 1 (the older window's)", after.SSTables)
	}
	db.mu.Lock()
	h := db.current.sstables[db.tables["tw"].id][0]
	db.mu.Unlock()
	if w, want := timeWindow(h.props.MaxTimestamp, 3600), timeWindow(dataTS, 3600); w != want {
		t.Fatalf("the surviving rows sit in window %d, want their own window %d", w, want)
	}
	for p := 0; p < partitions; p++ {
		got, stats := readAll(t, db, SliceQuery{Table: "tw", Partition: fmt.Appendf(nil, "p%d", p)})
		if len(got) != rows/10 || stats.TombstonesScanned != 0 {
			t.Fatalf("p%d: %d rows, %d tombstones scanned, want %d rows and none", p, len(got), stats.TombstonesScanned, rows/10)
		}
	}
	if after.Bytes*5 > before.Bytes {
		t.Fatalf("table bytes %d -> %d: want at most a fifth", before.Bytes, after.Bytes)
	}
	t.Logf("table bytes %d -> %d in window %d", before.Bytes, after.Bytes, timeWindow(dataTS, 3600))
}

// TestTombstoneCompactionThatPurgesNothing checks that the output of a
// tombstone compaction that purged nothing is not picked again at once.
// The estimate can over-count expiring cells (it takes the smaller of
// "expired" and "written before gcBefore", counted apart): here half the
// cells expired but were written too recently, half were written long ago
// but live on, so the estimate says half may go and nothing can. With an
// interval of 0 the picker took the rewritten file again and again.
func TestTombstoneCompactionThatPurgesNothing(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)}
	db := openTestDB(t, clock, TableDef{Name: "t", GCGraceSeconds: int64p(100), MinThreshold: 32,
		TombstoneCompactionIntervalSeconds: int64p(0)})
	key := func(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)) }
	apply(t, db, func(b *Batch) {
		for i := 0; i < 50; i++ {
			b.PutTTL("t", []byte("p"), key(i), []byte("c"), []byte("long"), clock.Now().UnixMicro(), 10_000)
		}
	})
	clock.Advance(500 * time.Second)
	apply(t, db, func(b *Batch) {
		for i := 50; i < 100; i++ {
			b.PutTTL("t", []byte("p"), key(i), []byte("c"), []byte("short"), clock.Now().UnixMicro(), 1)
		}
	})
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(100 * time.Second)
	pickAndRun := func() bool {
		t.Helper()
		db.mu.Lock()
		c := db.pickTombstoneLocked(db.tables["t"], clock.Now().Unix())
		if c == nil {
			db.mu.Unlock()
			return false
		}
		db.startCompactionLocked(c)
		db.mu.Unlock()
		if err := db.runCompaction(c); err != nil {
			t.Fatal(err)
		}
		return true
	}
	if !pickAndRun() {
		t.Fatal("the over-counted SSTable was not picked (the estimate changed?)")
	}
	if db.Metrics().PurgedTombstones != 0 {
		t.Fatal("the compaction purged something: the scenario is wrong")
	}
	if pickAndRun() {
		t.Fatal("the output of a compaction that purged nothing was picked again at once")
	}
	// An hour later it may be tried again.
	clock.Advance(time.Hour + time.Second)
	if !pickAndRun() {
		t.Fatal("the output was never tried again")
	}
}

// TestCompactPurgesAcrossWindows checks that a manual compaction of a
// TimeWindow table purges deletions written in a later window than the
// data they delete, once gc_grace has passed, and leaves the surviving
// rows in their window, in one long-lived SSTable.
func TestCompactPurgesAcrossWindows(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 11, 24, 0, 10, 0, 0, time.UTC)}
	db := openTestDB(t, clock, TableDef{Name: "tw", Compaction: TimeWindow, WindowSeconds: 3600, GCGraceSeconds: int64p(600)})
	key := func(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)) }
	dataTS := clock.Now().UnixMicro()
	apply(t, db, func(b *Batch) {
		for i := 0; i < 100; i++ {
			b.Put("tw", []byte("p"), key(i), []byte("c"), []byte("value"), dataTS)
		}
	})
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	apply(t, db, func(b *Batch) {
		for i := 0; i < 90; i++ {
			b.DeleteRow("tw", []byte("p"), key(i), clock.Now().UnixMicro())
		}
	})
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	// Within gc_grace the tombstones stay, and so do both windows.
	if err := db.Compact("tw"); err != nil {
		t.Fatal(err)
	}
	if tm := tableMetrics(t, db, "tw"); tm.Tombstones != 90 || tm.SSTables != 2 {
		t.Fatalf("within gc_grace: %d tombstones in %d SSTables, want 90 in 2", tm.Tombstones, tm.SSTables)
	}
	clock.Advance(20 * time.Minute)
	if err := db.Compact("tw"); err != nil {
		t.Fatal(err)
	}
	tm := tableMetrics(t, db, "tw")
	if tm.Tombstones != 0 || tm.SSTables != 1 || tm.Cells != 10 {
		t.Fatalf("past gc_grace: %d tombstones, %d cells in %d SSTables, want 0, 10 in 1", tm.Tombstones, tm.Cells, tm.SSTables)
	}
	db.mu.Lock()
	h := db.current.sstables[db.tables["tw"].id][0]
	db.mu.Unlock()
	if w, want := timeWindow(h.props.MaxTimestamp, 3600), timeWindow(dataTS, 3600); w != want {
		t.Fatalf("the surviving rows sit in window %d, want %d", w, want)
	}
	if got := h.props.Compression; got != sstable.CompressionZstd {
		t.Fatalf("the compacted window is %v, want zstd", got)
	}
	rows, _ := readAll(t, db, SliceQuery{Table: "tw", Partition: []byte("p")})
	if len(rows) != 10 {
		t.Fatalf("read %d rows, want 10", len(rows))
	}
}

// TestTombstonePickerLeavesExpiryToWindows checks that expired cells do
// not make a TimeWindow SSTable a tombstone compaction candidate (it is
// dropped whole, unread, once all of it expired), while in a size-tiered
// table they do.
func TestTombstonePickerLeavesExpiryToWindows(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 11, 24, 0, 10, 0, 0, time.UTC)}
	zero := int64p(0)
	db := openTestDB(t, clock,
		TableDef{Name: "tw", Compaction: TimeWindow, GCGraceSeconds: zero, TombstoneCompactionIntervalSeconds: zero},
		TableDef{Name: "st", GCGraceSeconds: zero, TombstoneCompactionIntervalSeconds: zero})
	for _, table := range []string{"tw", "st"} {
		apply(t, db, func(b *Batch) {
			for i := 0; i < 10; i++ {
				ttl := int32(60)
				if i == 0 {
					ttl = 100_000 // keeps the SSTable from being fully expired
				}
				b.PutTTL(table, []byte("p"), []byte{byte(i)}, []byte("c"), []byte("v"), clock.Now().UnixMicro(), ttl)
			}
		})
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Minute)
	db.mu.Lock()
	defer db.mu.Unlock()
	now := clock.Now().Unix()
	if c := db.pickTombstoneLocked(db.tables["tw"], now); c != nil {
		t.Errorf("a time-window SSTable of expired cells was picked for its tombstones: %+v", c)
	}
	if c := db.pickTombstoneLocked(db.tables["st"], now); c == nil {
		t.Error("a size-tiered SSTable of 90% expired cells was not picked")
	}
}
