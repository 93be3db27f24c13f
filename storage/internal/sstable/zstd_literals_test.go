package sstable

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/eventide/eventide/internal/cputime"
	"github.com/eventide/eventide/storage/internal/base"
	"github.com/klauspost/compress/huff0"
	"github.com/klauspost/compress/zstd"
)

// peersPartition is a partition of loadtest/peers' workload: events with
// TimeUUID keys and its JSON values (workload.go's appendEventJSON).
func peersPartition(rng *rand.Rand, key []byte, events int) testPartition {
	pages := []string{"/home", "/search", "/product", "/cart", "/checkout", "/account"}
	countries := []string{"us", "de", "fr", "jp", "br", "in"}
	devices := []string{"ios", "android", "web"}
	p := testPartition{key: key, del: liveDel()}
	ts := int64(1_718_000_000_000_000)
	node := rng.Uint64()
	for range events {
		ts += 1000 + rng.Int64N(5000)
		v := fmt.Appendf(nil, `{"user":"u%06d","session":"s%08x","page":"%s/%d","referrer":"https://example.com/r/%d","ms":%d,"country":"%s","device":"%s","amount":%d.%02d,"ok":%t}`,
			rng.IntN(100000), rng.Uint32(), pages[rng.IntN(len(pages))], rng.IntN(5000), rng.IntN(300), rng.IntN(2000),
			countries[rng.IntN(len(countries))], devices[rng.IntN(len(devices))], rng.IntN(500), rng.IntN(100), rng.IntN(10) != 0)
		p.cells = append(p.cells, base.Cell{
			Clustering: timeUUIDKey(uint64(ts*10), node), Column: []byte("data"), Kind: base.KindExpiring,
			Timestamp: ts, TTL: 7 * 86400, LocalDeletionTime: writeSecond(ts) + 7*86400, Value: v,
		})
	}
	return p
}

// peersWriterOptions are the options the engine writes loadtest/peers'
// compacted files with (storage's longLivedZstdLevel, no dictionary).
func peersWriterOptions() WriterOptions {
	opts := DefaultWriterOptions()
	opts.ZstdLevel = 7
	opts.NoDictionary = true
	return opts
}

func peersTable(seed uint64, parts, rows int) []testPartition {
	rng := rand.New(rand.NewPCG(seed, 0))
	out := make([]testPartition, parts)
	for i := range out {
		out[i] = peersPartition(rng, []byte("24112620|type"+strconv.Itoa(10+i)), rows)
	}
	return out
}

// forEachDataFrame calls fn with the payload and compression of every
// data block of f.
func forEachDataFrame(t testing.TB, f *memFile, fn func(payload []byte, c Compression)) {
	t.Helper()
	r := openTable(t, f, nil)
	defer r.Close()
	for j := range r.top.pages {
		pg, err := r.page(j, fromDisk)
		if err != nil {
			t.Fatal(err)
		}
		for i, off := range pg.blocks.fileOffs {
			h := pg.blocks.handle(i)
			frame := f.data[off : off+h.frameLen()]
			fn(frame[:len(frame)-blockTrailerLen], Compression(frame[len(frame)-blockTrailerLen]))
		}
	}
}

// TestZstdLiteralSectionsOfPeersBlocks counts the zstd blocks of
// loadtest/peers-like data blocks and their literal sections: how many
// are one stream and how large. Run with -v to see the figures.
func TestZstdLiteralSectionsOfPeersBlocks(t *testing.T) {
	parts := peersTable(1, 4, 520)
	for _, four := range []bool{false, true} {
		opts := peersWriterOptions()
		opts.oneStreamLiterals = !four
		f, props := writeTable(t, parts, opts)
		var frames, zblocks, one, oneLits, oneBytes, rewritable, fourS, fourLits int
		hist := map[string]int{}
		forEachDataFrame(t, f, func(payload []byte, c Compression) {
			if c != CompressionZstd {
				return
			}
			frames++
			secs, err := zstdFrameLiterals(payload)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range secs {
				zblocks++
				if s.literalType < literalsCompressed {
					hist[fmt.Sprintf("type %d", s.literalType)]++
					continue
				}
				b := fmt.Sprintf("%s %4d-%4d", map[bool]string{false: "1X", true: "4X"}[s.fourStreams], s.literals/256*256, s.literals/256*256+255)
				if s.literalType == literalsTreeless {
					b += " treeless"
				}
				hist[b]++
				if s.fourStreams {
					fourS++
					fourLits += s.literals
				} else {
					one++
					oneLits += s.literals
					oneBytes += s.streamBytes
					if s.literals >= min4StreamLiterals {
						rewritable++
					}
				}
			}
		})
		t.Logf("four streams rewrite %v: %.2f bytes/event; %d zstd data frames, %.2f zstd blocks each; 1X sections %.2f a frame (%.0f literals, %.0f bytes each), %.2f of them >= %d literals; 4X sections %.2f a frame (%.0f literals each)",
			four, float64(props.FileBytes)/float64(4*520), frames, float64(zblocks)/float64(frames), float64(one)/float64(frames),
			float64(oneLits)/float64(max(one, 1)), float64(oneBytes)/float64(max(one, 1)), float64(rewritable)/float64(frames), min4StreamLiterals,
			float64(fourS)/float64(frames), float64(fourLits)/float64(max(fourS, 1)))
		for k, v := range hist {
			t.Logf("  %s: %.2f a frame", k, float64(v)/float64(frames))
		}
		if four && rewritable != 0 {
			t.Errorf("%d one-stream sections of >= %d literals left after the rewrite", rewritable, min4StreamLiterals)
		}
		if !four && one == 0 {
			t.Errorf("no one-stream sections without the rewrite: the test does not exercise it")
		}
	}
}

