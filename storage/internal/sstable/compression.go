package sstable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/eventide/eventide/storage/internal/base"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Compression is a block compression algorithm. The numeric values are
// stored on disk (in every block trailer and in the properties); never
// renumber or reuse them.
type Compression uint8

const (
	// CompressionNone stores blocks as they are.
	CompressionNone Compression = 0
	// CompressionZstd is zstd, the default: the smallest files.
	CompressionZstd Compression = 1
	// CompressionS2 is S2 (a faster Snappy): larger files, cheaper CPU.
	CompressionS2 Compression = 2
)

// compressionZstdDict marks a data block compressed with zstd against
// its file's dictionary (format version 5; see fileDict). It is a block
// trailer value only, never a writer setting: a zstd Writer picks it by
// itself for the data blocks of a file large enough to carry a
// dictionary.
const compressionZstdDict Compression = 3

// Valid reports whether c is a known compression setting (none, zstd or
// s2; compressionZstdDict is not one).
func (c Compression) Valid() bool { return c <= CompressionS2 }

func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionZstd:
		return "zstd"
	case CompressionS2:
		return "s2"
	case compressionZstdDict:
		return "zstd+dict"
	}
	return fmt.Sprintf("compression(%d)", uint8(c))
}

// ParseCompression parses "none", "zstd" or "s2".
func ParseCompression(s string) (Compression, error) {
	switch s {
	case "none":
		return CompressionNone, nil
	case "zstd":
		return CompressionZstd, nil
	case "s2":
		return CompressionS2, nil
	}
	return 0, fmt.Errorf("cannot parse compression %q: want none, zstd or s2", s)
}

// crcTable is CRC-32C (Castagnoli), hardware accelerated on amd64 and
// arm64. It is a read-only table, not mutable state.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// blockChecksum covers the payload and the compression byte, so a flipped
// compression byte is caught like any other flipped byte.
func blockChecksum(payload []byte, c Compression) uint32 {
	crc := crc32.Update(0, crcTable, payload)
	return crc32.Update(crc, crcTable, compressionBytes[c][:])
}

// compressionBytes holds each compression byte as the one-byte slice the
// checksum takes (a slice made per call escaped to the heap).
var compressionBytes = func() (b [256][1]byte) {
	for i := range b {
		b[i][0] = byte(i)
	}
	return b
}()

// compressor compresses the blocks of one Writer. It is not safe for
// concurrent use (a Writer is single-goroutine).
type compressor struct {
	zstd  *zstd.Encoder
	level zstd.EncoderLevel
	out   appendWriter
	// dict compresses data blocks against the file's dictionary, once
	// the Writer has one (setDict).
	dict *zstd.Encoder
	// minFourStreams, if not 0, is the fewest literals of a one-stream
	// literals section that appendBlockFrame rewrites in four streams
	// (see literalStreams).
	minFourStreams int
	lits           literalStreams
	litsFrame      []byte
}

// appendWriter is an io.Writer appending to a byte slice, for the
// streaming zstd encoder.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// zstdEncoders pools encoders per level across Writers: creating one
// allocates and clears its match history (megabytes at the higher
// levels), which dominated compaction CPU when flushes and compactions
// wrote many small SSTables. An encoder is returned to the pool only
// between frames (see compressor.close), so a pooled one holds no state
// that a later frame could see.
var zstdEncoders [zstd.SpeedBestCompression + 1]sync.Pool

// zstdDictEncoders pools the encoders that compress data blocks against a
// file's dictionary, all at zstdDictLevel. setDict gives a pooled one the
// next file's dictionary: the encoder compares dictionaries by identity,
// so it rebuilds its dictionary tables and never matches against the
// previous file's content.
var zstdDictEncoders sync.Pool

// zstdDictLevel is the level of every block compressed against a
// dictionary, whatever the file's ZstdLevel: the encoder restores its
// match tables from the dictionary's before each block, a copy of the
// whole table that grows with the level (about 256 KiB at the fastest,
// 4 MiB at level 7). Measured on 8 KiB blocks of JSON events: fastest
// with the dictionary compresses to 32.8% in 30 µs a block, level 7
// without one to 40.2% in 39 µs, level 7 with one to 31.8% in 135 µs.
const zstdDictLevel = zstd.SpeedFastest

