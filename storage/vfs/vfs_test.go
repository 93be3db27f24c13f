package vfs

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestDefaultFiles checks what the engine relies on in the operating
// system's files beyond File: writing at an offset and seeking (undoing a
// failed WAL write), and SyncData.
func TestDefaultFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	f, err := Default.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := f.(DataSyncer); !ok {
		t.Fatalf("%T has no SyncData: the WAL would fall back to fsync", f)
	}
	wa, ok1 := f.(io.WriterAt)
	sk, ok2 := f.(io.Seeker)
	if !ok1 || !ok2 {
		t.Fatalf("%T cannot write at an offset or seek", f)
	}
	if _, err := f.Write([]byte("hello, world")); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64); err != nil {
		t.Fatal(err)
	}
	if _, err := wa.WriteAt([]byte("HELLO"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := sk.Seek(7, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("WORLD")); err != nil {
		t.Fatal(err)
	}
	if err := SyncData(f); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte("HELLO, WORLD"), make([]byte, 52)...)
	if !bytes.Equal(got, want) {
		t.Fatalf("file holds %q, want %q", got, want)
	}
	if _, err := Default.Open(filepath.Join(t.TempDir(), "missing")); !os.IsNotExist(err) {
		t.Fatalf("Open of a missing file: %v, want not-exist", err)
	}
}
