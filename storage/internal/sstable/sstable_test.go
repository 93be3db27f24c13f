package sstable

import (
	"bytes"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/eventide/eventide/storage/internal/base"
	"github.com/eventide/eventide/storage/vfs"
)

var allCompressions = []Compression{CompressionNone, CompressionZstd, CompressionS2}

func TestParseCompression(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Compression
		wantErr bool
	}{
		{"none", CompressionNone, false},
		{"zstd", CompressionZstd, false},
		{"s2", CompressionS2, false},
		{"", 0, true},
		{"ZSTD", 0, true},
		{"snappy", 0, true},
	} {
		got, err := ParseCompression(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseCompression(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
		if err == nil && got.String() != tc.in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), tc.in)
		}
	}
}

func cell(ck, col string, kind base.Kind, ts int64, value string) base.Cell {
	c := base.Cell{Clustering: []byte(ck), Column: []byte(col), Kind: kind, Timestamp: ts, LocalDeletionTime: base.NoDeletionTime, Value: []byte(value)}
	switch kind {
	case base.KindExpiring:
		c.TTL = 60
		c.LocalDeletionTime = writeSecond(ts) + 60
	case base.KindTombstone:
		c.LocalDeletionTime = writeSecond(ts)
		c.Value = nil
	case base.KindCounter:
		c.Value = base.EncodeCounter(int64(len(value)))
	}
	return c
}

func TestRoundTrip(t *testing.T) {
	huge := strings.Repeat("x", 100<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		name  string
		parts []testPartition
		opts  WriterOptions
	}{
		{name: "empty file"},
		{name: "single cell", parts: []testPartition{{key: []byte("p"), del: liveDel(), cells: []base.Cell{cell("a", "data", base.KindLive, 1, "v")}}}},
		{name: "all kinds", parts: []testPartition{{key: []byte("p"), del: liveDel(), cells: []base.Cell{
			cell("a", "author", base.KindLive, 10, "ann"),
			cell("a", "data", base.KindExpiring, 10, `{"x":1}`),
			cell("b", "data", base.KindTombstone, 20, ""),
			cell("c", "hits", base.KindCounter, -5, "seven"),
			{Clustering: []byte("d"), Column: []byte("odd"), Kind: base.KindExpiring, Timestamp: math.MinInt64, TTL: -3, LocalDeletionTime: math.MaxInt64 - 1, Value: []byte("v")},
			{Clustering: []byte("e"), Column: []byte("odd"), Kind: base.KindLive, Timestamp: math.MaxInt64, TTL: 7, LocalDeletionTime: 42},
			{Clustering: []byte("f"), Column: nil, Kind: base.KindTombstone, Timestamp: 0, LocalDeletionTime: math.MinInt64},
		}}}},
		{name: "deletions only", parts: []testPartition{
			{key: []byte("a"), del: base.PartitionDeletions{Partition: base.DeletionTime{MarkedForDeleteAt: 100, LocalDeletionTime: 5}}},
			{key: []byte("b"), del: base.PartitionDeletions{Partition: base.LiveDeletion, Ranges: []base.RangeTombstone{
				{Start: base.Bound{Key: []byte("r"), Inclusive: true}, End: base.Bound{Key: []byte("r"), Inclusive: true}, Deletion: base.DeletionTime{MarkedForDeleteAt: 7, LocalDeletionTime: 8}},
				{Start: base.Unbounded, End: base.Bound{Key: []byte{}, Inclusive: false}, Deletion: base.DeletionTime{MarkedForDeleteAt: 9, LocalDeletionTime: 10}},
				{Start: base.Bound{Key: []byte("x")}, End: base.Bound{Inclusive: true}, Deletion: base.DeletionTime{MarkedForDeleteAt: -9, LocalDeletionTime: 0}},
			}}},
			{key: []byte("c"), del: liveDel()},
		}},
		{name: "empty keys", parts: []testPartition{
			{key: []byte{}, del: liveDel(), cells: []base.Cell{cell("", "", base.KindLive, 1, ""), cell("", "a", base.KindLive, 1, "")}},
			{key: []byte{0}, del: liveDel(), cells: []base.Cell{cell("", "", base.KindLive, 1, "v")}},
		}},
		{name: "huge values span blocks", parts: []testPartition{{key: []byte("p"), del: liveDel(), cells: []base.Cell{
			cell("a", "data", base.KindLive, 1, huge),
			cell("a", "more", base.KindLive, 1, "small"),
			cell("b", "data", base.KindExpiring, 2, huge+"y"),
			cell("c", "data", base.KindLive, 3, "z"),
		}}}, opts: WriterOptions{BlockSize: 4096}},
		{name: "many columns one row", parts: func() []testPartition {
			p := testPartition{key: []byte("wide"), del: liveDel()}
			for i := 0; i < 3000; i++ {
				p.cells = append(p.cells, cell("row", string(rune('a'+i%26))+strings.Repeat("c", i/26), base.KindLive, int64(i), "v"))
			}
			slices.SortFunc(p.cells, func(a, b base.Cell) int { return bytes.Compare(a.Column, b.Column) })
			return []testPartition{p}
		}(), opts: WriterOptions{BlockSize: 1024}},
		{name: "random small blocks", parts: randomTable(rng, 40, 60), opts: WriterOptions{BlockSize: 300}},
		{name: "random default blocks", parts: randomTable(rng, 40, 400)},
		{name: "events", parts: []testPartition{eventPartition(rng, []byte("e1"), 3000), eventPartition(rng, []byte("e2"), 10)}},
		{name: "events, descending keys, JSON and other values", parts: []testPartition{descendingEvents(rng, []byte("d"), 2000)}},
	}
	for _, tc := range cases {
		for _, comp := range allCompressions {
			t.Run(tc.name+"/"+comp.String(), func(t *testing.T) {
				opts := tc.opts
				opts.Compression = comp
				f, wprops := writeTable(t, tc.parts, opts)
				r := openTable(t, f, NewCache(1<<20))
				defer r.Close()
				checkTable(t, r, tc.parts, comp)
				if v := r.Properties().FormatVersion; v != formatVersion {
					t.Errorf("FormatVersion = %d, want %d", v, formatVersion)
				}
				if got := r.Properties(); !reflect.DeepEqual(got, wprops) {
					t.Errorf("Properties() = %+v\nwriter returned %+v", got, wprops)
				}
			})
		}
	}
}

