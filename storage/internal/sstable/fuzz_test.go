package sstable

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/eventide/eventide/storage/internal/base"
)

// Fuzz targets, one per decoder. Each must reject malformed input with an
// error wrapping base.ErrCorruption, never panic, and never allocate more
// than a small multiple of its input. Seeds come from a real table (see
// fuzzSeeds) and from testdata/fuzz/<FuzzName>/, regenerated with
//
//	go test ./storage/internal/sstable -run TestWriteFuzzCorpus -write-fuzz-corpus

var writeFuzzCorpus = flag.Bool("write-fuzz-corpus", false, "rewrite the seed corpus under testdata/fuzz")

// fuzzSeedSet holds valid encodings of every structure, taken from a small
// table written with each compression.
type fuzzSeedSet struct {
	blocks      [][]byte // decompressed data blocks
	frames      [][]byte // framed data blocks
	rawLens     []uint64
	blockIndex  [][]byte
	dataLens    []uint64
	partIndex   [][]byte
	bloom       [][]byte
	footers     [][]byte
	fileSizes   []uint64
	props       [][]byte
	files       [][]byte
	bloomProbes [][]byte
	pageIndex   [][]byte // decompressed page index
	regionEnds  []uint64 // its data section's end
	pages       [][]byte // decompressed index pages
	pageRefs    []pageRef
	pageKeys    [][3][]byte // first, next and last key of each page
	dicts       [][]byte    // a file's dictionary (decompressed), per dictFrames entry
	dictFrames  [][]byte    // framed data blocks compressed against it
	dictRawLens []uint64
}

// addPages adds r's page index and pages (decompressed) as seeds.
func (s *fuzzSeedSet) addPages(tb testing.TB, f *memFile, r *Reader) {
	ft, _, err := decodeFooter(f.data[len(f.data)-footerLen:], uint64(len(f.data)))
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := r.readMeta(ft.blockIndex, "page index")
	if err != nil {
		tb.Fatal(err)
	}
	s.pageIndex = append(s.pageIndex, bytes.Clone(raw))
	s.regionEnds = append(s.regionEnds, ft.blockIndex.offset)
	for j, ref := range r.top.pages {
		frame := f.data[ref.offset() : ref.offset()+ref.storedLen+blockTrailerLen]
		raw, err := r.dec.decodeBlockFrame(frame, ref.rawLen, nil)
		if err != nil {
			tb.Fatal(err)
		}
		var next []byte
		if j+1 < len(r.top.pages) {
			next = bytes.Clone(r.top.key(j + 1))
		}
		s.pages = append(s.pages, bytes.Clone(raw))
		s.pageRefs = append(s.pageRefs, ref)
		s.pageKeys = append(s.pageKeys, [3][]byte{bytes.Clone(r.top.key(j)), next, bytes.Clone(r.top.lastKey)})
	}
}

