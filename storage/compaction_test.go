package storage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestPickSizeTiered(t *testing.T) {
	mk := func(sizes ...int64) []*sstHandle {
		var out []*sstHandle
		for i, s := range sizes {
			out = append(out, &sstHandle{fileNum: uint64(i + 1), size: s})
		}
		return out
	}
	const mb = 1 << 20
	cases := []struct {
		name  string
		sizes []int64
		min   int
		max   int
		want  int // inputs picked; 0 = none
	}{
		{"too few", []int64{1, 2, 3}, 4, 32, 0},
		{"small files share a bucket", []int64{1, 2 * mb, 3 * mb, 3*mb + mb/2}, 4, 32, 4},
		{"a large file is not merged with new flushes", []int64{2 * mb, 2 * mb, 3 * mb, 40 * mb}, 4, 32, 0},
		{"files merge with their own tier", []int64{2 * mb, 3 * mb, 2 * mb, 9 * mb, 10 * mb, 11 * mb, 9 * mb}, 4, 32, 4},
		{"dissimilar large files", []int64{100 * mb, 400 * mb, 1600 * mb, 6400 * mb}, 2, 32, 0},
		{"similar large files", []int64{100 * mb, 110 * mb, 120 * mb, 6400 * mb}, 3, 32, 3},
		{"capped at max", []int64{1, 1, 1, 1, 1, 1}, 2, 4, 4},
	}
	for _, tc := range cases {
		got := pickSizeTiered(mk(tc.sizes...), tc.min, tc.max)
		if len(got) != tc.want {
			t.Errorf("%s: picked %d, want %d", tc.name, len(got), tc.want)
		}
	}
}

