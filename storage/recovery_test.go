package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eventide/eventide/storage/internal/wal"
	"github.com/eventide/eventide/storage/vfs"
)

// lastNonZero returns the offset of the last non-zero byte of b: in a WAL
// segment, a byte of its final record.
func lastNonZero(t *testing.T, b []byte) int {
	t.Helper()
	i := len(b) - 1
	for i >= 0 && b[i] == 0 {
		i--
	}
	if i < 0 {
		t.Fatal("segment holds only zeros")
	}
	return i
}

// TestWALDamageAfterCleanCloseFailsOpen: a truncated WAL segment, or a
// flipped byte in its final record, used to be "repaired" as a torn tail,
// silently dropping acknowledged batches. Open must now fail with
// ErrCorruption naming the segment.
func TestWALDamageAfterCleanCloseFailsOpen(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"truncated inside the records", func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, int64(lastNonZero(t, b)-10)); err != nil {
				t.Fatal(err)
			}
		}},
		{"middle record flipped", func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			flipByte(t, path, int64(lastNonZero(t, b)/2))
		}},
		{"final record flipped", func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			flipByte(t, path, int64(lastNonZero(t, b)))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fillCorruptionStore(t, dir, false)
			path := firstWALSegment(t, dir)
			tc.damage(t, path)
			err := readEverything(dir)
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("got %v, want an error wrapping ErrCorruption", err)
			}
			if !strings.Contains(err.Error(), filepath.Base(path)) {
				t.Fatalf("error does not name %s: %v", filepath.Base(path), err)
			}
		})
	}
}

// TestRecoveryReportsCut simulates a crash image (the WAL segment as it is
// while the store is open, not sealed) whose final record is damaged: the
// one case recovery may cut. Open succeeds, and Recovery reports exactly
// the cut.
func TestRecoveryReportsCut(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateTable(TableDef{Name: "t"}); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		apply(t, db, func(b *Batch) {
			b.Put("t", []byte("p"), []byte(fmt.Sprintf("%05d", i)), []byte("v"), []byte("value"), int64(i+1))
		})
	}
	path := firstWALSegment(t, dir)
	crashImage, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	last := lastNonZero(t, crashImage)
	crashImage[last] ^= 0x5a
	if err := os.WriteFile(path, crashImage, 0o644); err != nil {
		t.Fatal(err)
	}

	db, err = Open(dir, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	info := db.Recovery()
	if info.CutBytes <= 0 || info.CutBytes > int64(last) || info.CutOffset+info.CutBytes != int64(last)+1 ||
		filepath.Base(path) != fmt.Sprintf("%06d.wal", info.CutSegment) || info.CutReason == "" || info.WALRecords != n-1 {
		t.Fatalf("Recovery() = %+v; want the final record of %s (ending at %d) cut and %d records replayed", info, path, last+1, n-1)
	}
	rows, _ := readAll(t, db, SliceQuery{Table: "t", Partition: []byte("p")})
	if len(rows) != n-1 {
		t.Fatalf("%d rows after recovery, want %d", len(rows), n-1)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after[:info.CutOffset], crashImage[:info.CutOffset]) || lastNonZero(t, after) >= int(info.CutOffset) {
		t.Fatal("recovery did not clear exactly the cut bytes")
	}
}

// TestReopenLeavesNoEmptyWALSegments: opening a store starts a new WAL
// segment; the ones replayed before it go when they held no record, so a
// store opened and closed again and again without writes keeps one
// segment, not one per open (each preallocated to WALSegmentSize). A
// segment with records is kept until the flush that covers it, and its
// rows read back after every reopening.
func TestReopenLeavesNoEmptyWALSegments(t *testing.T) {
	dir := t.TempDir()
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	segments := func() []uint64 {
		t.Helper()
		segs, err := wal.ListSegments(vfs.Default, filepath.Join(dir, walDirName))
		if err != nil {
			t.Fatal(err)
		}
		return segs
	}
	reopen := func() *DB {
		t.Helper()
		return openTestDBIn(t, dir, clock, nil, TableDef{Name: "t"})
	}
	rows := func(db *DB) int {
		t.Helper()
		got, _ := readAll(t, db, SliceQuery{Table: "t", Partition: []byte("p")})
		return len(got)
	}

	// Flushed rows, then opens without writes.
	db := reopen()
	apply(t, db, func(b *Batch) { putMemoryTestRows(b, "p", 0, 100) })
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for i := range 5 {
		db = reopen()
		if n := rows(db); n != 100 {
			t.Fatalf("open %d: %d rows, want 100", i, n)
		}
		db.Close()
	}
	if segs := segments(); len(segs) != 1 {
		t.Fatalf("after five opens without writes: wal segments %v, want one", segs)
	}

	// Rows only in the WAL: their segment stays through reopenings.
	db = reopen()
	apply(t, db, func(b *Batch) { putMemoryTestRows(b, "p", 100, 50) })
	db.Close()
	for i := range 3 {
		db = reopen()
		if n := rows(db); n != 150 {
			t.Fatalf("reopen %d with unflushed rows: %d rows, want 150", i, n)
		}
		db.Close()
	}
}