// zstdWindowBytes bounds how far back a match may reach. A frame is one
// block (tens of KiB), so a larger window finds nothing more, while the
// encoder's history buffer is sized from it: at zstd's default (8 MiB) a
// pooled encoder held 16 MiB, the largest item of the engine's live heap
// while compactions ran (BENCHMARKS.md, session s8-mem).
const zstdWindowBytes = 128 << 10

// zstdEncodersCreated counts encoders created, for the pooling test.
var zstdEncodersCreated atomic.Int64

// zstdEncoderOptions are the options of every encoder: our own CRC covers
// every block, so zstd's frame checksum would be 4 wasted bytes per block;
// single-segment frames always record their content size, which the
// reader checks before allocating.
func zstdEncoderOptions(level zstd.EncoderLevel) []zstd.EOption {
	return []zstd.EOption{
		zstd.WithEncoderLevel(level),
		zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderCRC(false),
		zstd.WithSingleSegment(true),
		zstd.WithWindowSize(zstdWindowBytes),
		zstd.WithLowerEncoderMem(true),
	}
}

func newCompressor(c Compression, zstdLevel int) (*compressor, error) {
	if c != CompressionZstd {
		return &compressor{}, nil
	}
	level := zstd.SpeedDefault
	if zstdLevel != 0 {
		level = zstd.EncoderLevelFromZstd(zstdLevel)
	}
	if enc, ok := zstdEncoders[level].Get().(*zstd.Encoder); ok {
		return &compressor{zstd: enc, level: level}, nil
	}
	enc, err := zstd.NewWriter(nil, zstdEncoderOptions(level)...)
	if err != nil {
		return nil, fmt.Errorf("cannot create zstd encoder: %w", err)
	}
	zstdEncodersCreated.Add(1)
	return &compressor{zstd: enc, level: level}, nil
}

// close returns the encoder to the pool. Every frame appendBlockFrame
// starts it also ends (EncodeAll, or a stream closed with Close), so the
// encoder is idle here.
func (c *compressor) close() {
	if c.zstd != nil {
		zstdEncoders[c.level].Put(c.zstd)
		c.zstd = nil
	}
	if c.dict != nil {
		zstdDictEncoders.Put(c.dict)
		c.dict = nil
	}
}

// setDict makes appendBlockFrame compress data blocks (useDict) against
// content, the file's dictionary, from now on. content must stay
// unchanged until close.
func (c *compressor) setDict(content []byte) error {
	if c.zstd == nil {
		return errors.New("cannot set a zstd dictionary: the compressor is not zstd")
	}
	opt := zstd.WithEncoderDictRaw(zstdDictID, content)
	if enc, ok := zstdDictEncoders.Get().(*zstd.Encoder); ok {
		if err := enc.ResetWithOptions(nil, opt); err != nil {
			return fmt.Errorf("cannot set zstd dictionary: %w", err)
		}
		c.dict = enc
		return nil
	}
	enc, err := zstd.NewWriter(nil, append(zstdEncoderOptions(zstdDictLevel), opt)...)
	if err != nil {
		return fmt.Errorf("cannot create zstd dictionary encoder: %w", err)
	}
	zstdEncodersCreated.Add(1)
	c.dict = enc
	return nil
}

// minSplitBlock is the smallest block worth splitting in two zstd blocks;
// it also guarantees a streamed frame records its content size, which zstd
// omits below 256 bytes unless the frame is single-segment.
const minSplitBlock = 4 << 10

