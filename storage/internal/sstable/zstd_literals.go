package sstable

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/klauspost/compress/huff0"
	"github.com/klauspost/compress/zstd"
)

// Literal streams of the zstd blocks the writer produces.
//
// A zstd block's literals section (RFC 8878, 3.1.1.3.1) is Huffman coded
// in one stream or in four. klauspost/compress's encoder writes one
// stream below 1024 literals, and the writer's zstd blocks are columns
// of a data block (see appendBlockFrame's splits), most of which hold
// fewer: their literals then decode one symbol after another, each
// waiting on the previous one's bit count. Four streams decode
// interleaved, about 1.2-1.8x faster at 512-1000 literals, for 6 bytes of
// jump table and up to 3 of stream padding. The format allows four
// streams at any size (Size_Format 01 has 10-bit sizes, like the one
// stream's 00), so literalStreams rewrites the encoder's output: each
// one-stream section of at least min4StreamLiterals literals is decoded
// and encoded again in four streams with the same Huffman table, whose
// description is copied byte for byte. The table is unchanged, so a later
// "treeless" section (one that reuses the previous table) still decodes
// to the same literals, and is rewritten the same way. Everything else in
// the frame is copied as it is, so the result is a standard zstd frame
// that decodes to the same bytes with any decoder.

// min4StreamLiterals is the fewest literals a section must hold to be
// rewritten in four streams. Measured (ReadTable and decode, 6-digit
// decimal text, klauspost/compress v1.20.3, amd64): 1X 1,238 ns against
// 4X 1,006 at 512 literals, 1,618 against 1,186 at 768, 2,046 against
// 1,153 at 1000, 803 against 737 at 256 but 608 against 691 at 128;
// whole data blocks decoded fastest with 256 (BENCHMARKS.md, s14-window).
const min4StreamLiterals = 256

// Literals section types and size formats (RFC 8878, 3.1.1.3.1.1).
const (
	literalsCompressed = 2 // Huffman table, then the streams
	literalsTreeless   = 3 // the streams, with the previous section's table
	literalsOneStream  = 0 // Size_Format of one stream, 10-bit sizes
)

// Block types (RFC 8878, 3.1.1.2).
const (
	zstdBlockRaw        = 0
	zstdBlockRLE        = 1
	zstdBlockCompressed = 2
	zstdBlockHeaderLen  = 3
	zstdMaxBlockSize    = 128 << 10
)

// errLiteralStreams is returned by literalStreams.rewrite for a frame it
// does not take apart; the caller keeps the frame as it is.
var errLiteralStreams = errors.New("cannot rewrite zstd literal streams")

// literalsHeader is a parsed literals section header.
type literalsHeader struct {
	typ        int // literalsCompressed, ...; 0 raw, 1 RLE
	sizeFormat int
	headerLen  int
	regenSize  int // literals it decodes to
	streamSize int // bytes after the header (table included), for types 2 and 3
	sectionLen int // header and content
}

func (h literalsHeader) oneStream() bool {
	return (h.typ == literalsCompressed || h.typ == literalsTreeless) && h.sizeFormat == literalsOneStream
}

// parseLiteralsHeader parses the literals section at the start of a
// compressed block's content b.
func parseLiteralsHeader(b []byte) (literalsHeader, error) {
	if len(b) == 0 {
		return literalsHeader{}, fmt.Errorf("%w: empty compressed block", errLiteralStreams)
	}
	h := literalsHeader{typ: int(b[0] & 3), sizeFormat: int(b[0]>>2) & 3}
	switch h.typ {
	case 0, 1: // raw, RLE
		switch h.sizeFormat {
		case 0, 2:
			h.headerLen, h.regenSize = 1, int(b[0]>>3)
		case 1:
			h.headerLen = 2
		case 3:
			h.headerLen = 3
		}
		if len(b) < h.headerLen {
			return h, fmt.Errorf("%w: literals header of %d bytes, block has %d", errLiteralStreams, h.headerLen, len(b))
		}
		switch h.headerLen {
		case 2:
			h.regenSize = int(b[0]>>4) | int(b[1])<<4
		case 3:
			h.regenSize = int(b[0]>>4) | int(b[1])<<4 | int(b[2])<<12
		}
		h.sectionLen = h.headerLen + h.regenSize
		if h.typ == 1 {
			h.sectionLen = h.headerLen + 1
		}
	default:
		h.headerLen = [4]int{3, 3, 4, 5}[h.sizeFormat]
		if len(b) < h.headerLen {
			return h, fmt.Errorf("%w: literals header of %d bytes, block has %d", errLiteralStreams, h.headerLen, len(b))
		}
		var v uint64
		for i := h.headerLen - 1; i >= 0; i-- {
			v = v<<8 | uint64(b[i])
		}
		bits := [4]uint{10, 10, 14, 18}[h.sizeFormat]
		mask := uint64(1)<<bits - 1
		h.regenSize = int(v >> 4 & mask)
		h.streamSize = int(v >> (4 + bits) & mask)
		h.sectionLen = h.headerLen + h.streamSize
	}
	if h.sectionLen > len(b) {
		return h, fmt.Errorf("%w: literals section of %d bytes, block has %d", errLiteralStreams, h.sectionLen, len(b))
	}
	return h, nil
}

