package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventide/eventide/storage/internal/base"
	"github.com/eventide/eventide/storage/vfs"
)

var (
	modelOps  = flag.Int("model.ops", 100_000, "operations in the randomized model test")
	modelSeed = flag.Uint64("model.seed", 0, "seed for the randomized model test (0 = random)")
)

// fakeClock is a settable clock shared by the engine and the model.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// The model: every table is a map of partitions, every partition keeps
// every version of every cell and every deletion it was sent, and a read
// resolves them the most direct way (no ordering, no files, nothing
// purged). Its rules are written here from design.md, not taken from the
// engine's internal/base, so a bug there is not copied into the oracle:
// only the mutations, already resolved by the engine's clock (expiry and
// deletion times), come from the engine.
type modelVersion struct {
	kind       base.Kind
	tsMicros   int64
	ldtSeconds int64 // expiry of an expiring cell, deletion time of a tombstone
	ttlSeconds int32
	value      []byte
}

type modelCell struct {
	clustering, column []byte
	versions           []modelVersion
}

// modelRangeDeletion deletes, at tsMicros, the cells whose clustering key is
// between start and end (a row deletion has start = end, both inclusive).
type modelRangeDeletion struct {
	start, end Bound
	tsMicros   int64
}

type modelPartition struct {
	// partitionDeletions are the timestamps of partition deletions.
	partitionDeletions []int64
	rangeDeletions     []modelRangeDeletion
	cells              map[string]*modelCell // key: clustering + "\x00" + column (test keys never hold 0)
}

type modelTable struct {
	def        TableDef
	partitions map[string]*modelPartition
}

type model struct {
	tables map[string]*modelTable
}

func newModel(defs []TableDef) *model {
	m := &model{tables: map[string]*modelTable{}}
	for _, d := range defs {
		d, _, _ = d.withDefaults()
		m.tables[d.Name] = &modelTable{def: d, partitions: map[string]*modelPartition{}}
	}
	return m
}

func (m *model) partition(table string, pk []byte) *modelPartition {
	t := m.tables[table]
	p := t.partitions[string(pk)]
	if p == nil {
		p = &modelPartition{cells: map[string]*modelCell{}}
		t.partitions[string(pk)] = p
	}
	return p
}

// apply records already resolved mutations.
func (m *model) apply(muts []mutation, names map[uint32]string) {
	for i := range muts {
		mu := &muts[i]
		p := m.partition(names[mu.tableID], mu.partition)
		switch mu.op {
		case opCell:
			k := string(mu.cell.Clustering) + "\x00" + string(mu.cell.Column)
			c := p.cells[k]
			if c == nil {
				c = &modelCell{clustering: bytes.Clone(mu.cell.Clustering), column: bytes.Clone(mu.cell.Column)}
				p.cells[k] = c
			}
			c.versions = append(c.versions, modelVersion{kind: mu.cell.Kind, tsMicros: mu.cell.Timestamp,
				ldtSeconds: mu.cell.LocalDeletionTime, ttlSeconds: mu.cell.TTL, value: bytes.Clone(mu.cell.Value)})
		case opRangeTombstone:
			rt := mu.rangeTomb.Clone()
			p.rangeDeletions = append(p.rangeDeletions, modelRangeDeletion{start: rt.Start, end: rt.End, tsMicros: rt.Deletion.MarkedForDeleteAt})
		case opPartitionDeletion:
			p.partitionDeletions = append(p.partitionDeletions, mu.deletion.MarkedForDeleteAt)
		}
	}
}

// modelAfterStart reports whether ck is at or after start (a nil key is
// unbounded), modelBeforeEnd whether it is at or before end.
func modelAfterStart(ck []byte, start Bound) bool {
	if start.Key == nil {
		return true
	}
	c := bytes.Compare(ck, start.Key)
	return c > 0 || c == 0 && start.Inclusive
}