// appendBlockFrame appends raw framed as a block: the payload (raw
// compressed with want, or raw itself when compressing does not make it
// smaller), the compression byte and the checksum. It returns the extended
// dst and the payload length. With useDict, a block zstd compresses is
// compressed against the dictionary given to setDict, if any, and marked
// compressionZstdDict (data blocks only: index pages and meta blocks are
// read without the dictionary).
//
// splits, if any, are ascending offsets in raw where one kind of data
// gives way to another (binary fields, JSON values, one column of shaped
// values): zstd then ends a zstd block at each, so that every part gets
// its own entropy tables (literal Huffman codes tuned for JSON text are
// poor for varints and key bytes, digits want other codes than hex) while
// later parts can still copy from earlier ones.
func (c *compressor) appendBlockFrame(dst, raw []byte, want Compression, splits []int, useDict bool) ([]byte, int) {
	start := len(dst)
	used := want
	if want == CompressionZstd && len(raw) < minZstdBlock {
		// Too small for zstd to pay: its frame header and entropy
		// tables take what it could save, and it costs microseconds
		// per block (9% of writing a million one-row timeline
		// partitions). S2 still removes repeats.
		want, used = CompressionS2, CompressionS2
	}
	switch want {
	case CompressionZstd:
		enc := c.zstd
		if useDict && c.dict != nil {
			enc, used = c.dict, compressionZstdDict
		}
		// Against a dictionary, one zstd block: its parts find their
		// matches in the dictionary, and separate entropy tables cost
		// more than they save in a small block (measured: 0.6 bytes per
		// event more with the splits in 8 KiB blocks; at the fastest
		// speed, 44.6 against 39.3 in loadtest/peers' 16 KiB blocks).
		if len(splits) == 0 || len(raw) < minSplitBlock || used == compressionZstdDict {
			dst = enc.EncodeAll(raw, dst)
			break
		}
		c.out.b = dst
		enc.ResetContentSize(&c.out, int64(len(raw)))
		// Writes to appendWriter cannot fail, nor can the encoder
		// short of a bug; an error here would be caught by the
		// length check below or by the reader's verification.
		var errs []error
		prev := 0
		for _, split := range splits {
			if split <= prev || split >= len(raw) {
				continue
			}
			_, err := enc.Write(raw[prev:split])
			errs = append(errs, err, enc.Flush())
			prev = split
		}
		_, err := enc.Write(raw[prev:])
		errs = append(errs, err, enc.Close())
		dst, c.out.b = c.out.b, nil
		var h zstd.Header
		if errors.Join(append(errs, h.Decode(dst[start:]))...) != nil || !h.HasFCS {
			dst = enc.EncodeAll(raw, dst[:start])
		}
	case CompressionS2:
		n := s2.MaxEncodedLen(len(raw))
		if n < 0 {
			// Too large for S2; store it as it is.
			used = CompressionNone
			break
		}
		dst = growTo(dst, start+n)
		enc := s2.Encode(dst[start:start+n], raw)
		dst = dst[:start+len(enc)]
	default:
		used = CompressionNone
	}
	if (used == CompressionZstd || used == compressionZstdDict) && c.minFourStreams > 0 {
		dst = c.fourStreamLiterals(dst, start)
	}
	if used != CompressionNone && len(dst)-start >= len(raw) {
		used = CompressionNone
	}
	if used == CompressionNone {
		dst = append(dst[:start], raw...)
	}
	payloadLen := len(dst) - start
	dst = append(dst, byte(used))
	dst = binary.LittleEndian.AppendUint32(dst, blockChecksum(dst[start:start+payloadLen], used))
	return dst, payloadLen
}

// fourStreamLiterals rewrites the zstd frame at dst[start:] with its
// one-stream literal sections in four streams, and runs of sections
// sharing one Huffman table (literalStreams). A frame
// the rewriter does not take apart, which klauspost/compress's encoder
// does not write, stays as it is.
func (c *compressor) fourStreamLiterals(dst []byte, start int) []byte {
	out, n, err := c.lits.rewrite(c.litsFrame[:0], dst[start:], c.minFourStreams)
	c.litsFrame = out
	if err != nil || n == 0 {
		return dst
	}
	return append(dst[:start], out...)
}

