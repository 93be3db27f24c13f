package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eventide/eventide/storage/internal/wal"
)

// TestOpenRefusesMissingManifest loses the MANIFEST of a store with data
// and checks Open refuses, names what it found, and deletes nothing.
func TestOpenRefusesMissingManifest(t *testing.T) {
	cases := []struct {
		name     string
		flush    bool   // leave an SSTable (else only WAL records)
		wantName string // a file the error must name
	}{
		{"sstables", true, ".sst"},
		{"wal records only", false, ".wal"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fillCorruptionStore(t, dir, tc.flush)
			if err := os.Remove(filepath.Join(dir, manifestFileName)); err != nil {
				t.Fatal(err)
			}
			before := listTree(t, dir)
			db, err := Open(dir, DefaultOptions())
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded on a store whose MANIFEST is missing")
			}
			if !errors.Is(err, ErrMissingManifest) {
				t.Fatalf("error does not wrap ErrMissingManifest: %v", err)
			}
			if !strings.Contains(err.Error(), tc.wantName) {
				t.Fatalf("error does not name a %s file: %v", tc.wantName, err)
			}
			if after := listTree(t, dir); after != before {
				t.Fatalf("Open changed the directory:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// TestOpenNewStore checks that an empty directory, and one left by an
// older version with only an empty WAL segment, still open as new stores.
func TestOpenNewStore(t *testing.T) {
	t.Run("empty directory, reopened", func(t *testing.T) {
		dir := t.TempDir()
		for range 2 {
			db, err := Open(dir, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("legacy empty wal segment", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, walDirName), 0o755); err != nil {
			t.Fatal(err)
		}
		// A version 1 segment header for segment 1, no records.
		hdr := append([]byte("EVWL\x01\x00\x00\x00"), 1, 0, 0, 0, 0, 0, 0, 0)
		if err := os.WriteFile(filepath.Join(dir, walDirName, wal.SegmentFileName(1)), hdr, 0o644); err != nil {
			t.Fatal(err)
		}
		db, err := Open(dir, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// listTree describes every file under dir with its size.
func listTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !info.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			fmt.Fprintf(&b, "%s:%d ", rel, info.Size())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