// TestTimeWindowDropsExpiredSSTables writes two windows of TTL'd data,
// lets the older one expire past gc_grace, and expects compaction to drop
// its SSTable whole while the newer one stays readable.
func TestTimeWindowDropsExpiredSSTables(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	db := openTestDB(t, clock, TableDef{Name: "ev", Compaction: TimeWindow, WindowSeconds: 3600, DefaultTTLSeconds: 600, GCGraceSeconds: int64p(60)})
	write := func(pk string, n int) {
		apply(t, db, func(b *Batch) {
			for i := 0; i < n; i++ {
				b.Put("ev", []byte(pk), []byte(fmt.Sprintf("%04d", i)), []byte("d"), []byte("x"), db.NowMicros()+int64(i))
			}
		})
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	write("old", 100)
	clock.Advance(2 * time.Hour) // the old data is expired and past gc_grace
	write("new", 10)
	if err := db.Compact("ev"); err != nil {
		t.Fatal(err)
	}
	m := db.Metrics()
	if m.DroppedSSTables != 1 {
		t.Fatalf("dropped %d SSTables, want 1\n%s", m.DroppedSSTables, m)
	}
	if m.Tables[0].SSTables != 1 {
		t.Fatalf("%d SSTables left, want 1\n%s", m.Tables[0].SSTables, m)
	}
	rows, _ := readAll(t, db, SliceQuery{Table: "ev", Partition: []byte("new")})
	if len(rows) != 10 {
		t.Fatalf("new partition has %d rows, want 10", len(rows))
	}
}

// TestExpiredSSTableSkippedOnRead checks the read path skips an SSTable
// whose every cell has expired when nothing older could be shadowed.
func TestExpiredSSTableSkippedOnRead(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	db := openTestDB(t, clock, TableDef{Name: "ev", Compaction: TimeWindow, DefaultTTLSeconds: 60})
	apply(t, db, func(b *Batch) {
		b.Put("ev", []byte("p"), []byte("a"), []byte("d"), []byte("old"), db.NowMicros())
	})
	db.Flush()
	clock.Advance(2 * time.Minute)
	apply(t, db, func(b *Batch) {
		b.Put("ev", []byte("p"), []byte("b"), []byte("d"), []byte("new"), db.NowMicros())
	})
	db.Flush()
	rows, stats := readAll(t, db, SliceQuery{Table: "ev", Partition: []byte("p")})
	if len(rows) != 1 || string(rows[0].Clustering) != "b" {
		t.Fatalf("got %s", rowsString(rows))
	}
	if stats.SSTablesRead != 1 || stats.SSTablesSkipped != 1 || stats.TombstonesScanned != 0 {
		t.Fatalf("want the expired SSTable skipped unread, got %s (skipped %d)", stats, stats.SSTablesSkipped)
	}
}

func TestTombstoneLimit(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	db := openTestDB(t, clock, TableDef{Name: "t"})
	apply(t, db, func(b *Batch) {
		for i := 0; i < 50; i++ {
			b.DeleteCell("t", []byte("p"), []byte(fmt.Sprintf("%03d", i)), []byte("c"), 1)
		}
	})
	it, err := db.Slice(context.Background(), SliceQuery{Table: "t", Partition: []byte("p"), MaxTombstones: 10})
	if err != nil {
		t.Fatal(err)
	}
	for it.Next() {
	}
	err = it.Close()
	if err == nil || !strings.Contains(err.Error(), `partition "p"`) {
		t.Fatalf("want ErrTooManyTombstones naming the partition, got %v", err)
	}
}

func TestMetricsLintAndTable(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	opts := DefaultOptions()
	opts.Clock = clock
	opts.Registerer = reg
	db, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.CreateTable(TableDef{Name: "t"}); err != nil {
		t.Fatal(err)
	}
	apply(t, db, func(b *Batch) { b.Put("t", []byte("p"), []byte("a"), []byte("c"), []byte("v"), 1) })
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
	if n := testutil.CollectAndCount(reg, "eventide_storage_flushes_total"); n != 1 {
		t.Errorf("flushes metric count %d", n)
	}
	s := db.Metrics().String()
	if !strings.Contains(s, "t ") || !strings.Contains(s, "flushes 1") {
		t.Errorf("Metrics table lacks the table or the flush:\n%s", s)
	}
}

// TestCompactionRemovesInputFiles checks that the files a compaction
// replaced are deleted from disk, not merely dropped from the manifest.
func TestCompactionRemovesInputFiles(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	db := openTestDB(t, clock, TableDef{Name: "t"})
	for i := 0; i < 3; i++ {
		apply(t, db, func(b *Batch) { b.Put("t", []byte("p"), []byte{byte(i)}, []byte("c"), []byte("v"), 1) })
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Compact("t"); err != nil {
		t.Fatal(err)
	}
	names, err := db.opts.FS.List(db.dir)
	if err != nil {
		t.Fatal(err)
	}
	var ssts []string
	for _, n := range names {
		if strings.HasSuffix(n, sstableSuffix) {
			ssts = append(ssts, n)
		}
	}
	if len(ssts) != 1 {
		t.Fatalf("after compacting 3 SSTables into 1, the directory holds %v", ssts)
	}
}

// TestDiskBytesMetrics checks the gauges of bytes on disk match the files:
// eventide_storage_sstable_bytes per table against its .sst files, and
// eventide_storage_wal_bytes against the WAL directory.
func TestDiskBytesMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	dir := t.TempDir()
	opts := DefaultOptions()
	opts.Clock = &fakeClock{now: time.Unix(1_800_000_000, 0)}
	opts.Registerer = reg
	opts.DisableAutoCompaction = true
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, name := range []string{"a", "b"} {
		if err := db.CreateTable(TableDef{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	fileBytes := func(glob string) float64 {
		matches, err := filepath.Glob(filepath.Join(dir, glob))
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, m := range matches {
			fi, err := os.Stat(m)
			if err != nil {
				t.Fatal(err)
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && strings.HasPrefix(glob, "wal/") {
				n += st.Blocks * 512 // segments are sparse: see DB.walBytes
			} else {
				n += fi.Size()
			}
		}
		return float64(n)
	}
	gauge := func(name, table string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				if table == "" || len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == table {
					return m.GetGauge().GetValue()
				}
			}
		}
		t.Fatalf("no metric %s{table=%q}", name, table)
		return 0
	}
	apply(t, db, func(b *Batch) {
		for i := range 200 {
			b.Put("a", []byte("p"), fmt.Appendf(nil, "k%03d", i), []byte("c"), []byte("some value"), 1)
		}
	})
	if got, want := gauge("eventide_storage_wal_bytes", ""), fileBytes("wal/*"); got != want || got == 0 {
		t.Errorf("wal bytes %v, files %v", got, want)
	}
	// 200 small cells take a few KiB, not the segment's preallocated size.
	if got := gauge("eventide_storage_wal_bytes", ""); got >= float64(opts.WALSegmentSize)/2 {
		t.Errorf("wal bytes %v after a few KiB of writes: the preallocated size (%d), not bytes on disk", got, opts.WALSegmentSize)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	apply(t, db, func(b *Batch) { b.Put("b", []byte("p"), []byte("k"), []byte("c"), []byte("v"), 1) })
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	a, b := gauge("eventide_storage_sstable_bytes", "a"), gauge("eventide_storage_sstable_bytes", "b")
	if all := fileBytes("*.sst"); a == 0 || b == 0 || a+b != all {
		t.Errorf("sstable bytes a=%v b=%v, files on disk %v", a, b, all)
	}
	if got, want := gauge("eventide_storage_wal_bytes", ""), fileBytes("wal/*"); got != want {
		t.Errorf("after flushes: wal bytes %v, files %v", got, want)
	}
	if s := db.Metrics().String(); !strings.Contains(s, fmt.Sprintf("wal: %d bytes", int64(fileBytes("wal/*")))) {
		t.Errorf("Metrics table lacks the WAL bytes:\n%s", s)
	}
}
