package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDirSizeCountsAllocatedBytes: a preallocated sparse file (as
// Eventide's WAL segments are) counts what it holds, not its apparent
// size; a dense file counts its size.
func TestDirSizeCountsAllocatedBytes(t *testing.T) {
	dir := t.TempDir()
	sparse, err := os.Create(filepath.Join(dir, "000001.log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sparse.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	if _, err := sparse.WriteAt(make([]byte, 4096), 0); err != nil {
		t.Fatal(err)
	}
	sparse.Close()
	if err := os.WriteFile(filepath.Join(dir, "dense"), make([]byte, 10000), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := dirSize(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got < 10000+4096 || got > 1<<20 {
		t.Fatalf("dirSize = %d; want the dense file's 10000 bytes plus the sparse file's few allocated KiB, not its 64 MiB", got)
	}
}