// TestLiteralStreamsRoundTrip rewrites the zstd frames of real data blocks
// and checks that two independent decoders (klauspost's, reused and
// fresh) give the same bytes as the original frame, and that every long
// enough one-stream section became four streams.
func TestLiteralStreamsRoundTrip(t *testing.T) {
	opts := DefaultWriterOptions()
	opts.oneStreamLiterals = true
	opts.NoDictionary = true
	for _, level := range []int{0, 1, 7, 19} {
		opts.ZstdLevel = level
		f, _ := writeTable(t, peersTable(2, 2, 400), opts)
		var ls literalStreams
		dec, err := zstd.NewReader(nil)
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		forEachDataFrame(t, f, func(payload []byte, c Compression) {
			if c != CompressionZstd {
				return
			}
			want, err := dec.DecodeAll(payload, nil)
			if err != nil {
				t.Fatal(err)
			}
			out, n, err := ls.rewrite(nil, payload, min4StreamLiterals)
			if err != nil {
				t.Fatalf("level %d: rewrite: %v", level, err)
			}
			total += n
			checkLiteralStreams(t, dec, out, want)
			secs, err := zstdFrameLiterals(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range secs {
				if s.literalType >= literalsCompressed && !s.fourStreams && s.literals >= min4StreamLiterals {
					t.Errorf("level %d: a one-stream section of %d literals is left", level, s.literals)
				}
			}
		})
		dec.Close()
		if total == 0 {
			t.Errorf("level %d: nothing rewritten", level)
		}
	}
}

// TestRewriteKeepsWhatDoesNotDecodeBack: an encoding that does not
// decode back to its section's literals (here every four-stream encoding
// has its last byte flipped) is never written, whether it is one
// section's four streams or a run's shared table: the frames decode to
// the original bytes. The block checksum covers what is stored, so
// nothing after the rewrite would catch it.
func TestRewriteKeepsWhatDoesNotDecodeBack(t *testing.T) {
	for _, tc := range []struct {
		name          string
		maxShareExtra int  // 0: four streams only
		wantNone      bool // no section may count as rewritten
	}{
		{"four streams", 0, true},
		// Shared runs may still be taken in one stream, which this
		// encoder does not corrupt: only the frame's bytes are checked.
		{"shared tables", 1 << 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := peersWriterOptions()
			opts.oneStreamLiterals = true
			f, _ := writeTable(t, peersTable(2, 2, 400), opts)
			ls := literalStreams{maxShareExtra: tc.maxShareExtra, compress4X: func(in []byte, s *huff0.Scratch) ([]byte, bool, error) {
				out, reused, err := huff0.Compress4X(in, s)
				if err == nil && len(out) > 0 {
					out[len(out)-1] ^= 0x5a
				}
				return out, reused, err
			}}
			dec, err := zstd.NewReader(nil)
			if err != nil {
				t.Fatal(err)
			}
			defer dec.Close()
			frames := 0
			forEachDataFrame(t, f, func(payload []byte, c Compression) {
				if c != CompressionZstd {
					return
				}
				frames++
				want, err := dec.DecodeAll(payload, nil)
				if err != nil {
					t.Fatal(err)
				}
				out, n, err := ls.rewrite(nil, payload, min4StreamLiterals)
				if err != nil {
					t.Fatalf("rewrite: %v", err)
				}
				if tc.wantNone && n != 0 {
					t.Errorf("%d sections rewritten from encodings that do not decode back", n)
				}
				checkLiteralStreams(t, dec, out, want)
			})
			if frames == 0 {
				t.Fatal("no zstd data block to rewrite")
			}
		})
	}
}