func modelBeforeEnd(ck []byte, end Bound) bool {
	if end.Key == nil {
		return true
	}
	c := bytes.Compare(ck, end.Key)
	return c < 0 || c == 0 && end.Inclusive
}

// modelBeats reports whether version a wins over b (design.md): the higher
// timestamp; on a tie a tombstone or expiring cell beats a plain live
// cell, a tombstone beats an expiring cell, between two expiring cells or
// two tombstones the later local deletion time, otherwise the greater
// value bytes.
func modelBeats(a, b modelVersion) bool {
	if a.tsMicros != b.tsMicros {
		return a.tsMicros > b.tsMicros
	}
	rank := func(v modelVersion) int {
		switch v.kind {
		case base.KindTombstone:
			return 2
		case base.KindExpiring:
			return 1
		}
		return 0
	}
	if ra, rb := rank(a), rank(b); ra != rb {
		return ra > rb
	}
	if rank(a) > 0 && a.ldtSeconds != b.ldtSeconds {
		return a.ldtSeconds > b.ldtSeconds
	}
	return bytes.Compare(a.value, b.value) > 0
}

// resolve returns the visible version of a cell: the winner of its
// versions, or for a counter the sum of its increments at the latest of
// their timestamps.
func (c *modelCell) resolve() modelVersion {
	if c.versions[0].kind == base.KindCounter {
		// The model test never mixes counters with other kinds in a cell.
		sum := modelVersion{kind: base.KindCounter}
		var total int64
		for _, v := range c.versions {
			total += int64(binary.BigEndian.Uint64(v.value))
			sum.tsMicros = max(sum.tsMicros, v.tsMicros)
		}
		sum.value = binary.BigEndian.AppendUint64(nil, uint64(total))
		return sum
	}
	win := c.versions[0]
	for _, v := range c.versions[1:] {
		if modelBeats(v, win) {
			win = v
		}
	}
	return win
}

// shadowed reports whether a deletion of p covering clustering key ck has a
// timestamp at or after tsMicros (a deletion shadows every cell written no
// later than itself).
func (p *modelPartition) shadowed(ck []byte, tsMicros int64) bool {
	for _, d := range p.partitionDeletions {
		if tsMicros <= d {
			return true
		}
	}
	for _, rd := range p.rangeDeletions {
		if tsMicros <= rd.tsMicros && modelAfterStart(ck, rd.start) && modelBeforeEnd(ck, rd.end) {
			return true
		}
	}
	return false
}

// live reports whether the visible version v is live at nowSeconds: a
// tombstone never is, an expiring cell until its expiry (an expired cell is
// a tombstone).
func (v modelVersion) live(nowSeconds int64) bool {
	switch v.kind {
	case base.KindTombstone:
		return false
	case base.KindExpiring:
		return nowSeconds < v.ldtSeconds
	}
	return true
}

// slice answers a query the brute-force way.
func (m *model) slice(q SliceQuery, now int64) []Row {
	t := m.tables[q.Table]
	p := t.partitions[string(q.Partition)]
	if p == nil {
		return nil
	}
	byRow := map[string][]Cell{}
	for _, c := range p.cells {
		if !modelAfterStart(c.clustering, q.Start) || !modelBeforeEnd(c.clustering, q.End) {
			continue
		}
		v := c.resolve()
		if p.shadowed(c.clustering, v.tsMicros) || !v.live(now) {
			continue
		}
		cell := Cell{Column: c.column, Value: v.value, WriteTimeMicros: v.tsMicros}
		switch v.kind {
		case base.KindExpiring:
			cell.ExpiresAt, cell.TTLSeconds = v.ldtSeconds, v.ttlSeconds
		case base.KindCounter:
			cell.Counter, cell.CounterValue = true, int64(binary.BigEndian.Uint64(v.value))
		}
		byRow[string(c.clustering)] = append(byRow[string(c.clustering)], cell)
	}
	var rows []Row
	for ck, cells := range byRow {
		sort.Slice(cells, func(i, j int) bool { return bytes.Compare(cells[i].Column, cells[j].Column) < 0 })
		rows = append(rows, Row{Clustering: []byte(ck), Cells: cells})
	}
	sort.Slice(rows, func(i, j int) bool {
		c := bytes.Compare(rows[i].Clustering, rows[j].Clustering)
		if q.Reverse {
			return c > 0
		}
		return c < 0
	})
	if q.Limit > 0 && len(rows) > q.Limit {
		rows = rows[:q.Limit]
	}
	return rows
}