func fuzzSeeds(tb testing.TB) fuzzSeedSet {
	var s fuzzSeedSet
	rng := rand.New(rand.NewPCG(21, 0))
	parts := randomTable(rng, 3, 6)
	parts[0].del = randomDeletions(rng)
	for _, comp := range allCompressions {
		f, _ := writeTable(tb, parts, WriterOptions{Compression: comp, BlockSize: 200})
		r := openTable(tb, f, nil)
		s.addBlocks(tb, f, r, 4)
		pg, err := r.page(0, fromDisk)
		if err != nil {
			tb.Fatal(err)
		}
		s.blockIndex = append(s.blockIndex, bytes.Clone(pg.blocks.raw))
		s.dataLens = append(s.dataLens, r.top.pages[0].dataLen)
		s.partIndex = append(s.partIndex, bytes.Clone(pg.parts.raw))
		s.addPages(tb, f, r)
		s.bloom = append(s.bloom, append([]byte{byte(r.bloom.k)}, r.bloom.bits...))
		s.footers = append(s.footers, bytes.Clone(f.data[len(f.data)-footerLen:]))
		s.fileSizes = append(s.fileSizes, uint64(len(f.data)))
		s.props = append(s.props, appendProperties(nil, &r.props))
		s.files = append(s.files, bytes.Clone(f.data))
		s.bloomProbes = append(s.bloomProbes, parts[0].key)
		r.Close()
	}
	// Version 2 encodings: fixed-width keys, predicted timestamps and
	// shaped values, in small blocks of JSON events.
	events := []testPartition{descendingEvents(rng, []byte("events"), 12)}
	f, _ := writeTable(tb, events, WriterOptions{Compression: CompressionZstd, BlockSize: 1200})
	r := openTable(tb, f, nil)
	s.addBlocks(tb, f, r, 2)
	r.Close()
	// Version 5: a file with a dictionary (more than dictSampleSize
	// bytes of events), its first blocks and its dictionary.
	events = []testPartition{eventPartition(rng, []byte("dict"), 500)}
	f, _ = writeTable(tb, events, WriterOptions{Compression: CompressionZstd, BlockSize: 2048})
	r = openTable(tb, f, nil)
	if r.dict == nil {
		tb.Fatal("the dictionary seed file has no dictionary")
	}
	pg, err := r.page(0, fromDisk)
	if err != nil {
		tb.Fatal(err)
	}
	for _, i := range []int{0, pg.blocks.len() - 1} {
		h := pg.blocks.handle(i)
		s.dicts = append(s.dicts, bytes.Clone(r.dict.content))
		s.dictFrames = append(s.dictFrames, bytes.Clone(f.data[pg.blocks.fileOffs[i]:pg.blocks.fileOffs[i]+h.frameLen()]))
		s.dictRawLens = append(s.dictRawLens, h.rawLen)
	}
	s.files = append(s.files, bytes.Clone(f.data))
	r.Close()
	return s
}

// addBlocks adds the first n data blocks of r (reading f) as seeds, framed
// and decompressed.
func (s *fuzzSeedSet) addBlocks(tb testing.TB, f *memFile, r *Reader, n int) {
	pg, err := r.page(0, fromDisk)
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i < pg.blocks.len() && i < n; i++ {
		h := pg.blocks.handle(i)
		frame := f.data[pg.blocks.fileOffs[i] : pg.blocks.fileOffs[i]+h.frameLen()]
		raw, err := r.dec.decodeBlockFrame(frame, h.rawLen, nil)
		if err != nil {
			tb.Fatal(err)
		}
		s.blocks = append(s.blocks, bytes.Clone(raw))
		s.frames = append(s.frames, bytes.Clone(frame))
		s.rawLens = append(s.rawLens, h.rawLen)
	}
}

// requireCorruption fails unless err is nil or wraps base.ErrCorruption.
func requireCorruption(t *testing.T, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("got error %v, want one wrapping base.ErrCorruption", err)
	}
}