// minZstdBlock is the smallest block the writer compresses with zstd when
// the file's compression is zstd; smaller ones are compressed with S2 (or
// stored as they are, if that does not shrink them).
const minZstdBlock = 256

// growTo returns dst with length n, keeping its contents.
func growTo(dst []byte, n int) []byte {
	if cap(dst) >= n {
		return dst[:n]
	}
	grown := make([]byte, n, n+n/4)
	copy(grown, dst)
	return grown
}

// decompressor decompresses blocks. It is safe for concurrent use: the
// zstd decoder's DecodeAll is, and S2 is stateless.
type decompressor struct {
	once sync.Once
	zstd *zstd.Decoder
	err  error
}

func (d *decompressor) zstdDecoder() (*zstd.Decoder, error) {
	d.once.Do(func() {
		// WithDecodeAllCapLimit makes DecodeAll stop at the capacity we
		// give it (the recorded length), so a frame lying about its
		// size cannot make us allocate more.
		d.zstd, d.err = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithDecodeAllCapLimit(true),
		)
	})
	return d.zstd, d.err
}

func (d *decompressor) close() {
	d.once.Do(func() {})
	if d.zstd != nil {
		d.zstd.Close()
	}
}

// zstdDictID is the dictionary ID in the frame header of every block
// compressed against a file's dictionary (one byte per frame); the
// compression byte, not the ID, says which dictionary: the file's own.
const zstdDictID = 1

// Bounds of a file's dictionary (format version 5). The writer's is
// WriterOptions.DictionarySampleSize bytes (dictSampleSize, 32 KiB, by
// default); the reader accepts any length in these bounds.
const (
	minDictLen = 8
	maxDictLen = 1 << 20
)

// fileDict is one file's zstd dictionary (raw content: the first bytes of
// the file's decompressed data blocks) and the decoder that uses it,
// created on the first block that needs it and shared by every goroutine
// reading the file (DecodeAll is safe for concurrent use), never one per
// block.
type fileDict struct {
	content []byte
	once    sync.Once
	dec     *zstd.Decoder
	err     error
}

// decodeDictionary checks a dictionary meta block's decompressed bytes:
// any content will do as a raw zstd dictionary, within length bounds.
func decodeDictionary(raw []byte) (*fileDict, error) {
	if len(raw) < minDictLen || len(raw) > maxDictLen {
		return nil, base.CorruptionErrorf("cannot decode dictionary: got %d bytes, want %d to %d", len(raw), minDictLen, maxDictLen)
	}
	return &fileDict{content: raw}, nil
}

func (fd *fileDict) decoder() (*zstd.Decoder, error) {
	fd.once.Do(func() {
		fd.dec, fd.err = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithDecodeAllCapLimit(true),
			zstd.WithDecoderDictRaw(zstdDictID, fd.content),
		)
	})
	return fd.dec, fd.err
}

func (fd *fileDict) close() {
	if fd == nil {
		return
	}
	fd.once.Do(func() {})
	if fd.dec != nil {
		fd.dec.Close()
	}
}

// zstdOutputSlack is the room the zstd decoder wants past the end of its
// output to copy in whole words (klauspost/compress's
// compressedBlockOverAlloc, 16, with a margin).
const zstdOutputSlack = 64

// maxBlockRawLen bounds the decompressed size of any block, so a damaged
// length never turns into a huge allocation, and keeps in-block offsets
// within uint32.
const maxBlockRawLen = 1 << 30

// decodeBlockFrame verifies and decompresses one framed block (payload,
// compression byte, checksum) whose decompressed length was recorded as
// rawLen. The checksum is verified before anything is decompressed. The
// result never aliases frame unless the block was stored uncompressed. It
// is written into dst when dst has the capacity. A block compressed
// against a dictionary is refused (decodeDataFrame reads those).
func (d *decompressor) decodeBlockFrame(frame []byte, rawLen uint64, dst []byte) ([]byte, error) {
	return d.decodeDataFrame(frame, rawLen, dst, nil)
}