func readAll(t *testing.T, db *DB, q SliceQuery) ([]Row, ReadStats) {
	t.Helper()
	it, err := db.Slice(context.Background(), q)
	if err != nil {
		t.Fatalf("slice %+v: %v", q, err)
	}
	var rows []Row
	for it.Next() {
		r := it.Row()
		cp := Row{Clustering: bytes.Clone(r.Clustering)}
		for _, c := range r.Cells {
			c.Column, c.Value = bytes.Clone(c.Column), bytes.Clone(c.Value)
			cp.Cells = append(cp.Cells, c)
		}
		rows = append(rows, cp)
	}
	if err := it.Close(); err != nil {
		t.Fatalf("slice %+v: %v", q, err)
	}
	return rows, it.Stats()
}

func rowsString(rows []Row) string {
	var b bytes.Buffer
	for _, r := range rows {
		fmt.Fprintf(&b, "  ck=%x:", r.Clustering)
		for _, c := range r.Cells {
			fmt.Fprintf(&b, " %s=%q@%d", c.Column, c.Value, c.WriteTimeMicros)
			if c.ExpiresAt != 0 {
				fmt.Fprintf(&b, "(exp %d ttl %d)", c.ExpiresAt, c.TTLSeconds)
			}
			if c.Counter {
				fmt.Fprintf(&b, "(counter %d)", c.CounterValue)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func int64p(v int64) *int64 { return &v }

// modelTables are the tables of the model test: a TWCS table with a
// default TTL, a size-tiered table with a long gc_grace and one with a
// short gc_grace (so purges happen), and a counter table.
func modelTables() []TableDef {
	return []TableDef{
		{Name: "events", Compaction: TimeWindow, WindowSeconds: 60, DefaultTTLSeconds: 120, GCGraceSeconds: int64p(30), MinThreshold: 2},
		{Name: "plain", Compaction: SizeTiered, MinThreshold: 2, MaxThreshold: 4},
		{Name: "shortgc", Compaction: SizeTiered, GCGraceSeconds: int64p(20), Compression: "s2", MinThreshold: 2},
		{Name: "counts", Compaction: SizeTiered, Counters: true, Compression: "none", MinThreshold: 2},
	}
}

// TestModelRandomized applies a seeded random sequence of puts, deletes of
// every kind, TTLs, counter additions, flushes, compactions, reopens and
// clock jumps to the engine and to the model, comparing random slices of
// both as it goes and every partition at the end.
func TestModelRandomized(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -model.seed=%d)", seed, seed)
	ops := *modelOps
	if testing.Short() {
		ops = min(ops, 10_000)
	}
	runModel(t, seed, ops, false)
}

// TestModelCrashes is TestModelRandomized on a vfs.MemFS with WAL sync on,
// crashing it at random points below the page cache (CrashClone: every
// unsynced write and directory change is lost, or with an rng a prefix of
// them survives) while flushes and compactions may be running, then
// reopening: every acknowledged batch must still read back exactly as the
// model says, and Check must find nothing corrupt.
func TestModelCrashes(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -model.seed=%d)", seed, seed)
	ops := min(*modelOps, 30_000)
	if testing.Short() {
		ops = min(ops, 5_000)
	}
	runModel(t, seed, ops, true)
}

// runModel runs the model test; with crashes, on a crashable MemFS with
// every Apply synced, and with crash-and-reopen among the operations.
// opener returns a function that opens the store in dir with opts and
// creates defs (idempotent on reopen); a failure names the seed.
func opener(t *testing.T, seed uint64, dir string, opts Options, defs []TableDef) func() *DB {
	return func() *DB {
		db, err := Open(dir, opts)
		if err != nil {
			t.Fatalf("seed %d: open: %v", seed, err)
		}
		for _, d := range defs {
			if err := db.CreateTable(d); err != nil {
				t.Fatal(err)
			}
		}
		return db
	}
}

// tableNames maps db's table ids to their names.
func tableNames(db *DB) map[uint32]string {
	names := map[uint32]string{}
	for name, ts := range db.tables {
		names[ts.id] = name
	}
	return names
}

func runModel(t *testing.T, seed uint64, ops int, crashes bool) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	dir := t.TempDir()
	clock := &fakeClock{now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	opts := DefaultOptions()
	opts.Clock = clock
	opts.WALSyncMode = WALPeriodic
	var memFS *vfs.MemFS
	if crashes {
		memFS = vfs.NewCrashableMem()
		dir = "/data/model"
		opts.FS = memFS
		opts.WALSyncMode = WALSync
		opts.WALSegmentSize = int64(64<<10 + rng.IntN(1<<20))
	}
	opts.MemtableSize = int64(16<<10 + rng.IntN(64<<10))
	// A tiny cache evicts (and recycles) blocks while reads still use them.
	opts.BlockCacheSize = []int64{32 << 10, 1 << 20, 0}[rng.IntN(3)]
	// Released blocks are overwritten: a read that used a cell's bytes
	// past their lifetime would then differ from the model at once.
	opts.PoisonReleasedBlocks = true
	opts.StallSSTablesPerTable = 1 << 20
	opts.DisableAutoCompaction = rng.IntN(2) == 0
	defs := modelTables()
	open := opener(t, seed, dir, opts, defs)
	db := open()
	defer func() { db.Close() }()
	names := tableNames(db)
	m := newModel(defs)
	const partitions, clusterings = 6, 40
	columns := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	pk := func() []byte { return []byte(fmt.Sprintf("p%d", rng.IntN(partitions))) }
	// Clustering keys are TimeUUID-shaped, 10 bytes: the big-endian
	// version-1 timestamp of "ordinal" seconds after the Unix epoch, then
	// two bytes derived from the ordinal. Blocks then use the fixed-width
	// key encoding and weigh the TimeUUID timestamp predictor.
	ck := func() []byte {
		o := uint64(1 + rng.IntN(clusterings))
		k := binary.BigEndian.AppendUint64(nil, 1<<60|(122_192_928_000_000_000+o*10_000_000))
		return binary.BigEndian.AppendUint16(k, uint16(o*7919))
	}
	// Half the values are small JSON objects, which zstd tables store as
	// shaped values.
	value := func(prefix string) []byte {
		if rng.IntN(2) == 0 {
			return fmt.Appendf(nil, `{"n":%d,"s":"%s%d"}`, rng.IntN(1000), prefix, rng.IntN(50))
		}
		return fmt.Appendf(nil, "%s%d", prefix, rng.IntN(1000))
	}
	bound := func() Bound {
		if rng.IntN(5) == 0 {
			return Bound{}
		}
		return Bound{Key: ck(), Inclusive: rng.IntN(2) == 0}
	}
	// Timestamps follow the clock with jitter below gc_grace, so writes
	// are reordered and tie, but never predate a tombstone old enough to
	// be purged (which would legitimately resurrect them).
	lastTS := int64(0)
	ts := func() int64 {
		if lastTS != 0 && rng.IntN(8) == 0 {
			return lastTS // exact ties exercise the reconciliation rules
		}
		lastTS = clock.Now().UnixMicro() + rng.Int64N(2_000_000) - 1_000_000
		return lastTS
	}
	type lastCell struct {
		table          string
		pk, ck, column []byte
		ts             int64
	}
	var prev lastCell
	deadCounters := map[string]bool{} // partitions of "counts" that were deleted
	// history keeps each partition's mutations as lines (joined only when
	// a check fails) for the failure message.
	history := map[string][]string{}
	var counterMicros int64
	regular := []string{"events", "plain", "shortgc"}

	check := func(q SliceQuery, when string) {
		got, stats := readAll(t, db, q)
		want := m.slice(q, clock.Now().Unix())
		if !slices.EqualFunc(got, want, rowsEqual) {
			t.Logf("history of %s/%s:\n%s", q.Table, q.Partition, strings.Join(history[q.Table+"/"+string(q.Partition)], ""))
			t.Logf("sources:\n%s", dumpPartition(db, q.Table, q.Partition))
			t.Fatalf("seed %d: %s: slice %s/%s start=%x(%v) end=%x(%v) reverse=%v limit=%d differs\n got:\n%s want:\n%s stats: %s",
				seed, when, q.Table, q.Partition, q.Start.Key, q.Start.Inclusive, q.End.Key, q.End.Inclusive, q.Reverse, q.Limit,
				rowsString(got), rowsString(want), stats)
		}
	}

	crashCount := 0
	// final checks every partition of every table, both directions.
	final := func(when string) {
		for _, table := range []string{"events", "plain", "shortgc", "counts"} {
			for p := 0; p < partitions; p++ {
				for _, rev := range []bool{false, true} {
					check(SliceQuery{Table: table, Partition: []byte(fmt.Sprintf("p%d", p)), Reverse: rev}, when)
				}
			}
		}
	}

	for op := 0; op < ops; {
		var b Batch
		n := 1 + rng.IntN(8)
		for i := 0; i < n; i++ {
			op++
			table := regular[rng.IntN(len(regular))]
			switch r := rng.IntN(100); {
			case r < 8 && prev.table != "":
				// Another version of the last cell written, at the same
				// timestamp: every tie rule of the reconciliation
				// (kind, local deletion time, value bytes) gets exercised.
				switch rng.IntN(4) {
				case 0, 1:
					b.Put(prev.table, prev.pk, prev.ck, prev.column, value("v"), prev.ts)
				case 2:
					b.PutTTL(prev.table, prev.pk, prev.ck, prev.column, value("t"), prev.ts, int32(1+rng.IntN(60)))
				default:
					b.DeleteCell(prev.table, prev.pk, prev.ck, prev.column, prev.ts)
				}
			case r < 50:
				prev = lastCell{table: table, pk: pk(), ck: ck(), column: columns[rng.IntN(3)], ts: ts()}
				b.Put(table, prev.pk, prev.ck, prev.column, value("v"), prev.ts)
			case r < 62:
				b.PutTTL(table, pk(), ck(), columns[rng.IntN(3)], value("t"), ts(), int32(1+rng.IntN(60)))
			case r < 70:
				b.DeleteCell(table, pk(), ck(), columns[rng.IntN(3)], ts())
			case r < 76:
				b.DeleteRow(table, pk(), ck(), ts())
			case r < 80:
				b.DeleteRange(table, pk(), bound(), bound(), ts())
			case r < 81:
				b.DeletePartition(table, pk(), ts())
			default:
				p := pk()
				if deadCounters[string(p)] {
					continue
				}
				if rng.IntN(200) == 0 {
					// Deleting at the newest counter time shadows every
					// increment so far; the partition is never used again.
					b.DeletePartition("counts", p, counterMicros+1)
					deadCounters[string(p)] = true
					continue
				}
				b.AddCounter("counts", p, ck(), columns[rng.IntN(3)], int64(rng.IntN(21)-10))
			}
		}
		if b.Len() > 0 {
			if err := db.Apply(context.Background(), &b); err != nil {
				t.Fatalf("seed %d: apply: %v", seed, err)
			}
			for _, mu := range b.mutations {
				k := names[mu.tableID] + "/" + string(mu.partition)
				history[k] = append(history[k], fmt.Sprintf("  now=%d op=%d cell=%x/%s kind=%v ts=%d ldt=%d v=%q range=%x(%v)..%x(%v)@%d pdel=%d\n",
					clock.Now().Unix(), mu.op, mu.cell.Clustering, mu.cell.Column, mu.cell.Kind, mu.cell.Timestamp, mu.cell.LocalDeletionTime, mu.cell.Value,
					mu.rangeTomb.Start.Key, mu.rangeTomb.Start.Inclusive, mu.rangeTomb.End.Key, mu.rangeTomb.End.Inclusive, mu.rangeTomb.Deletion.MarkedForDeleteAt, mu.deletion.MarkedForDeleteAt))
			}
			counterMicros = db.lastCounterMicros.Load()
			m.apply(b.mutations, names)
		}

		switch r := rng.IntN(1000); {
		case r < 150:
			table := []string{"events", "plain", "shortgc", "counts"}[rng.IntN(4)]
			check(SliceQuery{Table: table, Partition: pk(), Start: bound(), End: bound(), Reverse: rng.IntN(2) == 0, Limit: rng.IntN(6)}, fmt.Sprintf("op %d", op))
		case r < 160:
			clock.Advance(time.Duration(rng.IntN(20_000)) * time.Millisecond)
		case r < 168:
			for k := range history {
				history[k] = append(history[k], "  flush\n")
			}
			if err := db.Flush(); err != nil {
				t.Fatalf("seed %d: flush: %v", seed, err)
			}
		case r < 173:
			for k := range history {
				history[k] = append(history[k], "  compact\n")
			}
			if err := db.Compact([]string{"events", "plain", "shortgc", "counts"}[rng.IntN(4)]); err != nil {
				t.Fatalf("seed %d: compact: %v", seed, err)
			}
		case r < 175:
			if err := db.Close(); err != nil {
				t.Fatalf("seed %d: close: %v", seed, err)
			}
			db = open()
		case r < 180 && crashes:
			var writeback *rand.Rand
			if rng.IntN(2) == 0 {
				writeback = rand.New(rand.NewPCG(rng.Uint64(), 1))
			}
			for k := range history {
				history[k] = append(history[k], fmt.Sprintf("  crash (partial writeback %v)\n", writeback != nil))
			}
			crashCount++
			crashed := memFS.CrashClone(writeback)
			db.Close() // on the filesystem before the crash: nothing it does reaches crashed
			memFS = crashed
			opts.FS = memFS
			db = open()
			if err := db.Check(); err != nil {
				t.Fatalf("seed %d: op %d: check after a crash: %v", seed, op, err)
			}
			final(fmt.Sprintf("op %d, after a crash", op))
		}
	}
	// After one more flush and full compaction too.
	final("end")
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	final("after full compaction")
	clock.Advance(time.Hour)
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	final("after expiry and purge")
	if err := db.Check(); err != nil {
		t.Fatalf("seed %d: check: %v", seed, err)
	}
	t.Logf("seed %d: %d ops, %d crashes\n%s", seed, ops, crashCount, db.Metrics())
}

func rowsEqual(a, b Row) bool {
	return bytes.Equal(a.Clustering, b.Clustering) && slices.EqualFunc(a.Cells, b.Cells, func(x, y Cell) bool {
		return bytes.Equal(x.Column, y.Column) && bytes.Equal(x.Value, y.Value) && x.WriteTimeMicros == y.WriteTimeMicros &&
			x.ExpiresAt == y.ExpiresAt && x.TTLSeconds == y.TTLSeconds && x.Counter == y.Counter && x.CounterValue == y.CounterValue
	})
}