// checkLiteralStreams decodes frame with dec and with a decoder of its
// own, and compares both with want.
func checkLiteralStreams(t testing.TB, dec *zstd.Decoder, frame, want []byte) {
	t.Helper()
	got, err := dec.DecodeAll(frame, nil)
	if err != nil {
		t.Fatalf("decode rewritten frame: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("rewritten frame decodes to %d bytes that differ from the original's %d", len(got), len(want))
	}
	fresh, err := zstd.NewReader(bytes.NewReader(frame), zstd.WithDecoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(fresh); err != nil {
		t.Fatalf("stream-decode rewritten frame: %v", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("rewritten frame stream-decodes to %d bytes that differ from the original's %d", buf.Len(), len(want))
	}
}

// BenchmarkDecodeZstdDataBlock decodes the zstd data blocks of
// loadtest/peers-like partitions, with the encoder's one-stream literal
// sections ("1x"), with them rewritten in four streams ("4x"), and with
// tables shared too ("shared", the writer's default):
//
//	go test ./storage/internal/sstable -run '^$' -bench DecodeZstdDataBlock
func BenchmarkDecodeZstdDataBlock(b *testing.B) {
	parts := peersTable(3, 8, 520)
	for _, tc := range literalVariants {
		b.Run(tc.name, func(b *testing.B) {
			opts := peersWriterOptions()
			opts.oneStreamLiterals, opts.ownLiteralTables = tc.oneStream, tc.ownTables
			f, props := writeTable(b, parts, opts)
			var frames [][]byte
			raw := 0
			forEachDataFrame(b, f, func(payload []byte, c Compression) {
				if c == CompressionZstd {
					frames = append(frames, payload)
				}
			})
			dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
			if err != nil {
				b.Fatal(err)
			}
			defer dec.Close()
			dst := make([]byte, 0, 64<<10)
			i := 0
			cpu0 := cputime.MustProcess(b.Fatal)
			for b.Loop() {
				out, err := dec.DecodeAll(frames[i%len(frames)], dst[:0])
				if err != nil {
					b.Fatal(err)
				}
				raw += len(out)
				i++
			}
			b.ReportMetric(float64(cputime.MustProcess(b.Fatal)-cpu0)/float64(i), "cpu-ns/op")
			b.SetBytes(int64(raw / max(i, 1)))
			b.ReportMetric(float64(props.FileBytes)/float64(8*520), "bytes/event")
		})
	}
}

// literalFrames returns zstd frames as the writer's encoder makes them
// (several zstd blocks, one per part, from text of a few kinds), and
// frames built by hand (treelessFrame, mixedFrames).
func literalFrames(t testing.TB) [][]byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(4, 5))
	var frames [][]byte
	for _, level := range []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault, zstd.SpeedBetterCompression} {
		enc, err := zstd.NewWriter(nil, append(zstdEncoderOptions(level), zstd.WithAllLitEntropyCompression(true))...)
		if err != nil {
			t.Fatal(err)
		}
		for _, partLen := range []int{300, 700, 1500, 3000} {
			var raw []byte
			var splits []int
			for p := range 6 {
				for len(raw) < (p+1)*partLen {
					if p%3 == 2 {
						raw = fmt.Appendf(raw, "%016x", rng.Uint64())
					} else {
						raw = fmt.Appendf(raw, "%06d", rng.IntN(1000000))
					}
				}
				splits = append(splits, len(raw))
			}
			var out appendWriter
			enc.ResetContentSize(&out, int64(len(raw)))
			prev := 0
			for _, s := range splits {
				if _, err := enc.Write(raw[prev:s]); err != nil {
					t.Fatal(err)
				}
				if s < len(raw) {
					if err := enc.Flush(); err != nil {
						t.Fatal(err)
					}
				}
				prev = s
			}
			if err := enc.Close(); err != nil {
				t.Fatal(err)
			}
			frames = append(frames, out.b, enc.EncodeAll(raw[:partLen], nil))
		}
		enc.Close()
	}
	for _, n := range []int{100, 300, 900} {
		frame, _ := treelessFrame(t, rng, n)
		frames = append(frames, frame)
	}
	return append(frames, mixedFrames(t, rng)...)
}

// treelessFrame builds a zstd frame by hand (RFC 8878) whose zstd blocks
// hold literals only (no sequences): the first a one-stream section with
// its Huffman table, the others one-stream treeless sections that reuse
// it, each of n literals (less than 1024). klauspost/compress's encoder
// did not write treeless sections in the frames tried, but other
// encoders do, and the rewriter must keep them right. It returns the
// frame and its content.
func treelessFrame(t testing.TB, rng *rand.Rand, n int) (frame, content []byte) {
	t.Helper()
	var parts [][]byte
	for range 3 {
		var p []byte
		for len(p) < n {
			p = fmt.Appendf(p, "%06d", rng.IntN(1000000))
		}
		parts = append(parts, p[:n])
	}
	return literalsOnlyFrame(t, parts, []bool{false, true, true})
}