// checkTable verifies everything a reader says against what was written.
func checkTable(t *testing.T, r *Reader, parts []testPartition, comp Compression) {
	t.Helper()
	if err := r.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	want := wantProperties(parts, comp)
	if got := comparableProps(r.Properties()); !reflect.DeepEqual(got, want) {
		t.Errorf("Properties:\n got  %+v\n want %+v", got, want)
	}
	// Scanner returns exactly what was written.
	s := r.NewScanner()
	for i, p := range parts {
		if !s.NextPartition() {
			t.Fatalf("scanner ended after %d partitions, want %d (err %v)", i, len(parts), s.Err())
		}
		info := s.Partition()
		if !bytes.Equal(info.Key, p.key) || !deletionsEqual(info.Deletions, p.del) {
			t.Fatalf("scanner partition %d = %x %+v, want %x %+v", i, info.Key, info.Deletions, p.key, p.del)
		}
		var got []base.Cell
		for s.NextCell() {
			got = append(got, s.Cell().Clone())
		}
		if d := diffCells(got, p.cells); d != "" {
			t.Fatalf("scanner partition %x: %s", p.key, d)
		}
	}
	if s.NextPartition() || s.Err() != nil {
		t.Fatalf("scanner has more partitions than written (err %v)", s.Err())
	}
	for _, p := range parts {
		if !r.MayContain(p.key) {
			t.Fatalf("MayContain(%x) = false for a written key", p.key)
		}
		info, ok := r.Partition(p.key)
		if !ok {
			t.Fatalf("Partition(%x) not found", p.key)
		}
		if !bytes.Equal(info.Key, p.key) || !deletionsEqual(info.Deletions, p.del) || info.Cells != int64(len(p.cells)) {
			t.Fatalf("Partition(%x) = %+v", p.key, info)
		}
		if len(p.cells) > 0 {
			if !bytes.Equal(info.MinClustering, p.cells[0].Clustering) || !bytes.Equal(info.MaxClustering, p.cells[len(p.cells)-1].Clustering) {
				t.Fatalf("Partition(%x) clustering %x..%x", p.key, info.MinClustering, info.MaxClustering)
			}
		} else if info.MinClustering != nil || info.MaxClustering != nil {
			t.Fatalf("Partition(%x) without cells has clustering bounds", p.key)
		}
		if d := diffCells(collect(t, r.NewPartitionIter(info, IterOptions{})), p.cells); d != "" {
			t.Fatalf("forward %x: %s", p.key, d)
		}
		rev := slices.Clone(p.cells)
		slices.Reverse(rev)
		if d := diffCells(collect(t, r.NewPartitionIter(info, IterOptions{Reverse: true})), rev); d != "" {
			t.Fatalf("reverse %x: %s", p.key, d)
		}
		// Keys just around this one are absent.
		for _, k := range [][]byte{append(slices.Clone(p.key), 0), p.key[:max(len(p.key)-1, 0)]} {
			if !slices.ContainsFunc(parts, func(q testPartition) bool { return bytes.Equal(q.key, k) }) {
				if _, ok := r.Partition(k); ok {
					t.Fatalf("Partition(%x) found an absent key", k)
				}
			}
		}
	}
}

func TestRealFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "000001.sst")
	f, err := vfs.Default.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	parts := randomTable(rng, 20, 100)
	w := NewWriter(f, DefaultWriterOptions())
	for _, p := range parts {
		if err := w.StartPartition(p.key, p.del); err != nil {
			t.Fatal(err)
		}
		for i := range p.cells {
			if err := w.Add(&p.cells[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	rf, err := vfs.Default.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(rf, path, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkTable(t, r, parts, CompressionZstd)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestWriterRejects(t *testing.T) {
	c := func(ck, col string) *base.Cell {
		x := cell(ck, col, base.KindLive, 1, "v")
		return &x
	}
	cases := []struct {
		name string
		run  func(w *Writer) error
	}{
		{"cell before partition", func(w *Writer) error { return w.Add(c("a", "b")) }},
		{"partition out of order", func(w *Writer) error {
			if err := w.StartPartition([]byte("b"), liveDel()); err != nil {
				return nil
			}
			return w.StartPartition([]byte("a"), liveDel())
		}},
		{"duplicate partition", func(w *Writer) error {
			if err := w.StartPartition([]byte("b"), liveDel()); err != nil {
				return nil
			}
			return w.StartPartition([]byte("b"), liveDel())
		}},
		{"cell out of order", func(w *Writer) error {
			w.StartPartition([]byte("p"), liveDel())
			if err := w.Add(c("b", "x")); err != nil {
				return nil
			}
			return w.Add(c("a", "y"))
		}},
		{"column out of order", func(w *Writer) error {
			w.StartPartition([]byte("p"), liveDel())
			if err := w.Add(c("b", "y")); err != nil {
				return nil
			}
			return w.Add(c("b", "x"))
		}},
		{"duplicate cell", func(w *Writer) error {
			w.StartPartition([]byte("p"), liveDel())
			if err := w.Add(c("b", "y")); err != nil {
				return nil
			}
			return w.Add(c("b", "y"))
		}},
		{"invalid kind", func(w *Writer) error {
			w.StartPartition([]byte("p"), liveDel())
			x := c("a", "b")
			x.Kind = 9
			return w.Add(x)
		}},
		{"finish twice", func(w *Writer) error {
			if _, err := w.Finish(); err != nil {
				return nil
			}
			_, err := w.Finish()
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.run(NewWriter(&memFile{}, WriterOptions{})); err == nil {
				t.Fatal("got no error")
			}
		})
	}
	t.Run("bad compression", func(t *testing.T) {
		w := NewWriter(&memFile{}, WriterOptions{Compression: 9})
		if err := w.StartPartition([]byte("a"), liveDel()); err == nil {
			t.Fatal("got no error")
		}
	})
	t.Run("rejected cell leaves the table valid", func(t *testing.T) {
		f := &memFile{}
		w := NewWriter(f, WriterOptions{Compression: CompressionZstd})
		w.StartPartition([]byte("p"), liveDel())
		w.Add(c("b", "x"))
		if err := w.Add(c("a", "x")); err == nil {
			t.Fatal("out-of-order cell accepted")
		}
		if _, err := w.Finish(); err != nil {
			t.Fatal(err)
		}
		r := openTable(t, f, nil)
		checkTable(t, r, []testPartition{{key: []byte("p"), del: liveDel(), cells: []base.Cell{*c("b", "x")}}}, CompressionZstd)
	})
}

func TestPropertiesLiveness(t *testing.T) {
	exp := cell("a", "d", base.KindExpiring, 5_000_000, "v")
	tomb := cell("b", "d", base.KindTombstone, 9_000_000, "")
	live := cell("c", "d", base.KindLive, 1, "v")
	del := base.PartitionDeletions{Partition: base.DeletionTime{MarkedForDeleteAt: 3, LocalDeletionTime: 100}}
	cases := []struct {
		name       string
		parts      []testPartition
		wantMaxLDT int64
		wantMinLDT int64
		wantMinTS  int64
		wantMaxTS  int64
	}{
		{"empty", nil, math.MinInt64, base.NoDeletionTime, 0, 0},
		{"expiring only", []testPartition{{key: []byte("p"), del: liveDel(), cells: []base.Cell{exp}}}, 65, 65, 5_000_000, 5_000_000},
		{"expiring and tombstone", []testPartition{{key: []byte("p"), del: del, cells: []base.Cell{exp, tomb}}}, 100, 9, 3, 9_000_000},
		{"any live cell", []testPartition{{key: []byte("p"), del: liveDel(), cells: []base.Cell{exp, tomb, live}}}, base.NoDeletionTime, 9, 1, 9_000_000},
		{"deletion only", []testPartition{{key: []byte("p"), del: del}}, 100, 100, 3, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, p := writeTable(t, tc.parts, WriterOptions{})
			if p.MaxLocalDeletionTime != tc.wantMaxLDT || p.MinLocalDeletionTime != tc.wantMinLDT || p.MinTimestamp != tc.wantMinTS || p.MaxTimestamp != tc.wantMaxTS {
				t.Errorf("got ldt %d..%d ts %d..%d, want ldt %d..%d ts %d..%d", p.MinLocalDeletionTime, p.MaxLocalDeletionTime, p.MinTimestamp, p.MaxTimestamp,
					tc.wantMinLDT, tc.wantMaxLDT, tc.wantMinTS, tc.wantMaxTS)
			}
		})
	}
}

func TestBloomFilter(t *testing.T) {
	const n = 20000
	for _, bits := range []int{5, 10, 16} {
		hashes := make([]uint64, n)
		for i := range hashes {
			hashes[i] = bloomHash([]byte("key-" + string(rune(i)) + "-" + itoa(i)))
		}
		raw := appendBloomFilter(nil, hashes, bits)
		f, _, err := decodeBloomFilter(raw)
		if err != nil {
			t.Fatal(err)
		}
		for i, h := range hashes {
			if !f.mayContain(h) {
				t.Fatalf("bits %d: false negative for key %d", bits, i)
			}
		}
		fp := 0
		const probes = 200000
		for i := 0; i < probes; i++ {
			if f.mayContain(bloomHash([]byte("absent-" + itoa(i)))) {
				fp++
			}
		}
		k := float64(bloomProbes(bits))
		want := math.Pow(1-math.Exp(-k/float64(bits)), k)
		got := float64(fp) / probes
		t.Logf("bits/key %d: false positives %.4f, expected %.4f", bits, got, want)
		if got > want*1.5+0.001 || got < want*0.5 {
			t.Errorf("bits/key %d: false-positive rate %.4f, want near %.4f", bits, got, want)
		}
	}
}

func itoa(i int) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + i%10)}, b...)
		i /= 10
		if i == 0 {
			return string(b)
		}
	}
}

func TestMayContainOnTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	parts := randomTable(rng, 2000, 1)
	f, _ := writeTable(t, parts, WriterOptions{Compression: CompressionS2})
	r := openTable(t, f, nil)
	fp := 0
	for i := 0; i < 20000; i++ {
		if r.MayContain([]byte("absent" + itoa(i))) {
			fp++
		}
	}
	if rate := float64(fp) / 20000; rate > 0.02 {
		t.Errorf("false-positive rate %.4f at 10 bits/key, want about 0.008", rate)
	}
}

// TestWritersReuseZstdEncoders checks that consecutive Writers share
// pooled zstd encoders (creating one per SSTable cleared megabytes of
// match history each time, which dominated compaction CPU with many small
// SSTables) and that a reused encoder's output reads back correctly.
func TestWritersReuseZstdEncoders(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	created := zstdEncodersCreated.Load()
	const tables = 20
	for i := 0; i < tables; i++ {
		parts := randomTable(rng, 5, 40)
		f, _ := writeTable(t, parts, WriterOptions{Compression: CompressionZstd, ZstdLevel: 7})
		r := openTable(t, f, nil)
		for _, p := range parts {
			info, ok := r.Partition(p.key)
			if !ok {
				t.Fatalf("table %d: Partition(%x) not found", i, p.key)
			}
			if diff := diffCells(collect(t, r.NewPartitionIter(info, IterOptions{})), p.cells); diff != "" {
				t.Fatalf("table %d partition %x: %s", i, p.key, diff)
			}
		}
		r.Close()
	}
	// sync.Pool may drop an item at a GC (and drops some on purpose under
	// the race detector), so allow a few; without pooling it is one per
	// table.
	if n := zstdEncodersCreated.Load() - created; !raceEnabled && n > tables/4 {
		t.Fatalf("%d Writers created %d zstd encoders, want them pooled", tables, n)
	}
}