// decodeDataFrame is decodeBlockFrame for a data block of a file whose
// dictionary is dict (nil if it has none).
func (d *decompressor) decodeDataFrame(frame []byte, rawLen uint64, dst []byte, dict *fileDict) ([]byte, error) {
	if uint64(cap(dst)) < rawLen {
		dst = nil
	}
	if len(frame) < blockTrailerLen {
		return nil, base.CorruptionErrorf("cannot decode block frame: got %d bytes, want at least %d", len(frame), blockTrailerLen)
	}
	if rawLen > maxBlockRawLen {
		return nil, base.CorruptionErrorf("cannot decode block frame: recorded length %d exceeds %d", rawLen, maxBlockRawLen)
	}
	payload := frame[:len(frame)-blockTrailerLen]
	c := Compression(frame[len(payload)])
	got := binary.LittleEndian.Uint32(frame[len(payload)+1:])
	if want := blockChecksum(payload, c); got != want {
		return nil, base.CorruptionErrorf("cannot verify block checksum: got %#08x, want %#08x", got, want)
	}
	switch c {
	case CompressionNone:
		if uint64(len(payload)) != rawLen {
			return nil, base.CorruptionErrorf("cannot decode uncompressed block: got %d bytes, want %d", len(payload), rawLen)
		}
		return payload, nil
	case CompressionS2:
		n, err := s2.DecodedLen(payload)
		if err != nil {
			return nil, base.CorruptionErrorf("cannot decode s2 block header: %v", err)
		}
		if uint64(n) != rawLen {
			return nil, base.CorruptionErrorf("cannot decode s2 block: header says %d bytes, want %d", n, rawLen)
		}
		if dst == nil {
			dst = make([]byte, n)
		}
		raw, err := s2.Decode(dst[:n:n], payload)
		if err != nil {
			return nil, base.CorruptionErrorf("cannot decode s2 block: %v", err)
		}
		return raw, nil
	case CompressionZstd, compressionZstdDict:
		var h zstd.Header
		if err := h.Decode(payload); err != nil {
			return nil, base.CorruptionErrorf("cannot decode zstd frame header: %v", err)
		}
		if !h.HasFCS || h.FrameContentSize != rawLen {
			return nil, base.CorruptionErrorf("cannot decode zstd block: frame says %d bytes (known %v), want %d", h.FrameContentSize, h.HasFCS, rawLen)
		}
		wantID := uint32(0)
		if c == compressionZstdDict {
			if dict == nil {
				return nil, base.CorruptionErrorf("cannot decode zstd block: it needs a dictionary, and the file has none")
			}
			wantID = zstdDictID
		}
		if h.DictionaryID != wantID {
			return nil, base.CorruptionErrorf("cannot decode zstd block: frame names dictionary %d, want %d", h.DictionaryID, wantID)
		}
		var dec *zstd.Decoder
		var err error
		if c == compressionZstdDict {
			dec, err = dict.decoder()
		} else {
			dec, err = d.zstdDecoder()
		}
		if err != nil {
			return nil, fmt.Errorf("cannot create zstd decoder: %w", err)
		}
		if dst == nil {
			dst = make([]byte, 0, rawLen)
		}
		// Capacity-limited to rawLen, plus zstdOutputSlack when dst has
		// it: with that much room past the frame's end the decoder
		// copies matches and literals in whole words instead of taking
		// its "safe" byte-exact path.
		limit := rawLen
		if uint64(cap(dst)) >= rawLen+zstdOutputSlack {
			limit = rawLen + zstdOutputSlack
		}
		raw, err := dec.DecodeAll(payload, dst[:0:limit])
		if err != nil {
			return nil, base.CorruptionErrorf("cannot decode zstd block: %v", err)
		}
		if uint64(len(raw)) != rawLen {
			return nil, base.CorruptionErrorf("cannot decode zstd block: got %d bytes, want %d", len(raw), rawLen)
		}
		return raw, nil
	}
	return nil, base.CorruptionErrorf("cannot decode block: unknown compression %d", uint8(c))
}