// TestLiteralStreamsTreeless checks frames whose later literal sections
// reuse an earlier section's table: those are rewritten too, and the
// frame decodes the same.
func TestLiteralStreamsTreeless(t *testing.T) {
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	var ls literalStreams
	rng := rand.New(rand.NewPCG(6, 7))
	for _, n := range []int{200, 256, 600, 1000} {
		frame, want := treelessFrame(t, rng, n)
		got, err := dec.DecodeAll(frame, nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%d literals: the hand-built frame does not decode to its content: %v", n, err)
		}
		before, err := zstdFrameLiterals(frame)
		if err != nil {
			t.Fatal(err)
		}
		out, rewritten, err := ls.rewrite(nil, frame, min4StreamLiterals)
		if err != nil {
			t.Fatalf("%d literals: rewrite: %v", n, err)
		}
		checkLiteralStreams(t, dec, out, want)
		after, err := zstdFrameLiterals(out)
		if err != nil {
			t.Fatal(err)
		}
		if len(after) != len(before) {
			t.Fatalf("rewritten frame has %d zstd blocks, want %d", len(after), len(before))
		}
		wantFour := n >= min4StreamLiterals
		for i, s := range before {
			a := after[i]
			if a.literalType != s.literalType || a.literals != s.literals || a.fourStreams != wantFour {
				t.Errorf("%d literals, zstd block %d: type %d, %d literals, four streams %v after the rewrite; want %d, %d, %v",
					n, i, a.literalType, a.literals, a.fourStreams, s.literalType, s.literals, wantFour)
			}
		}
		if wantFour && rewritten != len(before) {
			t.Errorf("%d literals: rewrote %d sections, want %d", n, rewritten, len(before))
		}
	}
}

func TestAppendStreamsHeader(t *testing.T) {
	for _, tc := range []struct{ regen, size, wantLen int }{
		{256, 100, 3}, {1023, 1023, 3}, {1024, 500, 4}, {500, 1024, 4}, {16383, 16383, 4}, {16384, 9000, 5}, {1<<18 - 1, 1<<18 - 1, 5},
	} {
		for _, typ := range []int{literalsCompressed, literalsTreeless} {
			b, ok := appendStreamsHeader(nil, typ, tc.regen, tc.size)
			if !ok || len(b) != tc.wantLen {
				t.Fatalf("appendStreamsHeader(%d, %d, %d) = %x, %v; want %d bytes", typ, tc.regen, tc.size, b, ok, tc.wantLen)
			}
			h, err := parseLiteralsHeader(append(b, make([]byte, tc.size)...))
			if err != nil {
				t.Fatal(err)
			}
			if h.typ != typ || h.regenSize != tc.regen || h.streamSize != tc.size || h.oneStream() || h.headerLen != tc.wantLen {
				t.Errorf("header %x parses as %+v, want type %d, %d literals, %d bytes, four streams", b, h, typ, tc.regen, tc.size)
			}
		}
	}
	if b, ok := appendStreamsHeader(nil, literalsCompressed, 1<<18, 10); ok {
		t.Errorf("appendStreamsHeader took 1<<18 literals: %x", b)
	}
}

// FuzzLiteralStreams checks the rewriter on any bytes: it never panics,
// and a frame it rewrites decodes to what the original decodes to.
func FuzzLiteralStreams(f *testing.F) {
	for _, frame := range literalFrames(f) {
		f.Add(frame, uint16(min4StreamLiterals))
	}
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x00, 0x01, 0x00, 0x00}, uint16(1))
	fuzzLiteralRewrite(f, &literalStreams{})
}

// fuzzLiteralRewrite runs ls.rewrite on the fuzzer's frames: it must never
// panic, and a frame it rewrites must decode to what the original decodes
// to.
func fuzzLiteralRewrite(f *testing.F, ls *literalStreams) {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<22))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(dec.Close)
	f.Fuzz(func(t *testing.T, frame []byte, minLits uint16) {
		out, n, err := ls.rewrite(nil, frame, int(minLits))
		if err != nil || n == 0 {
			return
		}
		want, err := dec.DecodeAll(frame, nil)
		if err != nil {
			// Not a frame a decoder takes; the writer never
			// feeds the rewriter one.
			return
		}
		got, err := dec.DecodeAll(out, nil)
		if err != nil {
			t.Fatalf("rewritten frame does not decode: %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("rewritten frame decodes to %d bytes that differ from the original's %d", len(got), len(want))
		}
	})
}

