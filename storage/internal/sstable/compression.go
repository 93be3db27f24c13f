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

// Valid reports whether c is a known compression.
func (c Compression) Valid() bool { return c <= CompressionS2 }

func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionZstd:
		return "zstd"
	case CompressionS2:
		return "s2"
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
	return crc32.Update(crc, crcTable, []byte{byte(c)})
}

// compressor compresses the blocks of one Writer. It is not safe for
// concurrent use (a Writer is single-goroutine).
type compressor struct {
	zstd  *zstd.Encoder
	level zstd.EncoderLevel
	out   appendWriter
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

// zstdWindowBytes bounds how far back a match may reach. A frame is one
// block (tens of KiB), so a larger window finds nothing more, while the
// encoder's history buffer is sized from it: at zstd's default (8 MiB) a
// pooled encoder held 16 MiB, the largest item of the engine's live heap
// while compactions ran (BENCHMARKS.md, session s8-mem).
const zstdWindowBytes = 128 << 10

// zstdEncodersCreated counts encoders created, for the pooling test.
var zstdEncodersCreated atomic.Int64

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
	// Our own CRC covers every block, so zstd's frame checksum would be
	// 4 wasted bytes per block. Single-segment frames always record their
	// content size, which the reader checks before allocating.
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(level),
		zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderCRC(false),
		zstd.WithSingleSegment(true),
		zstd.WithWindowSize(zstdWindowBytes),
		zstd.WithLowerEncoderMem(true),
	)
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
}

// minSplitBlock is the smallest block worth splitting in two zstd blocks;
// it also guarantees a streamed frame records its content size, which zstd
// omits below 256 bytes unless the frame is single-segment.
const minSplitBlock = 4 << 10

// appendBlockFrame appends raw framed as a block: the payload (raw
// compressed with want, or raw itself when compressing does not make it
// smaller), the compression byte and the checksum. It returns the extended
// dst and the payload length.
//
// splits, if any, are ascending offsets in raw where one kind of data
// gives way to another (binary fields, JSON values, one column of shaped
// values): zstd then ends a zstd block at each, so that every part gets
// its own entropy tables (literal Huffman codes tuned for JSON text are
// poor for varints and key bytes, digits want other codes than hex) while
// later parts can still copy from earlier ones.
func (c *compressor) appendBlockFrame(dst, raw []byte, want Compression, splits []int) ([]byte, int) {
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
		if len(splits) == 0 || len(raw) < minSplitBlock {
			dst = c.zstd.EncodeAll(raw, dst)
			break
		}
		c.out.b = dst
		c.zstd.ResetContentSize(&c.out, int64(len(raw)))
		// Writes to appendWriter cannot fail, nor can the encoder
		// short of a bug; an error here would be caught by the
		// length check below or by the reader's verification.
		var errs []error
		prev := 0
		for _, split := range splits {
			if split <= prev || split >= len(raw) {
				continue
			}
			_, err := c.zstd.Write(raw[prev:split])
			errs = append(errs, err, c.zstd.Flush())
			prev = split
		}
		_, err := c.zstd.Write(raw[prev:])
		errs = append(errs, err, c.zstd.Close())
		dst, c.out.b = c.out.b, nil
		var h zstd.Header
		if errors.Join(append(errs, h.Decode(dst[start:]))...) != nil || !h.HasFCS {
			dst = c.zstd.EncodeAll(raw, dst[:start])
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

// maxBlockRawLen bounds the decompressed size of any block, so a damaged
// length never turns into a huge allocation, and keeps in-block offsets
// within uint32.
const maxBlockRawLen = 1 << 30

// decodeBlockFrame verifies and decompresses one framed block (payload,
// compression byte, checksum) whose decompressed length was recorded as
// rawLen. The checksum is verified before anything is decompressed. The
// result never aliases frame unless the block was stored uncompressed. It
// is written into dst when dst has the capacity.
func (d *decompressor) decodeBlockFrame(frame []byte, rawLen uint64, dst []byte) ([]byte, error) {
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
	case CompressionZstd:
		var h zstd.Header
		if err := h.Decode(payload); err != nil {
			return nil, base.CorruptionErrorf("cannot decode zstd frame header: %v", err)
		}
		if !h.HasFCS || h.FrameContentSize != rawLen {
			return nil, base.CorruptionErrorf("cannot decode zstd block: frame says %d bytes (known %v), want %d", h.FrameContentSize, h.HasFCS, rawLen)
		}
		dec, err := d.zstdDecoder()
		if err != nil {
			return nil, fmt.Errorf("cannot create zstd decoder: %w", err)
		}
		if dst == nil {
			dst = make([]byte, 0, rawLen)
		}
		// Capacity-limited to rawLen even when dst is larger.
		raw, err := dec.DecodeAll(payload, dst[:0:rawLen])
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
