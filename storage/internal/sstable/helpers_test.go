package sstable

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventide/eventide/storage/internal/base"
)

// memFile is an in-memory vfs.File, so that the corruption tests can open
// thousands of variants of a table quickly.
type memFile struct {
	data   []byte
	pos    int
	closed bool
}

func (f *memFile) Read(p []byte) (int, error) {
	if f.pos >= len(f.data) {
		return 0, io.EOF
	}
	n := copy(p, f.data[f.pos:])
	f.pos += n
	return n, nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	if off >= int64(len(f.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.data = append(f.data[:f.pos], p...)
	f.pos += len(p)
	return len(p), nil
}

func (f *memFile) Close() error {
	if f.closed {
		return errors.New("already closed")
	}
	f.closed = true
	return nil
}

func (f *memFile) Sync() error { return nil }

func (f *memFile) Stat() (os.FileInfo, error) { return memInfo{size: int64(len(f.data))}, nil }

func (f *memFile) Truncate(size int64) error {
	f.data = f.data[:size]
	return nil
}

type memInfo struct{ size int64 }

func (i memInfo) Name() string       { return "mem" }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return 0o644 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }

// testPartition is what a test writes for one partition.
type testPartition struct {
	key   []byte
	del   base.PartitionDeletions
	cells []base.Cell
}

func liveDel() base.PartitionDeletions { return base.PartitionDeletions{Partition: base.LiveDeletion} }

func writeTable(t testing.TB, parts []testPartition, opts WriterOptions) (*memFile, Properties) {
	t.Helper()
	f := &memFile{}
	w := NewWriter(f, opts)
	for _, p := range parts {
		if err := w.StartPartition(p.key, p.del); err != nil {
			t.Fatalf("StartPartition(%x): %v", p.key, err)
		}
		for i := range p.cells {
			if err := w.Add(&p.cells[i]); err != nil {
				t.Fatalf("Add: %v", err)
			}
		}
	}
	props, err := w.Finish()
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if props.FileBytes != int64(len(f.data)) {
		t.Fatalf("Finish: FileBytes %d, file has %d", props.FileBytes, len(f.data))
	}
	return f, props
}

func openTable(t testing.TB, f *memFile, cache *Cache) *Reader {
	t.Helper()
	r, err := Open(&memFile{data: f.data}, "test.sst", 1, cache)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return r
}

// timeUUIDKey imitates the order-preserving encoding of a TimeUUID: a
// big-endian 60-bit timestamp, then clock sequence and node.
func timeUUIDKey(ts100ns uint64, node uint64) []byte {
	k := make([]byte, 16)
	binary.BigEndian.PutUint64(k, ts100ns)
	binary.BigEndian.PutUint64(k[8:], node)
	return k
}

var testColumns = [][]byte{[]byte("author"), []byte("data"), []byte("kind"), []byte("z")}

// randomCell makes a cell of a random kind.
func randomCell(rng *rand.Rand, ck, col []byte, ts int64) base.Cell {
	c := base.Cell{Clustering: ck, Column: col, Timestamp: ts, LocalDeletionTime: base.NoDeletionTime}
	switch rng.IntN(6) {
	case 0, 1:
		c.Kind = base.KindLive
		c.Value = randomValue(rng, rng.IntN(60))
	case 2, 3:
		c.Kind = base.KindExpiring
		c.TTL = 3600
		if rng.IntN(4) == 0 {
			c.TTL = int32(rng.IntN(100000))
		}
		c.LocalDeletionTime = writeSecond(ts) + int64(c.TTL) + int64(rng.IntN(3))
		c.Value = randomValue(rng, rng.IntN(60))
	case 4:
		c.Kind = base.KindTombstone
		c.LocalDeletionTime = writeSecond(ts) + int64(rng.IntN(2))
	case 5:
		c.Kind = base.KindCounter
		c.Value = base.EncodeCounter(rng.Int64N(1000) - 500)
	}
	return c
}

func randomValue(rng *rand.Rand, n int) []byte {
	v := make([]byte, n)
	for i := range v {
		v[i] = byte('a' + rng.IntN(26))
	}
	return v
}

// randomPartition makes a partition of rows with random columns and kinds.
// keyAfter returns the big-endian successor of key (key plus one, the
// carry going as far as it must). A carry stopped at the second byte once
// turned ...ffff into ...0000, an out-of-order row in about 1 of 150 runs
// of TestCopyBlock.
func keyAfter(key []byte) []byte {
	next := slices.Clone(key)
	for i := len(next) - 1; i >= 0; i-- {
		next[i]++
		if next[i] != 0 {
			break
		}
	}
	return next
}

func randomPartition(rng *rand.Rand, key []byte, rows int) testPartition {
	p := testPartition{key: key, del: liveDel()}
	ts := int64(1_700_000_000_000_000) + rng.Int64N(1e9)
	node := rng.Uint64()
	for r := 0; r < rows; r++ {
		ck := timeUUIDKey(uint64(1000+r*int(1+rng.IntN(5))), node)
		if r > 0 && bytes.Compare(ck, p.cells[len(p.cells)-1].Clustering) <= 0 {
			ck = keyAfter(p.cells[len(p.cells)-1].Clustering)
		}
		for ci, col := range testColumns {
			if ci > 0 && rng.IntN(2) == 0 {
				continue
			}
			if rng.IntN(3) != 0 {
				ts += int64(rng.IntN(2000)) - 500
			}
			p.cells = append(p.cells, randomCell(rng, ck, col, ts))
		}
	}
	return p
}

func randomDeletions(rng *rand.Rand) base.PartitionDeletions {
	d := liveDel()
	if rng.IntN(3) == 0 {
		d.Partition = base.DeletionTime{MarkedForDeleteAt: rng.Int64N(1e15), LocalDeletionTime: rng.Int64N(1e9)}
	}
	for i := rng.IntN(3); i > 0; i-- {
		rt := base.RangeTombstone{Deletion: base.DeletionTime{MarkedForDeleteAt: rng.Int64N(1e15), LocalDeletionTime: rng.Int64N(1e9)}}
		if rng.IntN(4) != 0 {
			rt.Start = base.Bound{Key: timeUUIDKey(uint64(rng.IntN(5000)), 0), Inclusive: rng.IntN(2) == 0}
		} else {
			rt.Start.Inclusive = rng.IntN(2) == 0
		}
		if rng.IntN(4) != 0 {
			rt.End = base.Bound{Key: timeUUIDKey(uint64(5000+rng.IntN(5000)), 0), Inclusive: rng.IntN(2) == 0}
		}
		if rng.IntN(5) == 0 {
			rt.Start.Key = []byte{} // bounded by the empty key, not unbounded
		}
		d.Ranges = append(d.Ranges, rt)
	}
	return d
}

// randomTable makes nparts partitions with keys in ascending order.
func randomTable(rng *rand.Rand, nparts, maxRows int) []testPartition {
	keys := map[string]bool{}
	for len(keys) < nparts {
		keys[fmt.Sprintf("%08d|%s", rng.IntN(1e6), strings.Repeat("event", rng.IntN(3)))] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	parts := make([]testPartition, 0, nparts)
	for _, k := range sorted {
		rows := rng.IntN(maxRows + 1)
		if rng.IntN(8) == 0 {
			rows = 0
		}
		p := randomPartition(rng, []byte(k), rows)
		if rows == 0 || rng.IntN(4) == 0 {
			p.del = randomDeletions(rng)
		}
		parts = append(parts, p)
	}
	return parts
}

// wantProperties computes the properties the writer should report, by
// brute force.
func wantProperties(parts []testPartition, c Compression) Properties {
	p := Properties{
		Compression: c, MinTimestamp: math.MaxInt64, MaxTimestamp: math.MinInt64,
		MaxLocalDeletionTime: math.MinInt64, MinLocalDeletionTime: base.NoDeletionTime,
	}
	note := func(d base.DeletionTime) {
		p.MinTimestamp = min(p.MinTimestamp, d.MarkedForDeleteAt)
		p.MaxTimestamp = max(p.MaxTimestamp, d.MarkedForDeleteAt)
		p.MaxLocalDeletionTime = max(p.MaxLocalDeletionTime, d.LocalDeletionTime)
		p.MinLocalDeletionTime = min(p.MinLocalDeletionTime, d.LocalDeletionTime)
	}
	for _, part := range parts {
		p.Partitions++
		if !part.del.Partition.IsLive() {
			p.PartitionDeletions++
			note(part.del.Partition)
			p.Tombstones.Deletions.Add(part.del.Partition.LocalDeletionTime)
		}
		// Stored as fragments (writers fragment, readers fragment old
		// files on load).
		for _, rt := range base.FragmentRanges(part.del.Ranges) {
			p.RangeTombstones++
			note(rt.Deletion)
			p.Tombstones.Deletions.Add(rt.Deletion.LocalDeletionTime)
		}
		for i := range part.cells {
			c := &part.cells[i]
			p.Cells++
			switch c.Kind {
			case base.KindTombstone:
				p.Tombstones.Deletions.Add(c.LocalDeletionTime)
			case base.KindExpiring:
				p.Tombstones.Expiring.Add(c.LocalDeletionTime)
				p.Tombstones.ExpiringWritten.Add(c.LocalDeletionTime - int64(c.TTL))
			}
			p.MinTimestamp = min(p.MinTimestamp, c.Timestamp)
			p.MaxTimestamp = max(p.MaxTimestamp, c.Timestamp)
			if p.MinClustering == nil || bytes.Compare(c.Clustering, p.MinClustering) < 0 {
				p.MinClustering = c.Clustering
			}
			if p.MaxClustering == nil || bytes.Compare(c.Clustering, p.MaxClustering) > 0 {
				p.MaxClustering = c.Clustering
			}
			switch c.Kind {
			case base.KindLive:
				p.LiveCells++
				p.MaxLocalDeletionTime = base.NoDeletionTime
			case base.KindCounter:
				p.CounterCells++
				p.MaxLocalDeletionTime = base.NoDeletionTime
			case base.KindExpiring:
				p.ExpiringCells++
				p.MaxLocalDeletionTime = max(p.MaxLocalDeletionTime, c.LocalDeletionTime)
				p.MinLocalDeletionTime = min(p.MinLocalDeletionTime, c.LocalDeletionTime)
			case base.KindTombstone:
				p.TombstoneCells++
				p.MaxLocalDeletionTime = max(p.MaxLocalDeletionTime, c.LocalDeletionTime)
				p.MinLocalDeletionTime = min(p.MinLocalDeletionTime, c.LocalDeletionTime)
			}
		}
	}
	if p.MinTimestamp > p.MaxTimestamp {
		p.MinTimestamp, p.MaxTimestamp = 0, 0
	}
	p.Tombstones.clearHints()
	return p
}

// comparableProps clears what wantProperties cannot know, and the format
// version, which the tests check on their own.
func comparableProps(p Properties) Properties {
	p.DataBytes, p.IndexBytes, p.FileBytes, p.DataBlocks, p.FormatVersion, p.DictionaryBytes = 0, 0, 0, 0, 0, 0
	p.Tombstones.clearHints()
	return p
}

func cellString(c *base.Cell) string {
	return fmt.Sprintf("{ck=%x col=%q kind=%v ts=%d ttl=%d ldt=%d val=%q}", c.Clustering, c.Column, c.Kind, c.Timestamp, c.TTL, c.LocalDeletionTime, c.Value)
}

func cellsEqual(a, b *base.Cell) bool {
	return bytes.Equal(a.Clustering, b.Clustering) && bytes.Equal(a.Column, b.Column) && a.Kind == b.Kind &&
		a.Timestamp == b.Timestamp && a.TTL == b.TTL && a.LocalDeletionTime == b.LocalDeletionTime && bytes.Equal(a.Value, b.Value)
}

// deletionsEqual compares deletions as stored: b's ranges fragmented.
func deletionsEqual(a, b base.PartitionDeletions) bool {
	b.Ranges = base.FragmentRanges(b.Ranges)
	if a.Partition != b.Partition || len(a.Ranges) != len(b.Ranges) {
		return false
	}
	for i := range a.Ranges {
		x, y := a.Ranges[i], b.Ranges[i]
		if x.Deletion != y.Deletion || !boundEqual(x.Start, y.Start) || !boundEqual(x.End, y.End) {
			return false
		}
	}
	return true
}

func boundEqual(a, b base.Bound) bool {
	return (a.Key == nil) == (b.Key == nil) && bytes.Equal(a.Key, b.Key) && a.Inclusive == b.Inclusive
}

// collect drains an iterator.
func collect(t testing.TB, it *PartitionIter) []base.Cell {
	t.Helper()
	var out []base.Cell
	for it.Next() {
		out = append(out, it.Cell().Clone())
	}
	if err := it.Err(); err != nil {
		t.Fatalf("iteration: %v", err)
	}
	return out
}

func diffCells(got, want []base.Cell) string {
	for i := 0; i < max(len(got), len(want)); i++ {
		switch {
		case i >= len(got):
			return fmt.Sprintf("got %d cells, want %d; first missing %s", len(got), len(want), cellString(&want[i]))
		case i >= len(want):
			return fmt.Sprintf("got %d cells, want %d; first extra %s", len(got), len(want), cellString(&got[i]))
		case !cellsEqual(&got[i], &want[i]):
			return fmt.Sprintf("cell %d: got %s, want %s", i, cellString(&got[i]), cellString(&want[i]))
		}
	}
	return ""
}

// allCells returns every cell of b.
func (b *block) allCells() []base.Cell {
	out := make([]base.Cell, b.len())
	for i := range out {
		b.cell(i, &out[i])
	}
	return out
}

// Partition is FindPartition for tests, which fail on its error.
func (r *Reader) Partition(key []byte) (PartitionInfo, bool) {
	info, ok, err := r.FindPartition(key)
	if err != nil {
		panic(fmt.Sprintf("FindPartition(%x): %v", key, err))
	}
	return info, ok
}

func TestKeyAfter(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"0000000000000000000000000000aa00", "0000000000000000000000000000aa01"},
		{"000000000000000000000000000000ff", "00000000000000000000000000000100"},
		{"0000000000000406703d634cb985ffff", "0000000000000406703d634cb9860000"},
		{"00000000000000000000ffffffffffff", "00000000000000000001000000000000"},
	} {
		key, _ := hex.DecodeString(tc.key)
		got := keyAfter(key)
		if hex.EncodeToString(got) != tc.want || bytes.Compare(got, key) <= 0 {
			t.Errorf("keyAfter(%s) = %x, want %s", tc.key, got, tc.want)
		}
	}
}
