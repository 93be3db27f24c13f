package sstable

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/eventide/eventide/internal/cputime"
	"github.com/eventide/eventide/storage/internal/base"
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
		opts := DefaultWriterOptions()
		opts.oneStreamLiterals = !four
		opts.NoDictionary = true
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
// sections ("1x") and with them rewritten in four streams ("4x"):
//
//	go test ./storage/internal/sstable -run '^$' -bench DecodeZstdDataBlock
func BenchmarkDecodeZstdDataBlock(b *testing.B) {
	parts := peersTable(3, 8, 520)
	for _, four := range []bool{false, true} {
		name := map[bool]string{false: "1x", true: "4x"}[four]
		b.Run(name, func(b *testing.B) {
			opts := DefaultWriterOptions()
			opts.NoDictionary = true
			opts.oneStreamLiterals = !four
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