// appendStreamsHeader appends the header of a four-stream literals
// section of type typ: the smallest Size_Format that holds both sizes.
func appendStreamsHeader(dst []byte, typ, regen, size int) ([]byte, bool) {
	for sf, bits := range [4]uint{10, 10, 14, 18} {
		if sf == literalsOneStream || regen >= 1<<bits || size >= 1<<bits {
			continue
		}
		v := uint64(typ) | uint64(sf)<<2 | uint64(regen)<<4 | uint64(size)<<(4+bits)
		n := [4]int{3, 3, 4, 5}[sf]
		for i := range n {
			dst = append(dst, byte(v>>(8*i)))
		}
		return dst, true
	}
	return dst, false
}

// zstdBlockHeader is a parsed block header.
type zstdBlockHeader struct {
	last    bool
	typ     int
	size    int // Block_Size: content bytes, or the run's length for RLE
	content int // bytes of content that follow the header
}

func parseZstdBlockHeader(b []byte) (zstdBlockHeader, error) {
	if len(b) < zstdBlockHeaderLen {
		return zstdBlockHeader{}, fmt.Errorf("%w: block header truncated", errLiteralStreams)
	}
	v := int(b[0]) | int(b[1])<<8 | int(b[2])<<16
	h := zstdBlockHeader{last: v&1 == 1, typ: v >> 1 & 3, size: v >> 3}
	switch h.typ {
	case zstdBlockRaw, zstdBlockCompressed:
		h.content = h.size
	case zstdBlockRLE:
		h.content = 1
	default:
		return h, fmt.Errorf("%w: reserved block type", errLiteralStreams)
	}
	if zstdBlockHeaderLen+h.content > len(b) {
		return h, fmt.Errorf("%w: block of %d bytes, frame has %d", errLiteralStreams, h.content, len(b)-zstdBlockHeaderLen)
	}
	return h, nil
}

func appendZstdBlockHeader(dst []byte, h zstdBlockHeader) []byte {
	dst = append(dst, 0, 0, 0)
	putZstdBlockHeader(dst[len(dst)-zstdBlockHeaderLen:], h)
	return dst
}

// putZstdBlockHeader writes h over the first three bytes of b.
func putZstdBlockHeader(b []byte, h zstdBlockHeader) {
	v := h.size<<3 | h.typ<<1
	if h.last {
		v |= 1
	}
	b[0], b[1], b[2] = byte(v), byte(v>>8), byte(v>>16)
}

// zstdFrameBlocks returns the header length of the single zstd frame
// that makes up all of frame, the largest block content it allows, and
// the length of its trailing checksum (0 or 4).
func zstdFrameBlocks(frame []byte) (headerLen, maxBlock, checksumLen int, err error) {
	var fh zstd.Header
	if err := fh.Decode(frame); err != nil {
		return 0, 0, 0, fmt.Errorf("%w: %v", errLiteralStreams, err)
	}
	if fh.Skippable || fh.HeaderSize <= 0 || fh.HeaderSize > len(frame) {
		return 0, 0, 0, fmt.Errorf("%w: not a zstd data frame", errLiteralStreams)
	}
	// A block is at most the window (RFC 8878, 3.1.1.2.4), which in a
	// single-segment frame is the content size.
	window := fh.WindowSize
	if fh.SingleSegment {
		window = fh.FrameContentSize
	}
	maxBlock = int(min(window, zstdMaxBlockSize))
	if fh.HasCheckSum {
		checksumLen = 4
	}
	return fh.HeaderSize, maxBlock, checksumLen, nil
}

// literalStreams rewrites the one-stream literal sections of zstd frames
// in four streams. It keeps buffers between frames; it is not safe for
// concurrent use.
type literalStreams struct {
	huff  *huff0.Scratch // the current Huffman table
	lits  []byte         // a section's literals, decoded
	check []byte         // the four streams, decoded again
	// compress4X is huff0.Compress4X (nil); tests replace it.
	compress4X func(in []byte, s *huff0.Scratch) (out []byte, reused bool, err error)
}

