package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var rewriteManifestFixture = flag.Bool("manifest.rewrite", false, "rewrite testdata/manifest/v1.manifest from a real engine run")

const manifestFixture = "testdata/manifest/v1.manifest"

// writeManifestFixture runs the engine to produce a real manifest: two
// tables (a TTL'd time-window table with options set, a counter table) and
// SSTables from flushes.
func writeManifestFixture(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	opts := DefaultOptions()
	opts.Clock = &fakeClock{now: time.Unix(1_800_000_000, 0)}
	opts.DisableAutoCompaction = true
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	grace := int64(0)
	for _, def := range []TableDef{
		{Name: "events", Compaction: TimeWindow, WindowSeconds: 600, DefaultTTLSeconds: 86400, GCGraceSeconds: &grace, Compression: "s2"},
		{Name: "counts", Counters: true, MinThreshold: 2, MaxThreshold: 8},
	} {
		if err := db.CreateTable(def); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 2 {
		for i := range 20 {
			apply(t, db, func(b *Batch) {
				b.Put("events", []byte("p"), []byte(fmt.Sprintf("%04d", round*100+i)), []byte("v"), []byte("value"), 1_800_000_000_000_000)
				b.AddCounter("counts", []byte("c"), []byte("k"), []byte("n"), 1)
			})
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, manifestFileName))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestManifestFixture decodes a manifest written by the engine and kept in
// testdata, so a change that breaks reading existing stores fails here.
// Rewrite it with -manifest.rewrite only with a new format version.
func TestManifestFixture(t *testing.T) {
	if *rewriteManifestFixture {
		if err := os.WriteFile(manifestFixture, writeManifestFixture(t), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	buf, err := os.ReadFile(manifestFixture)
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeManifest(manifestFixture, buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Tables) != 2 || m.Tables[0].Def.Name != "events" || m.Tables[0].Def.GCGraceSeconds == nil ||
		!m.Tables[1].Def.Counters || len(m.SSTables) != 4 || m.MinUnflushedWAL < 2 || m.NextFileNum < 5 {
		t.Fatalf("fixture decoded to an unexpected manifest: %+v", m)
	}
	again, err := encodeManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, buf) {
		t.Fatal("re-encoding the fixture changes its bytes")
	}
}

// FuzzDecodeManifest: any bytes decode to a manifest that re-encodes and
// decodes to itself, or fail with an error wrapping ErrCorruption naming the
// file; never a panic.
func FuzzDecodeManifest(f *testing.F) {
	fixture, err := os.ReadFile(manifestFixture)
	if err != nil {
		f.Fatal(err)
	}
	empty, err := encodeManifest(&manifestData{NextFileNum: 1, MinUnflushedWAL: 1, NextTableID: 1})
	if err != nil {
		f.Fatal(err)
	}
	withVersion := func(b []byte, v uint32) []byte {
		b = bytes.Clone(b)
		binary.LittleEndian.PutUint32(b[8:], v)
		return b
	}
	f.Add(fixture)
	f.Add(empty)
	f.Add(fixture[:manifestHeaderSize])
	f.Add(fixture[:len(fixture)-1])
	f.Add(withVersion(fixture, 2))
	f.Add([]byte(manifestMagic))
	f.Add([]byte{})
	const path = "/fuzz/MANIFEST"
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeManifest(path, data)
		if err != nil {
			if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error does not wrap ErrCorruption and name the file: %v", err)
			}
			return
		}
		enc, err := encodeManifest(m)
		if err != nil {
			t.Fatalf("decoded manifest does not encode: %v", err)
		}
		again, err := decodeManifest(path, enc)
		if err != nil {
			t.Fatalf("re-encoded manifest does not decode: %v", err)
		}
		if !reflect.DeepEqual(m, again) {
			t.Fatalf("round trip changed the manifest:\n%+v\n%+v", m, again)
		}
	})
}