// BenchmarkWriteZstdLiterals writes loadtest/peers-like partitions as the
// engine's long-lived files, with the encoder's literal sections ("1x"),
// with the four-stream rewrite ("4x") and with shared tables too
// ("shared"): what the rewrites cost the writer.
func BenchmarkWriteZstdLiterals(b *testing.B) {
	parts := peersTable(3, 8, 520)
	for _, tc := range literalVariants {
		b.Run(tc.name, func(b *testing.B) {
			opts := peersWriterOptions()
			opts.oneStreamLiterals, opts.ownLiteralTables = tc.oneStream, tc.ownTables
			b.SetBytes(rawEventBytes(parts))
			cpu0 := cputime.MustProcess(b.Fatal)
			for b.Loop() {
				writeTable(b, parts, opts)
			}
			b.ReportMetric(float64(cputime.MustProcess(b.Fatal)-cpu0)/float64(b.N)/float64(8*520), "cpu-ns/event")
		})
	}
}

// TestLiteralStreamsThroughReader writes files whose data blocks have
// rewritten sections, with and without a dictionary (compression 3
// frames), and reads every cell back through the Reader.
func TestLiteralStreamsThroughReader(t *testing.T) {
	parts := peersTable(5, 3, 400)
	for _, tc := range []struct {
		name string
		opts WriterOptions
		want Compression
	}{
		{"level 7", peersWriterOptions(), CompressionZstd},
		{"dictionary, 4 KiB blocks", WriterOptions{Compression: CompressionZstd, BlockSize: 4 << 10}, compressionZstdDict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := writeTable(t, parts, tc.opts)
			four := 0
			forEachDataFrame(t, f, func(payload []byte, c Compression) {
				if c != tc.want {
					return
				}
				secs, err := zstdFrameLiterals(payload)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range secs {
					if s.fourStreams && s.literals < 1024 {
						four++
					}
				}
			})
			if four == 0 {
				t.Fatalf("no %v frame has a rewritten four-stream section", tc.want)
			}
			r := openTable(t, f, NewCache(1<<20))
			defer r.Close()
			if err := r.Check(); err != nil {
				t.Fatal(err)
			}
			for _, p := range parts {
				info, ok := r.Partition(p.key)
				if !ok {
					t.Fatalf("partition %q not found", p.key)
				}
				it := r.NewPartitionIter(info, IterOptions{})
				got := collect(t, it)
				it.Close()
				if d := diffCells(got, p.cells); d != "" {
					t.Fatalf("partition %q: %s", p.key, d)
				}
			}
		})
	}
}

// literalVariants are the writer's literal sections, for benchmarks: as
// the encoder writes them, in four streams, and with shared tables too.
var literalVariants = []struct {
	name                 string
	oneStream, ownTables bool
}{{"1x", true, true}, {"4x", false, true}, {"shared", false, false}}

// literalTables counts the literal sections of the zstd data blocks of f
// that describe a Huffman table and those that reuse one.
func literalTables(t testing.TB, f *memFile) (tables, treeless int) {
	t.Helper()
	forEachDataFrame(t, f, func(payload []byte, c Compression) {
		if c != CompressionZstd {
			return
		}
		secs, err := zstdFrameLiterals(payload)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secs {
			switch s.literalType {
			case literalsCompressed:
				tables++
			case literalsTreeless:
				treeless++
			}
		}
	})
	return tables, treeless
}

// TestSharedLiteralTablesOfPeersBlocks: the writer codes some runs of
// loadtest/peers-like columns with one Huffman table, so that their data
// blocks carry fewer tables, for a few bytes. Run with -v for the
// figures.
func TestSharedLiteralTablesOfPeersBlocks(t *testing.T) {
	parts := peersTable(1, 4, 520)
	own := peersWriterOptions()
	own.ownLiteralTables = true
	fOwn, propsOwn := writeTable(t, parts, own)
	fShared, propsShared := writeTable(t, parts, peersWriterOptions())
	ownTables, ownTreeless := literalTables(t, fOwn)
	tables, treeless := literalTables(t, fShared)
	t.Logf("own tables: %d tables, %d treeless, %.3f bytes/event; shared: %d tables, %d treeless, %.3f bytes/event",
		ownTables, ownTreeless, float64(propsOwn.FileBytes)/(4*520), tables, treeless, float64(propsShared.FileBytes)/(4*520))
	if ownTreeless != 0 {
		t.Errorf("%d treeless sections without shared tables: the encoder writes some, and the test measures nothing", ownTreeless)
	}
	if treeless == 0 || tables+treeless != ownTables {
		t.Errorf("shared tables: %d tables and %d treeless sections, want fewer than %d tables and %d sections in all", tables, treeless, ownTables, ownTables)
	}
	// Each shared section may cost maxSharedTableExtra bytes more.
	if extra := int(propsShared.FileBytes - propsOwn.FileBytes); extra > treeless*maxSharedTableExtra {
		t.Errorf("shared tables cost %d bytes, more than %d for %d treeless sections", extra, treeless*maxSharedTableExtra, treeless)
	}
}