func FuzzDecodeBlock(f *testing.F) {
	for _, b := range fuzzSeeds(f).blocks {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, version := range []uint32{formatVersion1, formatVersion2} {
			blk, _, err := decodeBlock(raw, version)
			requireCorruption(t, err)
			// Decoding into recycled buffers (values and row keys full
			// of another block's bytes, as the reader's pools hand them
			// out) gives the same result.
			for _, size := range []int{0, 64, 4096} {
				vals, keys := bytes.Repeat([]byte{0xAA}, size), bytes.Repeat([]byte{0xBB}, size)
				blkR, _, errR := decodeBlockInto(raw, version, nil, vals[:0], keys[:0])
				if (err == nil) != (errR == nil) {
					t.Fatalf("version %d, recycled buffers of %d bytes: error %v, fresh decode %v", version, size, errR, err)
				}
				if err == nil {
					if d := diffCells(blkR.allCells(), blk.allCells()); d != "" {
						t.Fatalf("version %d, recycled buffers of %d bytes: %s", version, size, d)
					}
				}
			}
			// Deferring the shaped values (lazy_values.go) rejects the
			// same blocks, and rebuilding a range of cells, then the
			// rest, gives the same cells.
			blkL, _, errL := decodeBlockValues(raw, version, nil, nil, nil, true)
			if (err == nil) != (errL == nil) {
				t.Fatalf("version %d, deferred values: error %v, full decode %v", version, errL, err)
			}
			if err != nil {
				continue
			}
			if blkL.lazy != nil {
				n := blkL.len()
				c0 := int(raw[len(raw)/2]) % (n + 1)
				c1 := c0 + int(raw[len(raw)-1])%(n-c0+1)
				lz := blkL.lazy
				blkL.buildValues(c0, c1)
				want := blk.allCells()
				for i := c0; i < c1; i++ {
					var c base.Cell
					blkL.cell(i, &c)
					if !cellsEqual(&c, &want[i]) {
						t.Fatalf("version %d, values of cells [%d, %d) rebuilt: cell %d is %s, want %s", version, c0, c1, i, cellString(&c), cellString(&want[i]))
					}
				}
				lz.buf = blkL.data[:lz.total+copySlack]
				blkL.lazy.complete()
				if d := diffCells(blkL.allCells(), want); d != "" {
					t.Fatalf("version %d, values of cells [%d, %d) rebuilt, then the rest: %s", version, c0, c1, d)
				}
			}
			// A decoded block is sorted and re-encodes, with or without
			// shaped values, to the same cells.
			for _, shape := range []bool{false, true} {
				b := blockBuilder{shapeValues: shape}
				cells := blk.allCells()
				for i := range cells {
					c := &cells[i]
					if i > 0 && base.CompareCellKeys(cells[i-1].Clustering, cells[i-1].Column, c.Clustering, c.Column) >= 0 {
						t.Fatalf("decoded cells %d and %d out of order", i-1, i)
					}
					b.add(c, i > 0 && bytes.Equal(cells[i-1].Clustering, c.Clustering))
				}
				again, meta, _ := b.finish(nil)
				blk2, _, err := decodeBlock(again, formatVersion2)
				if err != nil {
					t.Fatalf("re-encoded block (version %d, shaped %v) does not decode: %v", version, shape, err)
				}
				if d := diffCells(blk2.allCells(), cells); d != "" {
					t.Fatalf("re-encoded block (version %d, shaped %v) differs: %s", version, shape, d)
				}
				if err := checkBlockMeta(&blk.meta, &meta); err != nil {
					t.Fatalf("decoder and writer disagree on block metadata: %v", err)
				}
			}
		}
	})
}

func FuzzDecodeBlockFrame(f *testing.F) {
	s := fuzzSeeds(f)
	for i, fr := range s.frames {
		f.Add(fr, uint32(s.rawLens[i]))
	}
	var d decompressor
	f.Fuzz(func(t *testing.T, frame []byte, rawLen uint32) {
		// Bound the recorded length as a checksummed index would.
		raw, err := d.decodeBlockFrame(frame, uint64(rawLen%(1<<20)), nil)
		requireCorruption(t, err)
		if err == nil && len(raw) != int(rawLen%(1<<20)) {
			t.Fatalf("decoded %d bytes, want %d", len(raw), rawLen%(1<<20))
		}
	})
}

