package sstable

import (
	"bytes"
	"testing"

	"github.com/eventide/eventide/internal/cputime"
	"github.com/klauspost/compress/huff0"
	"github.com/klauspost/compress/zstd"
)

// An experiment, not a format: could a file carry its entropy tables once,
// so that a data block's zstd blocks read none (issue 15's window slice,
// where Huffman and FSE table setup is ~20% of a cold query's CPU)?
//
// A zstd frame may name a dictionary, and a dictionary in zstd's format
// carries a Huffman table and three FSE tables that the frame's first
// block can reuse (treeless literals, "repeat" sequence modes). A frame
// has one dictionary and a data block has ~8 columns of different kinds,
// so the experiment codes every column (the part between two of the
// writer's splits) as a frame of its own, against a dictionary for its
// column index built with zstd.BuildDict from all the file's blocks, and
// then re-codes each Huffman section with the dictionary's table, treeless,
// where that costs at most columnDictExtra bytes more than its own table.
// Sections of at least min4StreamLiterals literals are in four streams,
// as the writer writes them.
//
// The result (BENCHMARKS.md, session s17-entropy): the zstd bytes fall 4%
// and the blocks read almost no tables, but klauspost/compress v1.20.3
// decodes every sequence of a frame with a dictionary in its Go loop
// (sequenceDecs.decodeSyncSimple returns "unsupported" whenever the
// dictionary has content, and a zstd dictionary has at least one byte),
// so a data block decodes in 8-14% more CPU than the writer's one frame;
// with that loop in assembly (a patch to the library, not applied here)
// it took 25-30% less. Nothing here is used by the writer or the reader.

// columnDictExtra is how many bytes more than with its own table a
// Huffman section may take coded with its dictionary's table.
const columnDictExtra = 8

// columnDictHistory is each dictionary's content length: the least
// BuildDict takes.
const columnDictHistory = 8

type observedBlock struct {
	raw    []byte
	splits []int
}

// peersDataBlocks writes peersTable(3, 8, 520) as the engine writes
// long-lived files and returns its data blocks before compression and
// the zstd payloads the writer made of them.
func peersDataBlocks(tb testing.TB) ([]observedBlock, [][]byte) {
	tb.Helper()
	var blocks []observedBlock
	opts := peersWriterOptions()
	opts.observeDataBlock = func(raw []byte, splits []int) {
		blocks = append(blocks, observedBlock{bytes.Clone(raw), append([]int(nil), splits...)})
	}
	f, _ := writeTable(tb, peersTable(3, 8, 520), opts)
	// Blocks are written in order; a partition's head block is S2.
	var zstdBlocks []observedBlock
	var frames [][]byte
	i := 0
	forEachDataFrame(tb, f, func(payload []byte, c Compression) {
		if i >= len(blocks) {
			tb.Fatalf("more data blocks in the file than the writer saw (%d)", len(blocks))
		}
		if c == CompressionZstd {
			zstdBlocks = append(zstdBlocks, blocks[i])
			frames = append(frames, payload)
		}
		i++
	})
	if i != len(blocks) || len(frames) == 0 {
		tb.Fatalf("%d data blocks in the file (%d zstd), the writer saw %d", i, len(frames), len(blocks))
	}
	return zstdBlocks, frames
}

// columns cuts b.raw at its splits, as appendBlockFrame does.
func (b observedBlock) columns() [][]byte {
	var out [][]byte
	prev := 0
	for _, s := range b.splits {
		if s <= prev || s >= len(b.raw) {
			continue
		}
		out = append(out, b.raw[prev:s])
		prev = s
	}
	return append(out, b.raw[prev:])
}

// columnDicts holds one zstd dictionary (with tables) per column index.
type columnDicts struct {
	dicts [][]byte
	lits  []*huff0.Scratch // each dictionary's literal table
	encs  []*zstd.Encoder
	dec   *zstd.Decoder
}