// TestSharedLiteralTablesRoundTrip rewrites the zstd frames of real data
// blocks with tables shared (with no bound on their cost, to share as
// many as can be, and with the writer's) and checks that two decoders
// give the original bytes.
func TestSharedLiteralTablesRoundTrip(t *testing.T) {
	opts := DefaultWriterOptions()
	opts.oneStreamLiterals = true
	opts.NoDictionary = true
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	for _, level := range []int{0, 1, 7, 19} {
		for _, extra := range []int{maxSharedTableExtra, 1 << 20} {
			opts.ZstdLevel = level
			f, _ := writeTable(t, peersTable(2, 2, 400), opts)
			ls := literalStreams{maxShareExtra: extra}
			shared := 0
			forEachDataFrame(t, f, func(payload []byte, c Compression) {
				if c != CompressionZstd {
					return
				}
				want, err := dec.DecodeAll(payload, nil)
				if err != nil {
					t.Fatal(err)
				}
				out, _, err := ls.rewrite(nil, payload, min4StreamLiterals)
				if err != nil {
					t.Fatalf("level %d, extra %d: rewrite: %v", level, extra, err)
				}
				checkLiteralStreams(t, dec, out, want)
				secs, err := zstdFrameLiterals(out)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range secs {
					if s.literalType == literalsTreeless {
						shared++
					}
				}
			})
			if extra > maxSharedTableExtra && shared == 0 {
				t.Errorf("level %d: no table shared without a bound on the cost", level)
			}
		}
	}
}

// literalsOnlyFrame builds a zstd frame by hand (RFC 8878) of one zstd
// block per part, each holding literals only, in one stream: with a
// Huffman table of its own, or treeless (reusing the previous one) where
// treeless says so. It returns the frame and its content.
func literalsOnlyFrame(t testing.TB, parts [][]byte, treeless []bool) (frame, content []byte) {
	t.Helper()
	for _, p := range parts {
		content = append(content, p...)
	}
	frame = []byte{0x28, 0xb5, 0x2f, 0xfd, 0xa0} // magic; single segment, 4-byte content size
	frame = binary.LittleEndian.AppendUint32(frame, uint32(len(content)))
	var s huff0.Scratch
	for i, p := range parts {
		typ := literalsCompressed
		s.Reuse = huff0.ReusePolicyNone
		if treeless[i] {
			typ = literalsTreeless
			s.Reuse = huff0.ReusePolicyMust
		}
		lits, reused, err := huff0.Compress1X(p, &s)
		if err != nil || reused != treeless[i] {
			t.Fatalf("Compress1X: reused %v, %v", reused, err)
		}
		v := typ | len(p)<<4 | len(lits)<<14
		block := []byte{byte(v), byte(v >> 8), byte(v >> 16)}
		block = append(block, lits...)
		block = append(block, 0) // no sequences
		frame = appendZstdBlockHeader(frame, zstdBlockHeader{last: i == len(parts)-1, typ: zstdBlockCompressed, size: len(block)})
		frame = append(frame, block...)
	}
	return frame, content
}

// TestSharedLiteralTablesNotWithTreeless: a frame that already has
// treeless sections is not given shared tables: sharing a table between
// the sections before one would change the table it reuses. Here two
// digit columns, which would share a table, are followed by a treeless
// section that reuses the second one's. The frame is rewritten in four
// streams only, and decodes the same.
func TestSharedLiteralTablesNotWithTreeless(t *testing.T) {
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	rng := rand.New(rand.NewPCG(8, 9))
	digits := func(n int) []byte {
		var p []byte
		for len(p) < n {
			p = fmt.Appendf(p, "%06d", rng.IntN(1000000))
		}
		return p[:n]
	}
	parts := [][]byte{digits(600), digits(600), digits(600)}
	// Without the treeless section, the two columns share a table.
	ls := literalStreams{maxShareExtra: 1 << 20}
	pair, _ := literalsOnlyFrame(t, parts[:2], []bool{false, false})
	out, _, err := ls.rewrite(nil, pair, min4StreamLiterals)
	if err != nil {
		t.Fatal(err)
	}
	if secs, err := zstdFrameLiterals(out); err != nil || secs[1].literalType != literalsTreeless {
		t.Fatalf("two digit columns do not share a table (%+v, %v): the test shows nothing", secs, err)
	}
	frame, want := literalsOnlyFrame(t, parts, []bool{false, false, true})
	out, _, err = ls.rewrite(nil, frame, min4StreamLiterals)
	if err != nil {
		t.Fatalf("rewrite: %v", err)
	}
	checkLiteralStreams(t, dec, out, want)
	before, _ := zstdFrameLiterals(frame)
	after, err := zstdFrameLiterals(out)
	if err != nil {
		t.Fatal(err)
	}
	for i := range before {
		if after[i].literalType != before[i].literalType {
			t.Errorf("zstd block %d: literals type %d, want %d", i, after[i].literalType, before[i].literalType)
		}
	}
}

