package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSliceOpensLaterSSTablesOnlyWhenReached writes one partition as two
// SSTables, the way TimeWindow leaves an hour that straddles two files,
// and checks that a slice positions (and so reads a block of) the second
// file only when its rows can be among those returned.
func TestSliceOpensLaterSSTablesOnlyWhenReached(t *testing.T) {
	key := func(i int) []byte { return fmt.Appendf(nil, "k%03d", i) }
	tests := []struct {
		name             string
		first, second    [2]int // clustering key ranges [lo, hi] of the two files
		q                SliceQuery
		wantRows         string
		wantRead, wantSk int // SSTables read and skipped
	}{
		{
			name:  "limit met by the first file",
			first: [2]int{0, 9}, second: [2]int{10, 19},
			q:        SliceQuery{Limit: 3},
			wantRows: "k000 k001 k002", wantRead: 1, wantSk: 1,
		},
		{
			name:  "limit met by the file written second",
			first: [2]int{10, 19}, second: [2]int{0, 9},
			q:        SliceQuery{Limit: 3},
			wantRows: "k000 k001 k002", wantRead: 1, wantSk: 1,
		},
		{
			name:  "reverse, limit met by the last file",
			first: [2]int{0, 9}, second: [2]int{10, 19},
			q:        SliceQuery{Limit: 2, Reverse: true},
			wantRows: "k019 k018", wantRead: 1, wantSk: 1,
		},
		{
			name:  "limit crosses into the second file",
			first: [2]int{0, 9}, second: [2]int{10, 19},
			q:        SliceQuery{Limit: 11},
			wantRows: "k000 k001 k002 k003 k004 k005 k006 k007 k008 k009 k010", wantRead: 2,
		},
		{
			// The limit is met at k009, but the merge must look at the
			// next row to know k009 ended: that row is k010.
			name:  "lookahead reaches the second file",
			first: [2]int{0, 9}, second: [2]int{10, 19},
			q:        SliceQuery{Limit: 10},
			wantRows: "k000 k001 k002 k003 k004 k005 k006 k007 k008 k009", wantRead: 2,
		},
		{
			name:  "overlapping files are both read",
			first: [2]int{0, 9}, second: [2]int{1, 19},
			q:        SliceQuery{Limit: 2},
			wantRows: "k000 k001", wantRead: 2,
		},
		{
			name:  "bounds start inside the second file",
			first: [2]int{0, 9}, second: [2]int{10, 19},
			q:        SliceQuery{Start: Bound{Key: key(12), Inclusive: true}, Limit: 2},
			wantRows: "k012 k013", wantRead: 1, wantSk: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
			db := openTestDB(t, clock, TableDef{Name: "t"})
			for _, r := range [][2]int{tc.first, tc.second} {
				apply(t, db, func(b *Batch) {
					for i := r[0]; i <= r[1]; i++ {
						b.Put("t", []byte("p"), key(i), []byte("c"), []byte("v"), int64(100+i))
					}
				})
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			q := tc.q
			q.Table, q.Partition = "t", []byte("p")
			rows, stats := readAll(t, db, q)
			var got []string
			for _, r := range rows {
				got = append(got, string(r.Clustering))
			}
			if g := strings.Join(got, " "); g != tc.wantRows {
				t.Errorf("rows: got %q, want %q", g, tc.wantRows)
			}
			if stats.SSTablesRead != tc.wantRead || stats.SSTablesSkipped != tc.wantSk || stats.BlocksRead != tc.wantRead {
				t.Errorf("got %s, %d SSTables skipped; want %d read (one block each), %d skipped", stats, stats.SSTablesSkipped, tc.wantRead, tc.wantSk)
			}
		})
	}
}