// FuzzDecodeDictFrame decodes a dictionary meta block's bytes and a data
// block frame against it: any bytes must be rejected as corruption or
// decode to exactly the recorded length, and a block written against a
// dictionary must read back with it.
func FuzzDecodeDictFrame(f *testing.F) {
	s := fuzzSeeds(f)
	for i, fr := range s.dictFrames {
		f.Add(s.dicts[i], fr, uint32(s.dictRawLens[i]))
	}
	var d decompressor
	comp, err := newCompressor(CompressionZstd, 0)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, dictRaw, frame []byte, rawLen uint32) {
		dict, err := decodeDictionary(dictRaw)
		requireCorruption(t, err)
		if err != nil {
			if len(dictRaw) >= minDictLen && len(dictRaw) <= maxDictLen {
				t.Fatalf("a dictionary of %d bytes was refused: %v", len(dictRaw), err)
			}
			return
		}
		defer dict.close()
		want := uint64(rawLen % (1 << 20))
		raw, err := d.decodeDataFrame(frame, want, nil, dict)
		requireCorruption(t, err)
		if err == nil && uint64(len(raw)) != want {
			t.Fatalf("decoded %d bytes, want %d", len(raw), want)
		}
		// Whatever the frame, a block compressed against the
		// dictionary reads back with it.
		if err := comp.setDict(dict.content); err != nil {
			t.Fatal(err)
		}
		block := frame
		if len(block) < minZstdBlock {
			block = append(bytes.Repeat([]byte{'x'}, minZstdBlock), frame...)
		}
		framed, _ := comp.appendBlockFrame(nil, block, CompressionZstd, nil, true)
		back, err := d.decodeDataFrame(framed, uint64(len(block)), nil, dict)
		if err != nil || !bytes.Equal(back, block) {
			t.Fatalf("a block compressed against the dictionary reads back as %d bytes, err %v", len(back), err)
		}
		if framed[len(framed)-blockTrailerLen] == byte(compressionZstdDict) {
			if _, err := d.decodeBlockFrame(framed, uint64(len(block)), nil); err == nil {
				t.Fatal("a block compressed against a dictionary decoded without it")
			}
		}
		comp.close()
		if comp, err = newCompressor(CompressionZstd, 0); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzDecodeBlockIndex(f *testing.F) {
	s := fuzzSeeds(f)
	for i, b := range s.blockIndex {
		f.Add(b, s.dataLens[i])
	}
	f.Fuzz(func(t *testing.T, raw []byte, dataLen uint64) {
		bi, err := decodeBlockIndex(raw, dataLen)
		requireCorruption(t, err)
		if err != nil {
			return
		}
		var off uint64
		for i := 0; i < bi.len(); i++ {
			h := bi.handle(i)
			if bi.fileOffs[i] != off {
				t.Fatalf("block %d at %d, want %d", i, bi.fileOffs[i], off)
			}
			off += h.frameLen()
			// Varints may be overlong, so compare decoded values.
			again, _, err := decodeBlockIndexEntry(appendBlockIndexEntry(nil, &h))
			if err != nil || !reflectEqual(again, h) {
				t.Fatalf("entry %d does not round-trip: %+v -> %+v, %v", i, h, again, err)
			}
		}
	})
}

func FuzzDecodePartitionIndex(f *testing.F) {
	for _, b := range fuzzSeeds(f).partIndex {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		pi, err := decodePartitionIndex(raw)
		requireCorruption(t, err)
		if err != nil {
			return
		}
		// Every entry is found by key, and its info re-encodes.
		w := pi.walker()
		var prev []byte
		for {
			e, ok, err := w.next()
			if err != nil {
				t.Fatalf("validated index does not walk: %v", err)
			}
			if !ok {
				break
			}
			info := w.info(&e)
			got, found := pi.find(info.Key, nil, 0)
			if !found || !bytes.Equal(got.Key, info.Key) || got.firstBlock != info.firstBlock {
				t.Fatalf("find(%x) = %v, %v", info.Key, got, found)
			}
			if (w.n-1)%restartInterval == 0 {
				prev = nil
			}
			if again := appendPartitionEntry(nil, prev, &info); len(again) == 0 {
				t.Fatal("entry re-encodes to nothing")
			}
			prev = info.Key
		}
	})
}

func FuzzDecodeBloomFilter(f *testing.F) {
	s := fuzzSeeds(f)
	for i, b := range s.bloom {
		f.Add(b, s.bloomProbes[i])
	}
	f.Fuzz(func(t *testing.T, raw, key []byte) {
		bf, _, err := decodeBloomFilter(raw)
		requireCorruption(t, err)
		if err == nil {
			bf.mayContain(bloomHash(key))
		}
	})
}

func FuzzDecodeFooter(f *testing.F) {
	s := fuzzSeeds(f)
	for i, b := range s.footers {
		f.Add(b, s.fileSizes[i])
	}
	f.Fuzz(func(t *testing.T, raw []byte, fileSize uint64) {
		ft, _, err := decodeFooter(raw, fileSize)
		requireCorruption(t, err)
		if err == nil && !bytes.Equal(appendFooter(nil, &ft), raw[:footerLen]) {
			t.Fatal("footer does not re-encode to its bytes")
		}
	})
}

func FuzzDecodeProperties(f *testing.F) {
	for _, b := range fuzzSeeds(f).props {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		// The same bytes as properties of a version 2 file and of a
		// version 3 one (which adds the tombstone statistics); the
		// writer writes version 3.
		for _, version := range []uint32{formatVersion2, formatVersion3} {
			p, _, err := decodeProperties(raw, version)
			requireCorruption(t, err)
			if err != nil {
				continue
			}
			again, _, err := decodeProperties(appendProperties(nil, &p), formatVersion3)
			if err != nil || !reflectEqual(again, p) {
				t.Fatalf("version %d properties do not round-trip: %+v -> %+v, %v", version, p, again, err)
			}
		}
	})
}