func newColumnDicts(tb testing.TB, blocks []observedBlock) *columnDicts {
	tb.Helper()
	var byColumn [][][]byte
	for _, b := range blocks {
		for i, col := range b.columns() {
			for len(byColumn) <= i {
				byColumn = append(byColumn, nil)
			}
			byColumn[i] = append(byColumn[i], col)
		}
	}
	cd := &columnDicts{}
	var dopts []zstd.DOption
	level := zstd.EncoderLevelFromZstd(peersWriterOptions().ZstdLevel)
	for i, contents := range byColumn {
		history := make([]byte, columnDictHistory)
		copy(history, contents[0])
		d, err := zstd.BuildDict(zstd.BuildDictOptions{
			ID: uint32(i + 1), Contents: contents, History: history, Offsets: [3]int{1, 4, 8}, Level: level,
		})
		if err != nil {
			tb.Fatalf("build dictionary of column %d: %v", i, err)
		}
		lits, _, err := huff0.ReadTable(d[8:], nil) // after the magic and the ID
		if err != nil {
			tb.Fatalf("read literal table of column %d's dictionary: %v", i, err)
		}
		enc, err := zstd.NewWriter(nil, append(zstdEncoderOptions(level), zstd.WithEncoderDict(d))...)
		if err != nil {
			tb.Fatal(err)
		}
		cd.dicts, cd.lits, cd.encs = append(cd.dicts, d), append(cd.lits, lits), append(cd.encs, enc)
		dopts = append(dopts, zstd.WithDecoderDicts(d))
	}
	dec, err := zstd.NewReader(nil, append(dopts, zstd.WithDecoderConcurrency(1))...)
	if err != nil {
		tb.Fatal(err)
	}
	cd.dec = dec
	return cd
}

// encode returns b's columns as concatenated frames (DecodeAll decodes
// them in one call) and how many sections use their dictionary's table.
func (cd *columnDicts) encode(tb testing.TB, b observedBlock, maxExtra int) ([]byte, int) {
	tb.Helper()
	var out []byte
	reused := 0
	for i, col := range b.columns() {
		if i >= len(cd.encs) {
			tb.Fatalf("column %d has no dictionary", i)
		}
		fr, used := reuseDictLiterals(tb, cd.encs[i].EncodeAll(col, nil), cd.lits[i], maxExtra)
		out = append(out, fr...)
		reused += used
	}
	return out, reused
}

// reuseDictLiterals re-codes the Huffman section of the one-block frame
// fr treeless with dictLits when that costs at most maxExtra bytes more
// than with its own table, and in four streams from min4StreamLiterals
// literals either way. It returns the frame and 1 if dictLits is used.
func reuseDictLiterals(tb testing.TB, fr []byte, dictLits *huff0.Scratch, maxExtra int) ([]byte, int) {
	tb.Helper()
	headerLen, _, _, err := zstdFrameBlocks(fr)
	if err != nil {
		tb.Fatal(err)
	}
	bh, err := parseZstdBlockHeader(fr[headerLen:])
	if err != nil {
		tb.Fatal(err)
	}
	if !bh.last || bh.typ != zstdBlockCompressed {
		return fr, 0
	}
	content := fr[headerLen+zstdBlockHeaderLen : headerLen+zstdBlockHeaderLen+bh.content]
	lh, err := parseLiteralsHeader(content)
	if err != nil {
		tb.Fatal(err)
	}
	if lh.typ != literalsCompressed {
		return fr, 0
	}
	streams := content[lh.headerLen : lh.headerLen+lh.streamSize]
	own, rest, err := huff0.ReadTable(streams, nil)
	if err != nil {
		tb.Fatal(err)
	}
	decode := own.Decoder().Decompress4X
	if lh.oneStream() {
		decode = own.Decoder().Decompress1X
	}
	lits, err := decode(make([]byte, lh.regenSize), rest)
	if err != nil {
		tb.Fatal(err)
	}
	four := len(lits) >= min4StreamLiterals
	code := func(table *huff0.Scratch) []byte {
		var s huff0.Scratch
		s.TransferCTable(table)
		s.Reuse = huff0.ReusePolicyMust
		compress := huff0.Compress1X
		if four {
			compress = huff0.Compress4X
		}
		out, reused, err := compress(lits, &s)
		if err != nil || !reused {
			return nil
		}
		return bytes.Clone(out)
	}
	typ, body, used := literalsCompressed, append(bytes.Clone(streams[:len(streams)-len(rest)]), rest...), 0
	if ownStreams := code(own); ownStreams != nil {
		body = append(bytes.Clone(streams[:len(streams)-len(rest)]), ownStreams...)
	} else {
		four = !lh.oneStream()
	}
	if withDict := code(dictLits); withDict != nil && len(withDict) <= len(body)+maxExtra {
		typ, body, used = literalsTreeless, withDict, 1
	}
	section, ok := appendLiteralsHeader(nil, typ, four, len(lits), len(body))
	if !ok {
		return fr, 0
	}
	section = append(section, body...)
	section = append(section, content[lh.headerLen+lh.streamSize:]...)
	out := appendZstdBlockHeader(bytes.Clone(fr[:headerLen]), zstdBlockHeader{last: true, typ: zstdBlockCompressed, size: len(section)})
	return append(out, section...), used
}