// TestIndexPagesS2InZstdFiles checks that a zstd file's index pages are
// compressed with S2 (pageCompression), and the other codecs' files'
// pages with the file's own, and that they read back.
func TestIndexPagesS2InZstdFiles(t *testing.T) {
	parts := benchTable(3)[:4]
	for _, tc := range []struct {
		file, page Compression
	}{{CompressionZstd, CompressionS2}, {CompressionS2, CompressionS2}, {CompressionNone, CompressionNone}} {
		f, _ := writeTable(t, parts, WriterOptions{Compression: tc.file, NoDictionary: true})
		r := openTable(t, f, nil)
		if len(r.top.pages) < 2 {
			t.Fatalf("%v: got %d index pages, want several", tc.file, len(r.top.pages))
		}
		for j := range r.top.pages {
			ref := &r.top.pages[j]
			frame := make([]byte, ref.storedLen+blockTrailerLen)
			if err := r.readAt(frame, ref.offset()); err != nil {
				t.Fatal(err)
			}
			if got := Compression(frame[ref.storedLen]); got != tc.page {
				t.Fatalf("%v file: index page %d compressed with %v, want %v", tc.file, j, got, tc.page)
			}
			if _, err := r.page(j, fromDisk); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Check(); err != nil {
			t.Fatal(err)
		}
	}
}
