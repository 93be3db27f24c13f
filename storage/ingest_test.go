package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/eventide/eventide/storage/vfs"
)

// exportTables are the tables of the export and ingest tests: a time
// series split by hour, a counter table and a checkpoint-like table.
var exportTables = []TableDef{
	{Name: "ev", Compaction: TimeWindow, WindowSeconds: 3600},
	{Name: "cnt", Counters: true},
	{Name: "ck"},
}

func openExportStore(t *testing.T, dir string, fsys vfs.FS) *DB {
	t.Helper()
	opts := DefaultOptions()
	if fsys != nil {
		opts.FS = fsys
	}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, def := range exportTables {
		if err := db.CreateTable(def); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

const hourMicros = int64(3600e6)

// fillExportSource writes partitions p0..p5 of ev over three hours and of
// cnt (counted in several batches and flushes, so the counters are spread
// over SSTables), and deletes one row of p2.
func fillExportSource(t *testing.T, db *DB) {
	t.Helper()
	ctx := context.Background()
	base := 1_800_000_000 * int64(1e6)
	for round := range 3 {
		var b Batch
		for p := range 6 {
			pk := fmt.Appendf(nil, "p%d", p)
			for h := range 3 {
				ck := fmt.Appendf(nil, "r%d-%d", h, round)
				b.Put("ev", pk, ck, []byte("v"), fmt.Appendf(nil, "%s/%s", pk, ck), base+int64(h)*hourMicros+int64(round))
			}
			b.AddCounter("cnt", pk, []byte("m"), []byte("count"), int64(p+1))
		}
		if err := db.Apply(ctx, &b); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	var b Batch
	b.DeleteRow("ev", []byte("p2"), []byte("r1-1"), base+3*hourMicros)
	if err := db.Apply(ctx, &b); err != nil {
		t.Fatal(err)
	}
}

func keepEven(partition, _ []byte) bool { return (partition[len(partition)-1]-'0')%2 == 0 }

// partitionsString reads partitions p0..p5 of table.
func partitionsString(t *testing.T, db *DB, table string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for p := range 6 {
		pk := fmt.Sprintf("p%d", p)
		rows, _ := readAll(t, db, SliceQuery{Table: table, Partition: []byte(pk)})
		if len(rows) > 0 {
			out[pk] = rowsString(rows)
		}
	}
	return out
}

// exportAll exports ev and cnt of a snapshot of db to dir, keeping the
// even partitions.
func exportAll(t *testing.T, db *DB, dir string) []IngestSSTable {
	t.Helper()
	snap, err := db.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	var files []IngestSSTable
	for _, table := range []string{"ev", "cnt"} {
		outs, err := snap.ExportTable(context.Background(), dir, table, 1, keepEven)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range outs {
			files = append(files, IngestSSTable{Table: table, Path: filepath.Join(dir, o.Name)})
		}
	}
	return files
}

func checkpointBatch(seq int64) *Batch {
	var b Batch
	b.Put("ck", []byte("consumer"), nil, []byte("seq"), fmt.Appendf(nil, "%d", seq), seq)
	return &b
}

// TestExportIngest: the partitions an export keeps read the same in the
// store that ingests them as in the snapshot they came from (rows,
// deletions, counter sums), the others are absent, writes after the
// snapshot are not exported, a time-window table is split by window, and
// the ingested batch is there, after a reopen too.
func TestExportIngest(t *testing.T) {
	src := openExportStore(t, t.TempDir(), nil)
	defer src.Close()
	fillExportSource(t, src)
	wantEv, wantCnt := partitionsString(t, src, "ev"), partitionsString(t, src, "cnt")

	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Written after the snapshot: not exported.
	var late Batch
	late.Put("ev", []byte("p0"), []byte("late"), []byte("v"), []byte("late"), 1_900_000_000*int64(1e6))
	late.AddCounter("cnt", []byte("p0"), []byte("m"), []byte("count"), 100)
	if err := src.Apply(context.Background(), &late); err != nil {
		t.Fatal(err)
	}
	if err := src.Flush(); err != nil {
		t.Fatal(err)
	}
	exportDir := t.TempDir()
	var files []IngestSSTable
	for _, table := range []string{"ev", "cnt"} {
		outs, err := snap.ExportTable(context.Background(), exportDir, table, 1, keepEven)
		if err != nil {
			t.Fatal(err)
		}
		// Three hours of cells, and p2's deletion in the fourth.
		if table == "ev" && len(outs) != 4 {
			t.Errorf("ev exported to %d files, want one per hour window (4): %+v", len(outs), outs)
		}
		for _, o := range outs {
			files = append(files, IngestSSTable{Table: table, Path: filepath.Join(exportDir, o.Name)})
		}
	}
	snap.Close()
	if names, _ := filepath.Glob(filepath.Join(exportDir, "*"+tmpSuffix)); len(names) > 0 {
		t.Errorf("export left temporary files: %v", names)
	}

	dstDir := t.TempDir()
	dst := openExportStore(t, dstDir, nil)
	// The destination already holds another partition.
	var own Batch
	own.Put("ev", []byte("p1"), []byte("mine"), []byte("v"), []byte("mine"), 1)
	if err := dst.Apply(context.Background(), &own); err != nil {
		t.Fatal(err)
	}
	if err := dst.Ingest(files, checkpointBatch(42)); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		gotEv, gotCnt := partitionsString(t, dst, "ev"), partitionsString(t, dst, "cnt")
		for p := range 6 {
			pk := fmt.Sprintf("p%d", p)
			switch {
			case p%2 == 0:
				if gotEv[pk] != wantEv[pk] || gotCnt[pk] != wantCnt[pk] {
					t.Errorf("%s after the ingest:\nev %s\ncnt %s\nwant\nev %s\ncnt %s", pk, gotEv[pk], gotCnt[pk], wantEv[pk], wantCnt[pk])
				}
			case p == 1:
				if !strings.Contains(gotEv[pk], `"mine"`) || strings.Contains(gotEv[pk], "r0-0") {
					t.Errorf("p1 after the ingest: %s, want only the destination's own row", gotEv[pk])
				}
			default:
				if gotEv[pk] != "" || gotCnt[pk] != "" {
					t.Errorf("%s, filtered out, reads ev %q cnt %q after the ingest", pk, gotEv[pk], gotCnt[pk])
				}
			}
		}
		rows, _ := readAll(t, dst, SliceQuery{Table: "ck", Partition: []byte("consumer")})
		if len(rows) != 1 || string(rows[0].Cells[0].Value) != "42" {
			t.Errorf("ingested batch reads %s, want seq 42", rowsString(rows))
		}
		if err := dst.Check(); err != nil {
			t.Error(err)
		}
	}
	check()
	if !strings.Contains(wantEv["p2"], "r1-0") || strings.Contains(wantEv["p2"], "r1-1") {
		t.Fatalf("the source's p2 does not show the deleted row deleted: %s", wantEv["p2"])
	}
	dst.Close()
	dst = openExportStore(t, dstDir, nil)
	defer dst.Close()
	check()
}

// TestIngestCorruptSSTable: a flipped byte in an exported file fails the
// ingest with ErrCorruption, and the store installs none of the files nor
// the batch, and keeps no copy.
func TestIngestCorruptSSTable(t *testing.T) {
	src := openExportStore(t, t.TempDir(), nil)
	defer src.Close()
	fillExportSource(t, src)
	files := exportAll(t, src, t.TempDir())
	if len(files) < 2 {
		t.Fatalf("exported %d files, want several", len(files))
	}
	victim := files[len(files)/2].Path
	b, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0x40
	if err := os.WriteFile(victim, b, 0o640); err != nil {
		t.Fatal(err)
	}
	dstDir := t.TempDir()
	dst := openExportStore(t, dstDir, nil)
	defer dst.Close()
	before, _ := filepath.Glob(filepath.Join(dstDir, "*"))
	err = dst.Ingest(files, checkpointBatch(7))
	if !errors.Is(err, ErrCorruption) {
		t.Fatalf("ingest of a corrupt file: %v, want ErrCorruption", err)
	}
	if !strings.Contains(err.Error(), victim) {
		t.Errorf("the error does not name the corrupt file %s: %v", victim, err)
	}
	if got := partitionsString(t, dst, "ev"); len(got) != 0 {
		t.Errorf("after a failed ingest the store reads %v", got)
	}
	if rows, _ := readAll(t, dst, SliceQuery{Table: "ck", Partition: []byte("consumer")}); len(rows) != 0 {
		t.Errorf("after a failed ingest the batch reads %s", rowsString(rows))
	}
	after, _ := filepath.Glob(filepath.Join(dstDir, "*"))
	if !slices.Equal(before, after) {
		t.Errorf("a failed ingest left files: before %v, after %v", before, after)
	}
}

// recordingFS takes the crash image of a MemFS after each operation that
// changes it while on: every state a crash during those operations can
// leave.
type recordingFS struct {
	*vfs.MemFS
	mu     sync.Mutex
	on     bool
	images []*vfs.MemFS
}

func (r *recordingFS) record() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on {
		r.images = append(r.images, r.MemFS.CrashClone(nil))
	}
}

func (r *recordingFS) Create(name string) (vfs.File, error) {
	f, err := r.MemFS.Create(name)
	r.record()
	if err != nil {
		return nil, err
	}
	return &recordingFile{File: f, r: r}, nil
}

func (r *recordingFS) Rename(a, b string) error  { defer r.record(); return r.MemFS.Rename(a, b) }
func (r *recordingFS) Remove(name string) error  { defer r.record(); return r.MemFS.Remove(name) }
func (r *recordingFS) SyncDir(name string) error { defer r.record(); return r.MemFS.SyncDir(name) }

type recordingFile struct {
	vfs.File
	r *recordingFS
}

func (f *recordingFile) Sync() error { defer f.r.record(); return f.File.Sync() }

// TestIngestCrashAtomic: a crash at any point of an ingest leaves a store
// that holds either none of the ingested data and batch, or all of it.
func TestIngestCrashAtomic(t *testing.T) {
	src := openExportStore(t, t.TempDir(), nil)
	defer src.Close()
	fillExportSource(t, src)
	want := partitionsString(t, src, "ev")
	exportDir := t.TempDir()
	files := exportAll(t, src, exportDir)

	fsys := &recordingFS{MemFS: vfs.NewCrashableMem()}
	// The export lives on the same filesystem as the store.
	if err := fsys.MkdirAll("/export", 0o755); err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		b, err := os.ReadFile(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		out, err := fsys.Create(filepath.Join("/export", filepath.Base(f.Path)))
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b)
		out.Sync()
		out.Close()
		files[i].Path = filepath.Join("/export", filepath.Base(f.Path))
	}
	fsys.SyncDir("/export")
	db := openExportStore(t, "/store", fsys)
	fsys.mu.Lock()
	fsys.on = true
	fsys.mu.Unlock()
	if err := db.Ingest(files, checkpointBatch(9)); err != nil {
		t.Fatal(err)
	}
	fsys.mu.Lock()
	fsys.on = false
	images := fsys.images
	fsys.mu.Unlock()
	db.Close()
	if len(images) < 5 {
		t.Fatalf("only %d crash points recorded", len(images))
	}
	var none, all int
	for i, img := range images {
		db := openExportStore(t, "/store", img)
		got := partitionsString(t, db, "ev")
		rows, _ := readAll(t, db, SliceQuery{Table: "ck", Partition: []byte("consumer")})
		switch {
		case len(got) == 0 && len(rows) == 0:
			none++
		case len(rows) == 1 && fmt.Sprint(got) == fmt.Sprint(map[string]string{"p0": want["p0"], "p2": want["p2"], "p4": want["p4"]}):
			all++
		default:
			t.Errorf("crash point %d of %d: the store holds part of the ingest: ev %v, checkpoint %s", i, len(images), got, rowsString(rows))
		}
		if err := db.Check(); err != nil {
			t.Errorf("crash point %d: %v", i, err)
		}
		db.Close()
	}
	if none == 0 || all == 0 {
		t.Errorf("crash points: %d with nothing, %d with everything; want both kinds", none, all)
	}
}

// TestExportCancelled: an export whose context is done stops, returns
// the context's error and leaves nothing in its directory.
func TestExportCancelled(t *testing.T) {
	src := openExportStore(t, t.TempDir(), nil)
	defer src.Close()
	fillExportSource(t, src)
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	if _, err := snap.ExportTable(ctx, dir, "ev", 1, keepEven); !errors.Is(err, context.Canceled) {
		t.Fatalf("export with a cancelled context: %v, want context.Canceled", err)
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "*")); len(names) > 0 {
		t.Errorf("a cancelled export left %v", names)
	}
}
