package sstable

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"

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
// to the same literals, and is rewritten the same way.
//
// Each section also carries its own table, and a reader pays for every
// one: decoding its FSE-coded weights and filling the decoding table
// took 16% of a cold window slice's CPU, about as much as decoding the
// literals. Consecutive columns of one kind (digits after digits) code
// almost as well with a table made from both, so shareTables codes runs
// of consecutive sections with one table, built from all their literals:
// the first section of a run describes it, the others are treeless. A
// run grows while that costs at most maxSharedTableExtra bytes more per
// section than their own tables (measured: 21% fewer tables on
// loadtest/peers-like blocks; +0.04 bytes/event on loadtest/peers'
// 2,000,000 events, 34.46 -> 34.50). It is not tried in a frame
// that already has treeless sections (the encoder's do not). Every
// rewritten section is decoded again and kept only if it gives the same
// literals. Everything else in the frame is copied as it is, so the
// result is a standard zstd frame that decodes to the same bytes with
// any decoder.

// min4StreamLiterals is the fewest literals a section must hold to be
// rewritten in four streams. Measured (ReadTable and decode, 6-digit
// decimal text, klauspost/compress v1.20.3, amd64): 1X 1,238 ns against
// 4X 1,006 at 512 literals, 1,618 against 1,186 at 768, 2,046 against
// 1,153 at 1000, 803 against 737 at 256 but 608 against 691 at 128;
// whole data blocks decoded fastest with 256 (BENCHMARKS.md, s14-window).
const min4StreamLiterals = 256

// maxSharedTableExtra is how many bytes more than with its own Huffman
// table a section may cost coded with a table shared with the sections
// before it (see shareTables). Measured on loadtest/peers-like blocks
// (zstd level 7): 0 bytes shares 5% of the tables, 12 bytes 21% (+0.06
// bytes/event), 20 bytes 26% (+0.09), 60 bytes 47% (+0.46); a zstd data
// block decoded in 7.5% less CPU with 12, 6% with 20, 10% with 60
// (BENCHMARKS.md, s15-window).
const maxSharedTableExtra = 12

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
	return appendLiteralsHeader(dst, typ, true, regen, size)
}