// TestColumnDictionariesOfPeersBlocks codes loadtest/peers-like data
// blocks a column per frame against per-column dictionaries, checks that
// every block decodes back, and logs their bytes against the writer's
// frames. Run with -v to see the figures.
func TestColumnDictionariesOfPeersBlocks(t *testing.T) {
	blocks, frames := peersDataBlocks(t)
	const events = 8 * 520
	writerBytes, columns := 0, 0
	for i, f := range frames {
		writerBytes += len(f)
		columns += len(blocks[i].columns())
	}
	cd := newColumnDicts(t, blocks)
	dictBytes := 0
	for _, d := range cd.dicts {
		dictBytes += len(d)
	}
	for _, maxExtra := range []int{-1 << 20, 0, columnDictExtra, 1 << 20} {
		n, reused := 0, 0
		for _, b := range blocks {
			enc, used := cd.encode(t, b, maxExtra)
			got, err := cd.dec.DecodeAll(enc, nil)
			if err != nil {
				t.Fatalf("decode column frames: %v", err)
			}
			if !bytes.Equal(got, b.raw) {
				t.Fatalf("column frames decode to %d bytes that differ from the block's %d", len(got), len(b.raw))
			}
			n, reused = n+len(enc), reused+used
		}
		t.Logf("max extra %8d: %d bytes (%.2f bytes/event; the writer's frames %d, %.2f) + %d of dictionaries; %d of %d columns re-coded treeless with their dictionary's Huffman table",
			maxExtra, n, float64(n)/events, writerBytes, float64(writerBytes)/events, dictBytes, reused, columns)
	}
}

// BenchmarkDecodeColumnDictionaries decodes the same data blocks as the
// writer's frames ("writer") and as column frames against per-column
// dictionaries ("column-dicts"), in cpu-ns per data block:
//
//	go test ./storage/internal/sstable -run '^$' -bench DecodeColumnDictionaries
func BenchmarkDecodeColumnDictionaries(b *testing.B) {
	blocks, frames := peersDataBlocks(b)
	cd := newColumnDicts(b, blocks)
	var columnFrames [][]byte
	for _, blk := range blocks {
		enc, _ := cd.encode(b, blk, columnDictExtra)
		columnFrames = append(columnFrames, enc)
	}
	plain, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	for _, tc := range []struct {
		name   string
		frames [][]byte
		dec    *zstd.Decoder
	}{
		{"writer", frames, plain},
		{"column-dicts", columnFrames, cd.dec},
	} {
		b.Run(tc.name, func(b *testing.B) {
			dst := make([]byte, 0, 64<<10)
			i := 0
			cpu0 := cputime.MustProcess(b.Fatal)
			for b.Loop() {
				if _, err := tc.dec.DecodeAll(tc.frames[i%len(tc.frames)], dst[:0]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(cputime.MustProcess(b.Fatal)-cpu0)/float64(i), "cpu-ns/op")
			n := 0
			for _, f := range tc.frames {
				n += len(f)
			}
			b.ReportMetric(float64(n)/float64(8*520), "zstd-bytes/event")
		})
	}
}