// FuzzOpen feeds whole files: Open, Check and every kind of read.
func FuzzOpen(f *testing.F) {
	for _, b := range fuzzSeeds(f).files {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		requireCorruption(t, readAllLoose(data))
	})
}

// TestWriteFuzzCorpus refreshes testdata/fuzz/<FuzzName>/seed-NN from
// fuzzSeeds when run with -write-fuzz-corpus. Other files there (such as
// the v1-seed-NN encodings of format version 1, which the current writer
// no longer produces) are left alone.
func TestWriteFuzzCorpus(t *testing.T) {
	if !*writeFuzzCorpus {
		t.Skip("run with -write-fuzz-corpus to rewrite the seed corpus")
	}
	if err := writeSeedCorpus(filepath.Join("testdata", "fuzz"), fuzzCorpus(fuzzSeeds(t))); err != nil {
		t.Fatal(err)
	}
}

// TestWriteFuzzCorpusKeepsOtherSeeds checks that writing the corpus adds
// and refreshes only its own seeds.
func TestWriteFuzzCorpusKeepsOtherSeeds(t *testing.T) {
	dir := t.TempDir()
	kept := filepath.Join(dir, "FuzzDecodeBlock", "v1-seed-00")
	if err := os.MkdirAll(filepath.Dir(kept), 0o755); err != nil {
		t.Fatal(err)
	}
	old := []byte("go test fuzz v1\n[]byte(\"a version 1 block\")\n")
	if err := os.WriteFile(kept, old, 0o644); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, "FuzzDecodeBlock", "seed-00")
	if err := os.WriteFile(stale, old, 0o644); err != nil {
		t.Fatal(err)
	}
	corpus := map[string][][]any{"FuzzDecodeBlock": {{[]byte("new")}}, "FuzzDecodeFooter": {{[]byte("f"), uint64(7)}}}
	if err := writeSeedCorpus(dir, corpus); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		kept:  string(old),
		stale: "go test fuzz v1\n[]byte(\"new\")\n",
		filepath.Join(dir, "FuzzDecodeFooter", "seed-00"): "go test fuzz v1\n[]byte(\"f\")\nuint64(7)\n",
	} {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s: got %q, want %q", path, got, want)
		}
	}
}

// fuzzCorpus lays the seeds out as the arguments of each fuzz target.
func fuzzCorpus(s fuzzSeedSet) map[string][][]any {
	corpus := map[string][][]any{}
	add := func(name string, args ...any) { corpus[name] = append(corpus[name], args) }
	for i, b := range s.blocks {
		add("FuzzDecodeBlock", b)
		add("FuzzDecodeBlockFrame", s.frames[i], uint32(s.rawLens[i]))
	}
	for i := range s.dictFrames {
		add("FuzzDecodeDictFrame", s.dicts[i], s.dictFrames[i], uint32(s.dictRawLens[i]))
	}
	for i := range s.blockIndex {
		add("FuzzDecodeBlockIndex", s.blockIndex[i], s.dataLens[i])
		add("FuzzDecodePartitionIndex", s.partIndex[i])
		add("FuzzDecodeBloomFilter", s.bloom[i], s.bloomProbes[i])
		add("FuzzDecodeFooter", s.footers[i], s.fileSizes[i])
		add("FuzzDecodeProperties", s.props[i])
	}
	for _, f := range s.files {
		add("FuzzOpen", f)
	}
	return corpus
}