// appendLiteralsHeader appends the header of a Huffman-coded literals
// section of type typ in four streams or one: the smallest Size_Format
// that holds both sizes (one stream has Size_Format 00 only).
func appendLiteralsHeader(dst []byte, typ int, four bool, regen, size int) ([]byte, bool) {
	for sf, bits := range [4]uint{10, 10, 14, 18} {
		if (sf == literalsOneStream) == four || regen >= 1<<bits || size >= 1<<bits {
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

// literalStreams rewrites the literal sections of zstd frames: one-stream
// sections in four streams, and runs of sections coded with one shared
// Huffman table (see shareTables). It keeps buffers between frames; it is
// not safe for concurrent use.
type literalStreams struct {
	huff  *huff0.Scratch // the current Huffman table
	check []byte         // a rewritten section, decoded again
	// compress4X is huff0.Compress4X (nil); tests replace it.
	compress4X func(in []byte, s *huff0.Scratch) (out []byte, reused bool, err error)

	// maxShareExtra, if positive, lets shareTables code a run of
	// sections with one table when that costs at most maxShareExtra
	// bytes more per section than their own tables.
	maxShareExtra int
	sections      []literalSection
	arena         []byte         // literals and four streams of sections
	shared        *huff0.Scratch // a run's shared table
	sharedCheck   *huff0.Scratch // the shared table, read back
	sharedAll     []byte         // a run's literals, concatenated
	hists         [][256]uint32  // each section's literal counts
	// A run's encoding being tried (try) and the best one found (best),
	// each in a slab of its own; applied holds the runs taken.
	try, best         []litEncoding
	trySlab, bestSlab []byte
	applied           []byte
}

// literalSection is one Huffman-coded literals section of a frame.
type literalSection struct {
	block  zstdBlockHeader
	lh     literalsHeader
	rest   []byte // the block's content after the literals section
	lits   [2]int // the literals in arena
	fourAt [2]int // the own four streams in arena, if fourAt[1] > 0
	own    litEncoding
	out    litEncoding // what is written
	shared bool        // out is treeless, or opens a shared run
	// appliedAt are the offsets in literalStreams.applied of out's
	// table, streams and end, for a shared section.
	appliedAt [3]int
}

// litEncoding is a section's Huffman table description (none if the
// section is treeless) and its streams, in arena or in the frame.
type litEncoding struct {
	table, streams []byte
	four           bool
}

func (e litEncoding) size() int { return len(e.table) + len(e.streams) }

// rewrite appends to dst frame with every one-stream literals section
// of at least minLits literals in four streams, and with runs of
// sections sharing one Huffman table if ls.maxShareExtra is positive,
// and reports how many sections it rewrote. frame must be one whole zstd
// frame. On an error, dst holds a partial frame; the caller keeps the
// original.
func (ls *literalStreams) rewrite(dst, frame []byte, minLits int) ([]byte, int, error) {
	headerLen, maxBlock, checksumLen, err := zstdFrameBlocks(frame)
	if err != nil {
		return dst, 0, err
	}
	// First pass: every zstd block becomes a span of the frame; a
	// Huffman-coded literals section's span names its section, whose
	// own encoding (four streams where that pays) and, if tables may be
	// shared, literals are kept in arena.
	ls.sections = ls.sections[:0]
	ls.arena = ls.arena[:0]
	type span struct{ from, to, section int }
	var spansBuf [16]span
	spans := spansBuf[:0]
	pos := headerLen
	// haveTable is set by the first section that describes a Huffman
	// table: ls.huff then holds the table a treeless section reuses.
	haveTable, treeless := false, false
	for {
		bh, err := parseZstdBlockHeader(frame[pos:])
		if err != nil {
			return dst, 0, err
		}
		blockStart := pos
		content := frame[pos+zstdBlockHeaderLen : pos+zstdBlockHeaderLen+bh.content]
		pos += zstdBlockHeaderLen + bh.content
		sec := -1
		if bh.typ == zstdBlockCompressed {
			lh, err := parseLiteralsHeader(content)
			if err != nil {
				return dst, 0, err
			}
			if lh.typ == literalsCompressed || lh.typ == literalsTreeless {
				section := content[lh.headerLen:lh.sectionLen]
				var table, streams []byte
				if lh.typ == literalsCompressed {
					ls.huff, streams, err = huff0.ReadTable(section, ls.huff)
					if err != nil {
						return dst, 0, fmt.Errorf("%w: %v", errLiteralStreams, err)
					}
					haveTable = true
					table = section[:len(section)-len(streams)]
				} else {
					if !haveTable {
						return dst, 0, fmt.Errorf("%w: treeless literals without a table", errLiteralStreams)
					}
					treeless = true
					streams = section
				}
				// The literals are needed to rewrite the section in
				// four streams or to share tables.
				toFour := lh.oneStream() && lh.regenSize >= minLits
				litStart, n := len(ls.arena), lh.regenSize
				if ls.maxShareExtra <= 0 && !toFour {
					n = 0
				}
				ls.arena = slices.Grow(ls.arena, n)
				dec, into := ls.huff.Decoder(), ls.arena[litStart:litStart:litStart+n]
				if n > 0 {
					var lits []byte
					if lh.oneStream() {
						lits, err = dec.Decompress1X(into, streams)
					} else {
						lits, err = dec.Decompress4X(into, streams)
					}
					if err != nil || len(lits) != n {
						return dst, 0, fmt.Errorf("%w: literals do not decode: %v", errLiteralStreams, err)
					}
					ls.arena = ls.arena[:litStart+n]
				}
				own := litEncoding{table: table, streams: streams, four: !lh.oneStream()}
				var fourAt [2]int
				if toFour {
					if four := ls.fourStreams(ls.arena[litStart : litStart+n]); four != nil {
						fourAt[0] = len(ls.arena)
						ls.arena = append(ls.arena, four...)
						fourAt[1] = len(ls.arena)
						own.four = true
					}
				}
				sec = len(ls.sections)
				ls.sections = append(ls.sections, literalSection{
					block: bh, lh: lh, rest: content[lh.sectionLen:],
					lits: [2]int{litStart, litStart + n}, fourAt: fourAt, own: own,
				})
			}
		}
		spans = append(spans, span{blockStart, pos, sec})
		if bh.last {
			break
		}
	}
	if len(frame)-pos != checksumLen {
		return dst, 0, fmt.Errorf("%w: %d bytes after the last block, want %d", errLiteralStreams, len(frame)-pos, checksumLen)
	}
	// The arena may have moved while it grew: the four streams kept in
	// it are found by offset once it is complete.
	for i := range ls.sections {
		s := &ls.sections[i]
		if s.fourAt[1] > 0 {
			s.own.streams = ls.arena[s.fourAt[0]:s.fourAt[1]:s.fourAt[1]]
		}
		s.out = s.own
	}
	if ls.maxShareExtra > 0 && !treeless {
		ls.shareTables()
	}
	// Second pass: write.
	dst = append(dst, frame[:headerLen]...)
	rewritten := 0
	for _, sp := range spans {
		if sp.section < 0 {
			dst = append(dst, frame[sp.from:sp.to]...)
			continue
		}
		s := &ls.sections[sp.section]
		if !s.shared && (s.out.four == !s.lh.oneStream()) {
			dst = append(dst, frame[sp.from:sp.to]...)
			continue
		}
		typ := s.lh.typ
		if s.shared {
			typ = literalsCompressed
			if s.out.table == nil {
				typ = literalsTreeless
			}
		}
		blockStart := len(dst)
		dst = append(dst, 0, 0, 0) // block header, set below
		var ok bool
		dst, ok = appendLiteralsHeader(dst, typ, s.out.four, s.lh.regenSize, s.out.size())
		if !ok {
			return dst, rewritten, fmt.Errorf("%w: %d literals in %d bytes do not fit a header", errLiteralStreams, s.lh.regenSize, s.out.size())
		}
		dst = append(dst, s.out.table...)
		dst = append(dst, s.out.streams...)
		dst = append(dst, s.rest...)
		bh := s.block
		bh.size = len(dst) - blockStart - zstdBlockHeaderLen
		if bh.size > maxBlock {
			return dst, rewritten, fmt.Errorf("%w: block of %d bytes would pass the frame's maximum %d", errLiteralStreams, bh.size, maxBlock)
		}
		putZstdBlockHeader(dst[blockStart:], bh)
		rewritten++
	}
	return append(dst, frame[pos:]...), rewritten, nil
}

// shareTables codes runs of consecutive sections with one Huffman table,
// built from all their literals: the first section of a run describes
// it, the others are treeless (RFC 8878, 3.1.1.3.1.1: they use the table
// of the previous section that has one). The writer ends a zstd block at
// every column of a data block, so each gets a table of its own, and
// reading a table (its FSE-coded weights, then the decoding table) costs
// about as much as decoding a column's literals; columns of one kind
// (digits after digits) code almost as well with a table made for both.
// A run grows while coding it costs at most ls.maxShareExtra bytes more
// per added section than the sections' own encodings; each run taken is
// decoded again with its table read back from its description and kept
// only if every section gives its literals.
func (ls *literalStreams) shareTables() {
	secs := ls.sections
	ls.applied = ls.applied[:0]
	ls.hists = slices.Grow(ls.hists[:0], len(secs))[:len(secs)]
	for i := range secs {
		h := &ls.hists[i]
		clear(h[:])
		for _, c := range ls.arena[secs[i].lits[0]:secs[i].lits[1]] {
			h[c]++
		}
	}
	for i := 0; i < len(secs); {
		cost, runLen := secs[i].own.size(), 1
		for j := i + 1; j < len(secs); j++ {
			if !ls.mayShare(i, j) {
				break
			}
			size, ok := ls.encodeShared(secs[i : j+1])
			if !ok || size > cost+secs[j].own.size()+ls.maxShareExtra {
				break
			}
			cost, runLen = size, j+1-i
			ls.try, ls.best = ls.best, ls.try
			ls.trySlab, ls.bestSlab = ls.bestSlab, ls.trySlab
		}
		if runLen > 1 && ls.checkShared(secs[i:i+runLen], ls.best[:runLen]) {
			for k, e := range ls.best[:runLen] {
				s := &secs[i+k]
				s.shared = true
				s.out.four = e.four
				s.appliedAt[0] = len(ls.applied)
				ls.applied = append(ls.applied, e.table...)
				s.appliedAt[1] = len(ls.applied)
				ls.applied = append(ls.applied, e.streams...)
				s.appliedAt[2] = len(ls.applied)
			}
		}
		i += runLen
	}
	for i := range secs {
		if s := &secs[i]; s.shared {
			a := s.appliedAt
			s.out.table = ls.applied[a[0]:a[1]:a[1]]
			if a[0] == a[1] {
				s.out.table = nil
			}
			s.out.streams = ls.applied[a[1]:a[2]:a[2]]
		}
	}
}

// mayShare estimates, from the literals' histograms, whether sections
// i..j coded with one table may cost at most maxShareExtra more bytes
// than sections i..j-1 with one table and j with its own: the extra bits
// of coding each section with the run's symbol frequencies instead of its
// own (cross entropy less entropy), less section j's table. The estimate
// only spares encodeShared runs far from paying; encodeShared decides.
func (ls *literalStreams) mayShare(i, j int) bool {
	const margin = 16 // bytes; Huffman codes are whole bits, entropy is not
	var union [256]uint32
	total := 0
	for k := i; k <= j; k++ {
		for c, n := range ls.hists[k] {
			union[c] += n
		}
		total += ls.sections[k].lits[1] - ls.sections[k].lits[0]
	}
	extraBits := 0.0
	for k := i; k <= j; k++ {
		h := &ls.hists[k]
		n := float64(ls.sections[k].lits[1] - ls.sections[k].lits[0])
		for c, cnt := range h {
			if cnt != 0 {
				// cnt * (log2(total/union[c]) - log2(n/cnt))
				extraBits += float64(cnt) * math.Log2(float64(total)*float64(cnt)/(float64(union[c])*n))
			}
		}
	}
	return extraBits/8-float64(len(ls.sections[j].own.table)) <= float64(ls.maxShareExtra*(j-i)+margin)
}

// encodeShared codes run with one table built from all its literals, in
// ls.try and ls.trySlab, and returns the bytes that takes.
func (ls *literalStreams) encodeShared(run []literalSection) (int, bool) {
	all := ls.sharedAll[:0]
	for _, s := range run {
		all = append(all, ls.arena[s.lits[0]:s.lits[1]]...)
	}
	ls.sharedAll = all
	if ls.shared == nil {
		ls.shared = new(huff0.Scratch)
	}
	sc := ls.shared
	sc.Reuse = huff0.ReusePolicyNone
	if _, _, err := huff0.Compress1X(all, sc); err != nil {
		return 0, false
	}
	slab := append(ls.trySlab[:0], sc.OutTable...)
	tableLen := len(slab)
	var endsBuf [16]int
	ends := endsBuf[:0]
	compress4X := ls.compress4X
	if compress4X == nil {
		compress4X = huff0.Compress4X
	}
	for _, s := range run {
		sc.Reuse = huff0.ReusePolicyMust
		compress := huff0.Compress1X
		if s.own.four {
			compress = compress4X
		}
		out, reused, err := compress(ls.arena[s.lits[0]:s.lits[1]], sc)
		if err != nil || !reused {
			return 0, false
		}
		slab = append(slab, out...)
		ends = append(ends, len(slab))
	}
	ls.trySlab = slab
	ls.try = ls.try[:0]
	from := tableLen
	for k, s := range run {
		e := litEncoding{streams: slab[from:ends[k]:ends[k]], four: s.own.four}
		if k == 0 {
			e.table = slab[:tableLen:tableLen]
		}
		// A one-stream section's sizes have 10 bits: the shared table
		// may push a section of nearly 1024 literals (one that stayed
		// in one stream) past them, and the rewrite could not write it.
		if !fitsLiteralsHeader(e.four, s.lh.regenSize, e.size()) {
			return 0, false
		}
		ls.try = append(ls.try, e)
		from = ends[k]
	}
	return len(slab), true
}

// fitsLiteralsHeader reports whether a Huffman-coded literals section of
// regen literals in size bytes, in four streams or one, has a header
// (appendLiteralsHeader).
func fitsLiteralsHeader(four bool, regen, size int) bool {
	var b [5]byte
	_, ok := appendLiteralsHeader(b[:0], literalsCompressed, four, regen, size)
	return ok
}

// checkShared reports whether enc, a run's shared encoding, decodes to
// the run's literals with the table read back from its description.
func (ls *literalStreams) checkShared(run []literalSection, enc []litEncoding) bool {
	huff, rest, err := huff0.ReadTable(enc[0].table, ls.sharedCheck)
	if huff != nil {
		ls.sharedCheck = huff
	}
	if err != nil || len(rest) != 0 {
		return false
	}
	dec := huff.Decoder()
	for k, s := range run {
		want := ls.arena[s.lits[0]:s.lits[1]]
		n := len(want)
		if cap(ls.check) < n {
			ls.check = make([]byte, 0, n)
		}
		var got []byte
		if enc[k].four {
			got, err = dec.Decompress4X(ls.check[:0:n], enc[k].streams)
		} else {
			got, err = dec.Decompress1X(ls.check[:0:n], enc[k].streams)
		}
		if err != nil || !bytes.Equal(got, want) {
			return false
		}
	}
	return true
}

// fourStreams encodes lits, a one-stream section's literals, in four
// streams with the current table. It returns nil if that fails, does not
// shrink the literals, or does not decode back to the same literals (then
// the section stays as it is): the block's checksum is taken over what
// the writer stores, so a wrong encoding would be stored as good, and a
// few microseconds of decoding per section (next to a zstd level-7
// encoding of the block) keep that from ever reaching a file. The result
// aliases ls.huff's buffers until the next call.
func (ls *literalStreams) fourStreams(lits []byte) []byte {
	n := len(lits)
	if cap(ls.check) < n {
		ls.check = make([]byte, 0, n)
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
	if check, err := ls.huff.Decoder().Decompress4X(ls.check[:0:n], four); err != nil || !bytes.Equal(check, lits) {
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