// TestExpiredBlocksSkippedWhenOverlapIsDead writes one partition as two
// SSTables whose edges overlap in clustering keys and write times, as
// consecutive TimeWindow files do with jittered event times, with TTLs
// that have passed for some cells. A fully expired block (or file) may be
// skipped unread only when no live cell written at or before it overlaps
// its clustering range elsewhere: a dead overlap on the other side does
// not count, a live older cell (which the expired one shadows) does.
func TestExpiredBlocksSkippedWhenOverlapIsDead(t *testing.T) {
	const ttl = 60
	key := func(i int) []byte { return fmt.Appendf(nil, "k%03d", i) }
	// 8 cells per 32 KiB block, 4 in a partition's first block (half size).
	value := strings.Repeat("v", 4000)
	type cell struct {
		ck      int
		tsSec   int64 // write time, seconds after the start
		expires bool  // TTL'd (expired at the read) or plain
	}
	// file makes cells for keys [from, from+24): blocks of 4, 8, 8 and 4.
	file := func(from int, tsShift int64, expired func(ck int) bool) []cell {
		var cs []cell
		for i := from; i < from+24; i++ {
			cs = append(cs, cell{ck: i, tsSec: int64(i) + tsShift, expires: expired(i)})
		}
		return cs
	}
	below := func(n int) func(int) bool { return func(ck int) bool { return ck < n } }
	from := func(n int) func(int) bool { return func(ck int) bool { return ck >= n } }
	// Every case: the older file holds k000..k023, the newer k020..k043,
	// its first block k020..k023 expired and the rest live.
	tests := []struct {
		name                 string
		older, newer         []cell
		wantLive             int
		wantBlocks, wantSkip int // blocks read and skipped
		wantSSTablesRead     int
		wantSSTablesExpired  int // SSTables skipped unread as expired
	}{
		{
			// The newer file's times start 3 s before the older file's
			// end (jitter), so the files overlap in keys and times, but
			// everything in the overlap is expired on both sides: the
			// older file is skipped whole, and the newer file's first
			// block too.
			name:  "dead overlap on both sides",
			older: file(0, 0, from(0)), newer: file(20, -3, below(24)),
			wantLive: 20, wantBlocks: 3, wantSkip: 1, wantSSTablesRead: 1, wantSSTablesExpired: 1,
		},
		{
			// As above, but the older file's first two blocks are live:
			// the file is read, its expired last two blocks and the
			// newer file's expired first block are not.
			name:  "dead overlap, live cells elsewhere in both files",
			older: file(0, 0, from(12)), newer: file(20, -3, below(24)),
			wantLive: 32, wantBlocks: 5, wantSkip: 3, wantSSTablesRead: 2,
		},
		{
			// The older file's k020..k023 are live and older than the
			// newer file's expired k020..k023, which shadow them: the
			// expired block must be read.
			name:  "live older cells under the expired overlap",
			older: file(0, 0, from(100)), newer: file(20, 100, below(24)),
			wantLive: 20 + 20, wantBlocks: 8, wantSkip: 0, wantSSTablesRead: 2,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Unix(1_800_000_000, 0)
			clock := &fakeClock{now: start}
			// 32 KiB blocks with a 16 KiB head block, which the
			// layout above is counted in (the default is 16 KiB).
			opts := DefaultOptions()
			opts.Clock = clock
			opts.DisableAutoCompaction = true
			opts.BlockSize = 32 << 10
			db, err := Open(t.TempDir(), opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			if err := db.CreateTable(TableDef{Name: "t"}); err != nil {
				t.Fatal(err)
			}
			for _, cs := range [][]cell{tc.older, tc.newer} {
				apply(t, db, func(b *Batch) {
					for _, c := range cs {
						ts := start.Add(time.Duration(c.tsSec) * time.Second).UnixMicro()
						if c.expires {
							b.PutTTL("t", []byte("p"), key(c.ck), []byte("c"), []byte(value), ts, ttl)
						} else {
							b.Put("t", []byte("p"), key(c.ck), []byte("c"), []byte(value), ts)
						}
					}
				})
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			clock.Advance(time.Hour) // every TTL has passed
			rows, stats := readAll(t, db, SliceQuery{Table: "t", Partition: []byte("p")})
			if len(rows) != tc.wantLive {
				t.Errorf("got %d live rows, want %d:\n%s", len(rows), tc.wantLive, rowsString(rows))
			}
			if stats.BlocksRead != tc.wantBlocks || stats.BlocksSkipped != tc.wantSkip || stats.SSTablesRead != tc.wantSSTablesRead {
				t.Errorf("got %s, %d blocks skipped; want %d blocks read, %d skipped, %d SSTables", stats, stats.BlocksSkipped, tc.wantBlocks, tc.wantSkip, tc.wantSSTablesRead)
			}
			if stats.SSTablesSkippedExpired != tc.wantSSTablesExpired {
				t.Errorf("got %d SSTables skipped as expired, want %d", stats.SSTablesSkippedExpired, tc.wantSSTablesExpired)
			}
		})
	}
}

// TestSliceStopsWhenContextDone checks a slice checks its context while it
// scans, not only when it starts: cancelled after the first row, it stops
// within a few hundred cells with an error wrapping context.Canceled.
func TestSliceStopsWhenContextDone(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	db := openTestDB(t, clock, TableDef{Name: "t"})
	const rows = 5000
	apply(t, db, func(b *Batch) {
		for i := range rows {
			b.Put("t", []byte("p"), fmt.Appendf(nil, "k%05d", i), []byte("c"), []byte("v"), 1)
		}
	})
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Slice(canceledContext(), SliceQuery{Table: "t", Partition: []byte("p")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Slice with a cancelled context: got %v, want context.Canceled", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	it, err := db.Slice(ctx, SliceQuery{Table: "t", Partition: []byte("p")})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for it.Next() {
		if n++; n == 1 {
			cancel()
		}
	}
	err = it.Close()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v after %d rows, want context.Canceled", err, n)
	}
	if n > ctxCheckInterval+1 {
		t.Fatalf("read %d rows after the context was cancelled, want at most %d", n-1, ctxCheckInterval)
	}
	if !strings.Contains(err.Error(), `partition "p" of table "t"`) {
		t.Errorf("error %q does not name the partition and table", err)
	}
}

func canceledContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// TestSliceSkipsSSTablesByBloomFilter checks reads consult the bloom filter
// before the partition index: a partition absent from 5 SSTables is ruled
// out by their filters (bar false positives), one present in all of them
// never is. Without the filter the answers would be the same, only slower,
// so SSTablesSkippedByBloom is what shows it is used.
func TestSliceSkipsSSTablesByBloomFilter(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	db := openTestDB(t, clock, TableDef{Name: "t"})
	const files, partitions, probes = 5, 100, 40
	for f := range files {
		apply(t, db, func(b *Batch) {
			for p := range partitions {
				b.Put("t", fmt.Appendf(nil, "p%03d", p), []byte("k"), []byte("c"), []byte("v"), int64(f+1))
			}
		})
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	var absent ReadStats
	for i := range probes {
		rows, stats := readAll(t, db, SliceQuery{Table: "t", Partition: fmt.Appendf(nil, "absent%03d", i)})
		if len(rows) != 0 || stats.SSTablesRead != 0 || stats.SSTablesSkipped != files {
			t.Fatalf("absent partition: %d rows, %s", len(rows), stats)
		}
		absent.SSTablesSkippedByBloom += stats.SSTablesSkippedByBloom
	}
	// The filters are sized for about 1% false positives.
	if got, min := absent.SSTablesSkippedByBloom, files*probes*9/10; got < min {
		t.Errorf("%d of %d lookups of absent partitions were ruled out by the bloom filter, want at least %d", got, files*probes, min)
	}
	rows, stats := readAll(t, db, SliceQuery{Table: "t", Partition: []byte("p007")})
	if len(rows) != 1 || stats.SSTablesSkippedByBloom != 0 {
		t.Errorf("present partition: %d rows, %d SSTables skipped by bloom filter (false negative)", len(rows), stats.SSTablesSkippedByBloom)
	}
}

// TestReadStatsCachedBlocksAndIndexPages checks the trace's split of the
// blocks a read touched into cached and read from the file, and its count
// of index pages read from the file: a cold read of a reopened store finds
// nothing cached, the same read again finds everything.
func TestReadStatsCachedBlocksAndIndexPages(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cacheSize int64
		// pagesRead is what the cold read reads of index pages from the
		// file: none when Open pinned them (the default cache's budget
		// has room), one when the budget is too small to pin (a cache
		// of 4 KiB, which holds the page but none of the 32 KiB blocks).
		pagesRead int
	}{
		{"pinned", 0, 0},
		{"not pinned", 4 << 10, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
			dir := t.TempDir()
			tweak := func(o *Options) {
				if tc.cacheSize > 0 {
					o.BlockCacheSize = tc.cacheSize
				}
			}
			db := openTestDBIn(t, dir, clock, tweak, TableDef{Name: "t"})
			value := []byte(strings.Repeat("v", 200))
			apply(t, db, func(b *Batch) {
				for i := range 1000 {
					b.Put("t", []byte("p"), fmt.Appendf(nil, "k%04d", i), []byte("c"), value, int64(100+i))
				}
			})
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = openTestDBIn(t, dir, clock, tweak)
			if m := db.Metrics(); (m.BlockCachePinnedIndexBytes > 0) != (tc.pagesRead == 0) {
				t.Fatalf("%d bytes of index pages pinned, want pinned: %v", m.BlockCachePinnedIndexBytes, tc.pagesRead == 0)
			}
			q := SliceQuery{Table: "t", Partition: []byte("p")}
			rows, cold := readAll(t, db, q)
			if len(rows) != 1000 {
				t.Fatalf("got %d rows, want 1000", len(rows))
			}
			if cold.BlocksRead < 2 || cold.BlocksCached != 0 || cold.IndexPagesRead != tc.pagesRead {
				t.Fatalf("cold read: got %d blocks, %d cached, %d index pages from the file; want >= 2, 0, %d (%s)",
					cold.BlocksRead, cold.BlocksCached, cold.IndexPagesRead, tc.pagesRead, cold)
			}
			_, warm := readAll(t, db, q)
			wantCached := cold.BlocksRead
			if tc.cacheSize > 0 {
				wantCached = 0
			}
			if warm.BlocksRead != cold.BlocksRead || warm.BlocksCached != wantCached || warm.IndexPagesRead != 0 {
				t.Fatalf("warm read: got %d blocks, %d cached, %d index pages from the file; want %d, %d, 0 (%s)",
					warm.BlocksRead, warm.BlocksCached, warm.IndexPagesRead, cold.BlocksRead, wantCached, warm)
			}
		})
	}
}