// writeSeedCorpus writes corpus[name][i] to dir/name/seed-NN in the go
// fuzz corpus format, replacing only those files.
func writeSeedCorpus(dir string, corpus map[string][][]any) error {
	for name, entries := range corpus {
		target := filepath.Join(dir, name)
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fmt.Errorf("cannot create seed directory: %w", err)
		}
		for i, args := range entries {
			var buf bytes.Buffer
			buf.WriteString("go test fuzz v1\n")
			for _, a := range args {
				switch v := a.(type) {
				case []byte:
					fmt.Fprintf(&buf, "[]byte(%q)\n", v)
				case uint32:
					fmt.Fprintf(&buf, "uint32(%d)\n", v)
				case uint64:
					fmt.Fprintf(&buf, "uint64(%d)\n", v)
				default:
					return fmt.Errorf("cannot write seed of %s: argument of type %T", name, a)
				}
			}
			if err := os.WriteFile(filepath.Join(target, fmt.Sprintf("seed-%02d", i)), buf.Bytes(), 0o644); err != nil {
				return fmt.Errorf("cannot write seed of %s: %w", name, err)
			}
		}
	}
	return nil
}

// reflectEqual compares decoded structures, treating nil and empty byte
// slices alike (an empty key decodes as non-nil).
func reflectEqual(a, b any) bool {
	return reflect.DeepEqual(a, b) || fmt.Sprintf("%+v", a) == fmt.Sprintf("%+v", b)
}

func FuzzDecodePageIndex(f *testing.F) {
	s := fuzzSeeds(f)
	for i, b := range s.pageIndex {
		f.Add(b, s.regionEnds[i])
	}
	f.Fuzz(func(t *testing.T, raw []byte, regionEnd uint64) {
		top, err := decodePageIndex(raw, regionEnd)
		requireCorruption(t, err)
		if err != nil {
			return
		}
		// Pages tile the region, keys ascend, and every page is found by
		// its first key; the index re-encodes to the same decoded values.
		var off uint64
		again := binary.AppendUvarint(nil, uint64(len(top.pages)))
		for i := range top.pages {
			ref := &top.pages[i]
			if ref.dataOff != off {
				t.Fatalf("page %d data at %d, want %d", i, ref.dataOff, off)
			}
			off = ref.offset() + ref.storedLen + blockTrailerLen
			if got := top.search(top.key(i)); got != i {
				t.Fatalf("search(first key of page %d) = %d", i, got)
			}
			var prev []byte
			if i > 0 {
				prev = top.key(i - 1)
			}
			again = appendPageIndexEntry(again, prev, top.key(i), ref)
		}
		if len(top.pages) > 0 {
			again = appendBytes(again, top.lastKey)
		}
		if off != regionEnd {
			t.Fatalf("pages end at %d, region at %d", off, regionEnd)
		}
		top2, err := decodePageIndex(again, regionEnd)
		if err != nil || !reflectEqual(top, top2) {
			t.Fatalf("page index does not round-trip: %v", err)
		}
	})
}

func FuzzDecodeIndexPage(f *testing.F) {
	s := fuzzSeeds(f)
	for i, b := range s.pages {
		ref := s.pageRefs[i]
		k := s.pageKeys[i]
		f.Add(b, uint64(ref.partitions), uint64(ref.blocks), ref.dataLen, k[0], k[1], k[2])
	}
	f.Fuzz(func(t *testing.T, raw []byte, parts, blocks, dataLen uint64, first, next, last []byte) {
		if len(next) == 0 {
			next = nil
		}
		ref := pageRef{partitions: int(parts % (1 << 20)), blocks: int(blocks % (1 << 20)), dataLen: dataLen, dataOff: 100}
		pg, err := decodeIndexPage(raw, &ref, first, next, last)
		requireCorruption(t, err)
		if err != nil {
			return
		}
		// Every partition is found by key in the page, with its blocks
		// inside the page's.
		w := pg.parts.walker()
		for {
			e, ok, err := w.next()
			if err != nil {
				t.Fatalf("validated page does not walk: %v", err)
			}
			if !ok {
				break
			}
			info := w.info(&e)
			got, found := pg.parts.find(info.Key, nil, pg.base)
			if !found || got.firstBlock != info.firstBlock || got.firstBlock+got.numBlocks > pg.blocks.len() {
				t.Fatalf("find(%x) = %+v, %v", info.Key, got, found)
			}
			for b := got.firstBlock; b < got.firstBlock+got.numBlocks; b++ {
				if off := pg.blocks.fileOffs[b]; off < ref.dataOff || off >= ref.dataOff+ref.dataLen {
					t.Fatalf("block %d at %d outside the page's data [%d, %d)", b, off, ref.dataOff, ref.dataOff+ref.dataLen)
				}
			}
		}
	})
}