// FuzzSharedLiteralTables checks the rewriter with tables shared wherever
// it can: it never panics, and a frame it rewrites decodes to what the
// original decodes to.
func FuzzSharedLiteralTables(f *testing.F) {
	for _, frame := range literalFrames(f) {
		f.Add(frame, uint16(min4StreamLiterals))
	}
	fuzzLiteralRewrite(f, &literalStreams{maxShareExtra: 1 << 20})
}

// frameBlock is one zstd block of a hand-built frame (mixedFrame): its
// content's bytes, and how it is coded.
type frameBlock struct {
	kind int // one of the block kinds below
	lits []byte
}

// Block kinds of mixedFrame.
const (
	huffBlock     = iota // literals only, one stream, with a Huffman table of its own
	treelessBlock        // literals only, one stream, with the previous Huffman table
	rawBlock             // a raw zstd block
	rleBlock             // an RLE zstd block (lits is one byte repeated)
	rawLitsBlock         // a compressed block of raw literals, no sequences (under 32)
	rleLitsBlock         // a compressed block of RLE literals, no sequences (under 32)
)

// mixedFrame builds a zstd frame by hand (RFC 8878) of one zstd block per
// element of blocks, coded as its kind says, with a content checksum if
// checksum is set. It returns the frame and its content. The raw and RLE
// blocks and literal sections do not change the Huffman table that a
// later treeless section reuses (RFC 8878, 3.1.1.3.1.1): that is the
// table of the last section that described one.
func mixedFrame(t testing.TB, blocks []frameBlock, checksum bool) (frame, content []byte) {
	t.Helper()
	for _, b := range blocks {
		content = append(content, b.lits...)
	}
	descriptor := byte(0xa0) // single segment, 4-byte content size
	if checksum {
		descriptor |= 0x04
	}
	frame = []byte{0x28, 0xb5, 0x2f, 0xfd, descriptor}
	frame = binary.LittleEndian.AppendUint32(frame, uint32(len(content)))
	var s huff0.Scratch
	for i, b := range blocks {
		bh := zstdBlockHeader{last: i == len(blocks)-1, typ: zstdBlockCompressed}
		var block []byte
		switch b.kind {
		case huffBlock, treelessBlock:
			typ, treeless := literalsCompressed, b.kind == treelessBlock
			s.Reuse = huff0.ReusePolicyNone
			if treeless {
				typ, s.Reuse = literalsTreeless, huff0.ReusePolicyMust
			}
			lits, reused, err := huff0.Compress1X(b.lits, &s)
			if err != nil || reused != treeless {
				t.Fatalf("zstd block %d: Compress1X: reused %v, %v", i, reused, err)
			}
			v := typ | len(b.lits)<<4 | len(lits)<<14
			block = append([]byte{byte(v), byte(v >> 8), byte(v >> 16)}, lits...)
		case rawBlock:
			bh.typ = zstdBlockRaw
			block = b.lits
		case rleBlock:
			bh.typ = zstdBlockRLE
			block = b.lits[:1]
		case rawLitsBlock:
			block = append([]byte{byte(len(b.lits) << 3)}, b.lits...)
		case rleLitsBlock:
			block = []byte{byte(len(b.lits)<<3 | 1), b.lits[0]}
		}
		if bh.typ == zstdBlockCompressed {
			block = append(block, 0) // no sequences
		}
		bh.size = len(block)
		if bh.typ == zstdBlockRLE {
			bh.size = len(b.lits)
		}
		frame = appendZstdBlockHeader(frame, bh)
		frame = append(frame, block...)
	}
	if checksum {
		frame = binary.LittleEndian.AppendUint32(frame, uint32(xxhash.Sum64(content)))
	}
	return frame, content
}

// mixedFrames returns hand-built frames whose Huffman-coded literal
// sections have raw and RLE zstd blocks and literal sections between
// them, with and without a content checksum, with and without treeless
// sections.
func mixedFrames(t testing.TB, rng *rand.Rand) [][]byte {
	t.Helper()
	digits := func(n int) []byte {
		var p []byte
		for len(p) < n {
			p = fmt.Appendf(p, "%06d", rng.IntN(1000000))
		}
		return p[:n]
	}
	random := func(n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		return p
	}
	var frames [][]byte
	for _, checksum := range []bool{false, true} {
		for _, treeless := range []bool{false, true} {
			later := huffBlock
			if treeless {
				later = treelessBlock
			}
			blocks := []frameBlock{
				{huffBlock, digits(300)},
				{rawBlock, random(40)},
				{later, digits(700)},
				{rleBlock, bytes.Repeat([]byte{'z'}, 50)},
				{rawLitsBlock, []byte("raw literals")},
				{later, digits(200)},
				{rleLitsBlock, bytes.Repeat([]byte{'q'}, 20)},
				{later, digits(900)},
			}
			frame, _ := mixedFrame(t, blocks, checksum)
			frames = append(frames, frame)
		}
	}
	return frames
}

