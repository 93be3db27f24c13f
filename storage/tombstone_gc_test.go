package storage

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTombstoneGCModes checks the two purge policies on the same deletes:
// a timeout table keeps its tombstones through a full compaction until
// gc_grace has passed; an immediate table drops them (and what they
// shadow) at the first compaction that holds every SSTable of the
// partition, even in the second they were written. Both read the same.
func TestTombstoneGCModes(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)}
	db := openTestDB(t, clock,
		TableDef{Name: "timeout"}, // the default: gc_grace 10 days
		TableDef{Name: "immediate", TombstoneGC: TombstoneGCImmediate})
	key := func(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)) }
	ts := clock.Now().UnixMicro()
	for _, table := range []string{"timeout", "immediate"} {
		apply(t, db, func(b *Batch) {
			for i := 0; i < 10; i++ {
				b.Put(table, []byte("p"), key(i), []byte("c"), []byte("v"), ts)
			}
		})
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"timeout", "immediate"} {
		apply(t, db, func(b *Batch) {
			b.DeleteRow(table, []byte("p"), key(0), ts+1)
			b.DeleteCell(table, []byte("p"), key(1), []byte("c"), ts+1)
			b.DeleteRange(table, []byte("p"), Bound{Key: key(2), Inclusive: true}, Bound{Key: key(5)}, ts+1)
		})
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	if got := tableMetrics(t, db, "timeout").Tombstones; got != 3 {
		t.Errorf("timeout table holds %d tombstones within gc_grace, want 3", got)
	}
	if got := tableMetrics(t, db, "immediate").Tombstones; got != 0 {
		t.Errorf("immediate table holds %d tombstones after a full compaction, want 0", got)
	}
	for _, table := range []string{"timeout", "immediate"} {
		rows, _ := readAll(t, db, SliceQuery{Table: table, Partition: []byte("p")})
		if len(rows) != 5 || !slices.Equal(rows[0].Clustering, key(5)) {
			t.Errorf("%s: read %d rows from %x, want 5 from %x", table, len(rows), rows[0].Clustering, key(5))
		}
	}
	// Past gc_grace the timeout table purges too.
	clock.Advance(DefaultGCGraceSeconds*time.Second + time.Minute)
	if err := db.Compact("timeout"); err != nil {
		t.Fatal(err)
	}
	if got := tableMetrics(t, db, "timeout").Tombstones; got != 0 {
		t.Errorf("timeout table holds %d tombstones past gc_grace, want 0", got)
	}
	// A table's policy is validated.
	if err := db.CreateTable(TableDef{Name: "bad", TombstoneGC: "never"}); err == nil {
		t.Error("tombstone_gc \"never\" was accepted")
	}
}