// rewrite appends to dst frame with every one-stream literals section
// of at least minLits literals in four streams, and reports how many it
// rewrote. frame must be one whole zstd frame. On an error, dst holds a
// partial frame; the caller keeps the original.
func (ls *literalStreams) rewrite(dst, frame []byte, minLits int) ([]byte, int, error) {
	headerLen, maxBlock, checksumLen, err := zstdFrameBlocks(frame)
	if err != nil {
		return dst, 0, err
	}
	dst = append(dst, frame[:headerLen]...)
	pos := headerLen
	// haveTable is set by the first section that describes a Huffman
	// table: ls.huff then holds the table a treeless section reuses.
	haveTable := false
	rewritten := 0
	for {
		bh, err := parseZstdBlockHeader(frame[pos:])
		if err != nil {
			return dst, rewritten, err
		}
		content := frame[pos+zstdBlockHeaderLen : pos+zstdBlockHeaderLen+bh.content]
		pos += zstdBlockHeaderLen + bh.content
		if bh.typ != zstdBlockCompressed {
			dst = appendZstdBlockHeader(dst, bh)
			dst = append(dst, content...)
		} else {
			lh, err := parseLiteralsHeader(content)
			if err != nil {
				return dst, rewritten, err
			}
			section := content[lh.headerLen:lh.sectionLen]
			var table, streams []byte
			if lh.typ == literalsCompressed {
				ls.huff, streams, err = huff0.ReadTable(section, ls.huff)
				if err != nil {
					return dst, rewritten, fmt.Errorf("%w: %v", errLiteralStreams, err)
				}
				haveTable = true
				table = section[:len(section)-len(streams)]
			} else if lh.typ == literalsTreeless {
				if !haveTable {
					return dst, rewritten, fmt.Errorf("%w: treeless literals without a table", errLiteralStreams)
				}
				streams = section
			}
			var four []byte
			if lh.oneStream() && lh.regenSize >= minLits {
				four = ls.fourStreams(streams, lh.regenSize)
			}
			blockStart := len(dst)
			dst = append(dst, 0, 0, 0) // block header, set below
			if four == nil {
				dst = append(dst, content...)
			} else {
				var ok bool
				dst, ok = appendStreamsHeader(dst, lh.typ, lh.regenSize, len(table)+len(four))
				if !ok {
					return dst, rewritten, fmt.Errorf("%w: %d literals in %d bytes do not fit a header", errLiteralStreams, lh.regenSize, len(table)+len(four))
				}
				dst = append(dst, table...)
				dst = append(dst, four...)
				dst = append(dst, content[lh.sectionLen:]...)
				rewritten++
			}
			bh.size = len(dst) - blockStart - zstdBlockHeaderLen
			if bh.size > maxBlock {
				return dst, rewritten, fmt.Errorf("%w: block of %d bytes would pass the frame's maximum %d", errLiteralStreams, bh.size, maxBlock)
			}
			putZstdBlockHeader(dst[blockStart:], bh)
		}
		if bh.last {
			break
		}
	}
	if len(frame)-pos != checksumLen {
		return dst, rewritten, fmt.Errorf("%w: %d bytes after the last block, want %d", errLiteralStreams, len(frame)-pos, checksumLen)
	}
	return append(dst, frame[pos:]...), rewritten, nil
}

// fourStreams decodes the one stream of n literals with the current table
// and encodes them again in four streams with the same table. It returns
// nil if that fails, does not shrink the literals, or does not decode
// back to the same literals (then the section stays as it is): the
// block's checksum is taken over what the writer stores, so a wrong
// encoding would be stored as good, and a few microseconds of decoding
// per section (next to a zstd level-7 encoding of the block) keep that
// from ever reaching a file. The result aliases ls.huff's buffers until
// the next call.
func (ls *literalStreams) fourStreams(stream []byte, n int) []byte {
	if cap(ls.lits) < n {
		ls.lits = make([]byte, 0, n)
		ls.check = make([]byte, 0, n)
	}
	dec := ls.huff.Decoder()
	lits, err := dec.Decompress1X(ls.lits[:0:n], stream)
	if err != nil || len(lits) != n {
		return nil
	}
	compress4X := ls.compress4X
	if compress4X == nil {
		compress4X = huff0.Compress4X
	}
	ls.huff.Reuse = huff0.ReusePolicyMust
	four, reused, err := compress4X(lits, ls.huff)
	if err != nil || !reused {
		return nil
	}
	if check, err := dec.Decompress4X(ls.check[:0:n], four); err != nil || !bytes.Equal(check, lits) {
		return nil
	}
	return four
}

// zstdLiteralSection describes one zstd block of a frame, for
// zstdFrameLiterals.
type zstdLiteralSection struct {
	blockType   int
	blockSize   int
	literalType int // -1 for a block that is not compressed
	fourStreams bool
	literals    int
	streamBytes int // the section's bytes after its header, table included
}

// zstdFrameLiterals lists the blocks of one zstd frame and their literal
// sections (for tests and measurements).
func zstdFrameLiterals(frame []byte) ([]zstdLiteralSection, error) {
	headerLen, _, _, err := zstdFrameBlocks(frame)
	if err != nil {
		return nil, err
	}
	var out []zstdLiteralSection
	for pos := headerLen; ; {
		bh, err := parseZstdBlockHeader(frame[pos:])
		if err != nil {
			return out, err
		}
		s := zstdLiteralSection{blockType: bh.typ, blockSize: bh.size, literalType: -1}
		if bh.typ == zstdBlockCompressed {
			lh, err := parseLiteralsHeader(frame[pos+zstdBlockHeaderLen : pos+zstdBlockHeaderLen+bh.content])
			if err != nil {
				return out, err
			}
			s.literalType, s.literals, s.streamBytes = lh.typ, lh.regenSize, lh.streamSize
			s.fourStreams = lh.typ >= literalsCompressed && lh.sizeFormat != literalsOneStream
		}
		out = append(out, s)
		pos += zstdBlockHeaderLen + bh.content
		if bh.last {
			return out, nil
		}
	}
}