// TestSliceAllocations checks that a slice of one SSTable's cached block
// allocates a constant handful of objects: the scan, with what it sets up
// for one source (the SSTable's iterator and candidate included), comes
// from a pool, so what is left is the RowIterator handle and the block
// filter's closure; the rows' cells reuse two arrays.
func TestSliceAllocations(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	db := openTestDB(t, clock, TableDef{Name: "t"})
	const rows = 50
	apply(t, db, func(b *Batch) {
		for i := range rows {
			b.Put("t", []byte("p"), fmt.Appendf(nil, "k%03d", i), []byte("c"), []byte("v"), int64(100+i))
		}
	})
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	q := SliceQuery{Table: "t", Partition: []byte("p")}
	read := func() {
		if n, _ := countSlice(t, db, q); n != rows {
			t.Fatalf("read %d cells, want %d", n, rows)
		}
	}
	read() // the block into the cache
	allocs := testing.AllocsPerRun(20, read)
	t.Logf("%.1f allocations per slice", allocs)
	if allocs > 3 {
		t.Errorf("a cached one-block slice allocates %.0f objects, want at most 3", allocs)
	}
}

// TestSliceScanReuse checks the pooled scan's lifetime: a finished
// iterator keeps its final stats and error and hands out no row, closing
// it twice is harmless, and iterators open at the same time (the pool
// hands a scan to the next read as soon as one finishes) never see each
// other's rows.
func TestSliceScanReuse(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	db := openTestDB(t, clock, TableDef{Name: "t"})
	apply(t, db, func(b *Batch) {
		for p := range 3 {
			for i := range 5 {
				b.Put("t", fmt.Appendf(nil, "p%d", p), fmt.Appendf(nil, "k%03d", i), []byte("c"), fmt.Appendf(nil, "p%d-v%d", p, i), int64(100+i))
			}
		}
	})
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	open := func(p int) Rows {
		it, err := db.Slice(context.Background(), SliceQuery{Table: "t", Partition: fmt.Appendf(nil, "p%d", p)})
		if err != nil {
			t.Fatal(err)
		}
		return it
	}
	a, b := open(0), open(1)
	// Interleave: a row of each in turn; finish a early and start c,
	// which may get a's scan, while b is still open.
	for i := range 5 {
		for _, x := range []struct {
			it Rows
			p  int
		}{{a, 0}, {b, 1}} {
			if !x.it.Next() {
				t.Fatalf("p%d: no row %d: %v", x.p, i, x.it.Err())
			}
			if got, want := string(x.it.Row().Cells[0].Value), fmt.Sprintf("p%d-v%d", x.p, i); got != want {
				t.Fatalf("p%d row %d: value %q, want %q", x.p, i, got, want)
			}
		}
	}
	if a.Next() {
		t.Fatal("p0: a sixth row")
	}
	stats := a.Stats()
	if stats.Rows != 5 || stats.LiveCells != 5 {
		t.Fatalf("finished p0 read: stats %s, want 5 rows and 5 live cells", stats)
	}
	if row := a.Row(); row.Clustering != nil || len(row.Cells) != 0 {
		t.Fatalf("finished p0 read: Row() = %+v, want an empty row", row)
	}
	c := open(2)
	if !c.Next() || string(c.Row().Cells[0].Value) != "p2-v0" {
		t.Fatalf("p2 first row: %+v, %v", c.Row(), c.Err())
	}
	if a.Stats() != stats || a.Err() != nil || a.Next() {
		t.Fatalf("p0 after p2 started: stats %s (was %s), err %v", a.Stats(), stats, a.Err())
	}
	for _, it := range []Rows{a, a, b, c, c} {
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if s := b.Stats(); s.Rows != 5 {
		t.Fatalf("p1 closed after 5 rows: stats %s", s)
	}
	if s := c.Stats(); s.Rows != 1 {
		t.Fatalf("p2 closed after its first row: stats %s", s)
	}
}

// TestSliceAllocationsSeveralSources checks that a slice merging a
// memtable and three SSTables allocates no arrays for its sources: the
// pooled scan keeps those an earlier read grew (scanSpares), and the
// SSTables' iterators too. What is left is the RowIterator handle, the
// memtable's iterator, one block filter closure per SSTable and a few
// small ones: 8, against 17 when the scan kept nothing.
func TestSliceAllocationsSeveralSources(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops pooled items at random")
	}
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	db := openTestDB(t, clock, TableDef{Name: "t"})
	const perSource = 10
	for src := range 4 {
		apply(t, db, func(b *Batch) {
			for i := range perSource {
				b.Put("t", []byte("p"), fmt.Appendf(nil, "k%d-%03d", src, i), []byte("c"), []byte("v"), int64(100+i))
			}
		})
		if src < 3 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	q := SliceQuery{Table: "t", Partition: []byte("p")}
	read := func() {
		if n, s := countSlice(t, db, q); n != 4*perSource || s.SSTablesRead != 3 || s.MemtablesRead != 1 {
			t.Fatalf("read %d cells from %d SSTables and %d memtables, want %d from 3 and 1", n, s.SSTablesRead, s.MemtablesRead, 4*perSource)
		}
	}
	read() // the blocks into the cache, the arrays into the pooled scan
	allocs := testing.AllocsPerRun(20, read)
	t.Logf("%.1f allocations per slice of 4 sources", allocs)
	if allocs > 8 {
		t.Errorf("a cached slice of a memtable and 3 SSTables allocates %.0f objects, want at most 8", allocs)
	}
}

// countSlice runs q and returns how many cells it read and the read's
// stats.
func countSlice(t *testing.T, db *DB, q SliceQuery) (int, ReadStats) {
	t.Helper()
	it, err := db.Slice(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for it.Next() {
		n += len(it.Row().Cells)
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return n, it.Stats()
}

// TestUnclosedSliceIsReleased drops a slice after one row, neither read
// to the end nor closed. Its snapshot pinned the SSTable it read, so a
// compaction that replaced the SSTable could not delete it; once the
// garbage collector finds the iterator unreachable, the scan is released:
// the file goes, the read is counted in UnclosedReads and logged.
func TestUnclosedSliceIsReleased(t *testing.T) {
	db, logged, sstables := openWithTwoSSTables(t)
	before := sstables()
	if len(before) != 2 {
		t.Fatalf("want 2 SSTables before the compaction, found %v", before)
	}
	dropped, err := db.Slice(context.Background(), SliceQuery{Table: "t", Partition: []byte("p")})
	if err != nil {
		t.Fatal(err)
	}
	if !dropped.Next() {
		t.Fatalf("no row: %v", dropped.Err())
	}
	// Dropped by drop: neither read to the end nor closed.
	drop := func() { dropped = nil }
	compactUntilReleased(t, db, logged, sstables, "slice", drop, func(m Metrics) int64 { return m.UnclosedReads })
	// The store reads on as before.
	it, err := db.Slice(context.Background(), SliceQuery{Table: "t", Partition: []byte("p")})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for it.Next() {
		n++
	}
	if err := it.Close(); err != nil || n != 5 {
		t.Fatalf("read %d rows after the release (err %v), want 5", n, err)
	}
	if got := db.Metrics().UnclosedReads; got != 1 {
		t.Errorf("UnclosedReads %d after closed reads, want 1", got)
	}
}

// syncLog is a log destination the engine's goroutines and the test can
// share.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestUnclosedSnapshotIsReleased drops a Snapshot without Close. It
// pinned the SSTables it was taken over, so a compaction that replaced
// them could not delete them; once the garbage collector finds the
// snapshot unreachable, its version is released: the files go, the
// snapshot is counted in UnclosedSnapshots and logged. A closed snapshot
// is not counted.
func TestUnclosedSnapshotIsReleased(t *testing.T) {
	db, logged, sstables := openWithTwoSSTables(t)
	closed, err := db.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	snap, err := db.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Dropped by drop, without Close.
	held := []*Snapshot{snap}
	snap = nil
	drop := func() { held[0] = nil }
	compactUntilReleased(t, db, logged, sstables, "snapshot", drop, func(m Metrics) int64 { return m.UnclosedSnapshots })
	runtime.GC()
	if got := db.Metrics().UnclosedSnapshots; got != 1 {
		t.Errorf("UnclosedSnapshots %d, want 1 (the closed snapshot must not count)", got)
	}
}

// openWithTwoSSTables opens a store logging to logged, with 5 rows of
// partition "p" of table "t" written twice, each round flushed to an
// SSTable of its own; sstables lists the store's SSTable files.
func openWithTwoSSTables(t *testing.T) (db *DB, logged *syncLog, sstables func() []string) {
	t.Helper()
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	logged = new(syncLog)
	dir := t.TempDir()
	db = openTestDBIn(t, dir, clock, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(logged, nil))
	}, TableDef{Name: "t"})
	for round := range 2 {
		apply(t, db, func(b *Batch) {
			for i := range 5 {
				b.Put("t", []byte("p"), fmt.Appendf(nil, "k%03d", i), []byte("c"), fmt.Appendf(nil, "v%d-%d", round, i), int64(100+10*round+i))
			}
		})
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	sstables = func() []string {
		names, err := filepath.Glob(filepath.Join(dir, "*.sst"))
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	return db, logged, sstables
}

// compactUntilReleased compacts the two SSTables of openWithTwoSSTables
// while an unclosed what ("slice" or "snapshot") pins them: they must stay
// beside the compaction's output; then drop makes it unreachable, and
// once the garbage collector releases it they must go, with unclosed
// counting 1 and the release logged.
func compactUntilReleased(t *testing.T, db *DB, logged *syncLog, sstables func() []string, what string, drop func(), unclosed func(Metrics) int64) {
	t.Helper()
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	if got := sstables(); len(got) != 3 {
		t.Fatalf("while the unclosed %s is reachable its two SSTables must stay beside the compaction's output; found %v", what, got)
	}
	// Only now unreachable: dropped before the compaction, a collection
	// during it could release it early and the check above would fail.
	drop()
	deadline := time.Now().Add(10 * time.Second)
	for len(sstables()) != 1 || unclosed(db.Metrics()) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the unclosed %s was not released: SSTables %v (want the compaction's output only), counted unclosed %d (want 1)", what, sstables(), unclosed(db.Metrics()))
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if want := "a " + what + " was never closed"; !strings.Contains(logged.String(), want) {
		t.Errorf("the release was not logged (%q); the log:\n%s", want, logged.String())
	}
}