// TestModelTombstoneGC is a randomized model test of the purge policies
// with background compaction (size-tiered and tombstone compactions, an
// interval of 0 so they run often) and manual compactions: a table in
// immediate mode whose write timestamps follow a stream order (each batch
// above every earlier one), a size-tiered and a time-window one, and a
// timeout table with a short gc_grace and timestamps jittered below it.
// Every read must match the model, which never purges anything: data
// never comes back in either mode.
func TestModelTombstoneGC(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -model.seed=%d)", seed, seed)
	ops := 20_000
	if testing.Short() {
		ops = 5_000
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x51ed))
	clock := &fakeClock{now: time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)}
	opts := DefaultOptions()
	opts.Clock = clock
	opts.WALSyncMode = WALPeriodic
	opts.MemtableSize = int64(16<<10 + rng.IntN(32<<10))
	opts.StallSSTablesPerTable = 1 << 20
	// A low threshold and no interval make tombstone compactions (across
	// windows, for immtw) frequent; min_threshold 4 leaves them room.
	zero := int64p(0)
	defs := []TableDef{
		{Name: "imm", TombstoneGC: TombstoneGCImmediate, MinThreshold: 4, MaxThreshold: 8,
			TombstoneThreshold: 0.05, TombstoneCompactionIntervalSeconds: zero},
		{Name: "immtw", TombstoneGC: TombstoneGCImmediate, Compaction: TimeWindow, WindowSeconds: 60, MinThreshold: 4,
			TombstoneThreshold: 0.05, TombstoneCompactionIntervalSeconds: zero},
		{Name: "tmo", GCGraceSeconds: int64p(30), MinThreshold: 4, MaxThreshold: 8,
			TombstoneThreshold: 0.05, TombstoneCompactionIntervalSeconds: zero},
	}
	dir := t.TempDir()
	open := opener(t, seed, dir, opts, defs)
	db := open()
	defer func() { db.Close() }()
	names := tableNames(db)
	m := newModel(defs)
	tables := []string{"imm", "immtw", "tmo"}
	const partitions, clusterings = 4, 60
	pk := func() []byte { return []byte(fmt.Sprintf("p%d", rng.IntN(partitions))) }
	ck := func() []byte { return binary.BigEndian.AppendUint64(nil, uint64(1+rng.IntN(clusterings))) }
	col := func() []byte { return []byte{'a' + byte(rng.IntN(3))} }
	bound := func() Bound {
		if rng.IntN(5) == 0 {
			return Bound{}
		}
		return Bound{Key: ck(), Inclusive: rng.IntN(2) == 0}
	}
	// streamTS is the stream position of the immediate tables: every
	// batch writes above every earlier batch (ties only inside a batch).
	streamTS := clock.Now().UnixMicro()
	history := map[string][]string{}
	check := func(q SliceQuery, when string) {
		got, stats := readAll(t, db, q)
		want := m.slice(q, clock.Now().Unix())
		if !slices.EqualFunc(got, want, rowsEqual) {
			t.Logf("history of %s/%s:\n%s", q.Table, q.Partition, strings.Join(history[q.Table+"/"+string(q.Partition)], ""))
			t.Fatalf("seed %d: %s: slice %s/%s start=%x end=%x reverse=%v limit=%d differs\n got:\n%s want:\n%s stats: %s",
				seed, when, q.Table, q.Partition, q.Start.Key, q.End.Key, q.Reverse, q.Limit, rowsString(got), rowsString(want), stats)
		}
	}
	// splitAll compacts every SSTable of immtw in one compaction that
	// writes one SSTable per window, as a tombstone compaction across
	// windows does: the picker rarely finds such a candidate here, since
	// windows are compacted (and purged) on their own so often.
	splitAll := func() {
		db.mu.Lock()
		ts := db.tables["immtw"]
		for db.tableCompactingLocked(ts.id) && db.bgErr == nil {
			db.cond.Wait()
		}
		all := append([]*sstHandle(nil), db.current.sstables[ts.id]...)
		if len(all) == 0 || db.bgErr != nil {
			db.mu.Unlock()
			return
		}
		windows := map[int64]bool{}
		for _, h := range all {
			windows[timeWindow(h.props.MaxTimestamp, 60)] = true
		}
		c := &compaction{table: ts, inputs: all, reason: "test: split by window", splitByWindow: true}
		db.startCompactionLocked(c)
		db.mu.Unlock()
		if err := db.runCompaction(c); err != nil {
			t.Fatalf("seed %d: compaction split by window: %v", seed, err)
		}
		// Nothing moved to a newer window than it came from: every
		// output is filed under one of the inputs' windows or an older
		// one (when its newest writes were purged).
		db.mu.Lock()
		defer db.mu.Unlock()
		newest := int64(math.MinInt64)
		for w := range windows {
			newest = max(newest, w)
		}
		for _, h := range db.current.sstables[ts.id] {
			if w := timeWindow(h.props.MaxTimestamp, 60); w > newest {
				t.Fatalf("seed %d: a split output is in window %d, after every input's (newest %d)", seed, w, newest)
			}
		}
	}
	for op := 0; op < ops; {
		var b Batch
		streamTS += 1 + rng.Int64N(1000)
		for n := 1 + rng.IntN(6); n > 0; n-- {
			op++
			table := tables[rng.IntN(len(tables))]
			ts := streamTS
			if table == "tmo" {
				ts = clock.Now().UnixMicro() + rng.Int64N(2_000_000) - 1_000_000
			}
			switch r := rng.IntN(100); {
			case r < 45:
				b.Put(table, pk(), ck(), col(), fmt.Appendf(nil, "v%d", rng.IntN(1000)), ts)
			case r < 60:
				b.PutTTL(table, pk(), ck(), col(), fmt.Appendf(nil, "t%d", rng.IntN(1000)), ts, int32(1+rng.IntN(90)))
			case r < 75:
				b.DeleteCell(table, pk(), ck(), col(), ts)
			case r < 90:
				b.DeleteRow(table, pk(), ck(), ts)
			case r < 98:
				b.DeleteRange(table, pk(), bound(), bound(), ts)
			default:
				b.DeletePartition(table, pk(), ts)
			}
		}
		if err := db.Apply(context.Background(), &b); err != nil {
			t.Fatalf("seed %d: apply: %v", seed, err)
		}
		for _, mu := range b.mutations {
			k := names[mu.tableID] + "/" + string(mu.partition)
			history[k] = append(history[k], fmt.Sprintf("  now=%d op=%d cell=%x/%s kind=%v ts=%d range=%x..%x@%d pdel=%d\n",
				clock.Now().Unix(), mu.op, mu.cell.Clustering, mu.cell.Column, mu.cell.Kind, mu.cell.Timestamp,
				mu.rangeTomb.Start.Key, mu.rangeTomb.End.Key, mu.rangeTomb.Deletion.MarkedForDeleteAt, mu.deletion.MarkedForDeleteAt))
		}
		m.apply(b.mutations, names)

		switch r := rng.IntN(100); {
		case r < 25:
			check(SliceQuery{Table: tables[rng.IntN(len(tables))], Partition: pk(), Start: bound(), End: bound(),
				Reverse: rng.IntN(2) == 0, Limit: rng.IntN(6)}, fmt.Sprintf("op %d", op))
		case r < 35:
			clock.Advance(time.Duration(rng.IntN(15_000)) * time.Millisecond)
		case r < 40:
			if err := db.Flush(); err != nil {
				t.Fatalf("seed %d: flush: %v", seed, err)
			}
		case r < 42:
			if err := db.Compact(tables[rng.IntN(len(tables))]); err != nil {
				t.Fatalf("seed %d: compact: %v", seed, err)
			}
		case r < 44:
			splitAll()
		case r < 45:
			if err := db.Close(); err != nil {
				t.Fatalf("seed %d: close: %v", seed, err)
			}
			db = open()
		}
	}
	final := func(when string) {
		for _, table := range tables {
			for p := 0; p < partitions; p++ {
				for _, rev := range []bool{false, true} {
					check(SliceQuery{Table: table, Partition: []byte(fmt.Sprintf("p%d", p)), Reverse: rev}, when)
				}
			}
		}
	}
	final("end")
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	splitAll()
	final("after a compaction split by window")
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	final("after full compaction")
	// With every SSTable of the partition in the compaction and empty
	// memtables, immediate mode has purged everything dead (expired
	// cells too, once expired).
	clock.Advance(2 * time.Minute)
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	final("after expiry")
	if got := tableMetrics(t, db, "imm").Tombstones; got != 0 {
		t.Errorf("seed %d: immediate table holds %d tombstones after full compactions", seed, got)
	}
	if err := db.Check(); err != nil {
		t.Fatalf("seed %d: check: %v", seed, err)
	}
}