// TestLiteralStreamsAcrossOtherBlocks rewrites frames whose Huffman-coded
// literal sections have raw and RLE zstd blocks and literal sections
// between them, with and without a content checksum: in four streams
// only, and with tables shared. A treeless section reuses the table of
// the last section that described one, whatever lies between, so
// sections on either side of a raw block may share a table; in a frame
// that already has treeless sections, none is added. Every rewritten
// frame must decode, checksum included, to the content.
func TestLiteralStreamsAcrossOtherBlocks(t *testing.T) {
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	rng := rand.New(rand.NewPCG(10, 11))
	for i, frame := range mixedFrames(t, rng) {
		want, err := dec.DecodeAll(frame, nil)
		if err != nil {
			t.Fatalf("frame %d: the hand-built frame does not decode: %v", i, err)
		}
		before, err := zstdFrameLiterals(frame)
		if err != nil {
			t.Fatal(err)
		}
		hadTreeless := false
		for _, s := range before {
			hadTreeless = hadTreeless || s.literalType == literalsTreeless
		}
		for _, extra := range []int{0, 1 << 20} {
			ls := literalStreams{maxShareExtra: extra}
			out, n, err := ls.rewrite(nil, frame, min4StreamLiterals)
			if err != nil || n == 0 {
				t.Fatalf("frame %d, extra %d: rewrote %d sections: %v", i, extra, n, err)
			}
			checkLiteralStreams(t, dec, out, want)
			after, err := zstdFrameLiterals(out)
			if err != nil || len(after) != len(before) {
				t.Fatalf("frame %d, extra %d: %d zstd blocks after the rewrite (%v), want %d", i, extra, len(after), err, len(before))
			}
			treeless := 0
			for k, s := range after {
				if s.blockType != before[k].blockType || (s.literalType < literalsCompressed) != (before[k].literalType < literalsCompressed) {
					t.Errorf("frame %d, extra %d, zstd block %d: type %d, literals type %d; want %d, %d",
						i, extra, k, s.blockType, s.literalType, before[k].blockType, before[k].literalType)
				}
				if s.literalType == literalsTreeless {
					treeless++
				}
			}
			if !hadTreeless && extra > 0 && treeless == 0 {
				t.Errorf("frame %d: no table shared across the raw and RLE blocks", i)
			}
			if !hadTreeless && extra == 0 && treeless > 0 {
				t.Errorf("frame %d: %d treeless sections without shared tables", i, treeless)
			}
		}
	}
}

// TestSharedLiteralTablesOneStreamLimit: a one-stream section's sizes
// have 10 bits, and a section of nearly 1024 literals that stays in one
// stream (here every section does: the four-stream threshold is above
// them) may no longer fit them when coded with a table shared with the
// sections after it. Such a run is not taken; before, the rewrite failed
// on it and the whole frame stayed as the encoder wrote it. The two digit
// columns after it still share a table.
func TestSharedLiteralTablesOneStreamLimit(t *testing.T) {
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 1))
		// Skewed over a wide alphabet: about 1000 bytes with its own
		// table, close to the limit.
		wide := make([]byte, 1023)
		for i := range wide {
			wide[i] = byte(rng.IntN(1 + rng.IntN(256)))
		}
		digits := func(n int) []byte {
			var p []byte
			for len(p) < n {
				p = fmt.Appendf(p, "%06d", rng.IntN(1000000))
			}
			return p[:n]
		}
		frame, want := mixedFrame(t, []frameBlock{{huffBlock, wide}, {huffBlock, digits(600)}, {huffBlock, digits(600)}}, false)
		ls := literalStreams{maxShareExtra: 1 << 20}
		out, n, err := ls.rewrite(nil, frame, 1<<16)
		if err != nil {
			t.Fatalf("seed %d: rewrite: %v", seed, err)
		}
		checkLiteralStreams(t, dec, out, want)
		secs, err := zstdFrameLiterals(out)
		if err != nil {
			t.Fatal(err)
		}
		if n != 2 || secs[0].literalType != literalsCompressed || secs[2].literalType != literalsTreeless {
			t.Errorf("seed %d: %d sections rewritten, types %d, %d, %d; want the last two sharing a table", seed, n, secs[0].literalType, secs[1].literalType, secs[2].literalType)
		}
	}
}
