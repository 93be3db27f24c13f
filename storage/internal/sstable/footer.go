package sstable

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/eventide/eventide/storage/internal/base"
)

// metaHandle locates a meta block (block index, partition index, bloom
// filter, properties; in version 4 page index, bloom filter, properties;
// in version 5 page index, dictionary if any, bloom filter, properties)
// from the footer.
type metaHandle struct {
	offset    uint64 // of the payload in the file
	storedLen uint64 // payload bytes, not counting the trailer
	rawLen    uint64 // decompressed bytes
}

func (h metaHandle) end() uint64 { return h.offset + h.storedLen + blockTrailerLen }

// footer is the fixed-size tail of the file (layout in writer.go). In
// version 4 files partitionIndex is zero; in version 5 files it is the
// dictionary's handle (zero if the file has none).
type footer struct {
	blockIndex, partitionIndex, bloom, properties metaHandle
	version                                       uint32
}

// dictionary is the handle of a version 5 file's dictionary, zero if it
// has none.
func (f *footer) dictionary() metaHandle {
	if f.version >= formatVersion5 {
		return f.partitionIndex
	}
	return metaHandle{}
}

func (f *footer) handles() [4]*metaHandle {
	return [4]*metaHandle{&f.blockIndex, &f.partitionIndex, &f.bloom, &f.properties}
}

func appendFooter(dst []byte, f *footer) []byte {
	start := len(dst)
	for _, h := range f.handles() {
		dst = binary.LittleEndian.AppendUint64(dst, h.offset)
		dst = binary.LittleEndian.AppendUint64(dst, h.storedLen)
		dst = binary.LittleEndian.AppendUint64(dst, h.rawLen)
	}
	dst = binary.LittleEndian.AppendUint32(dst, f.version)
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], crcTable))
	return append(dst, footerMagic...)
}

// decodeFooter decodes the footer from the first footerLen bytes of src. It
// checks the magic, the checksum and the version, and that the meta blocks
// follow each other without gaps and end where the footer starts, with the
// footer at fileSize - footerLen.
func decodeFooter(src []byte, fileSize uint64) (footer, []byte, error) {
	if len(src) < footerLen {
		return footer{}, nil, base.CorruptionErrorf("cannot decode footer: got %d bytes, want %d", len(src), footerLen)
	}
	b := src[:footerLen]
	if magic := string(b[footerLen-len(footerMagic):]); magic != footerMagic {
		return footer{}, nil, base.CorruptionErrorf("cannot decode footer: got magic %q, want %q (not an sstable?)", magic, footerMagic)
	}
	sumOff := footerLen - len(footerMagic) - 4
	if got, want := binary.LittleEndian.Uint32(b[sumOff:]), crc32.Checksum(b[:sumOff], crcTable); got != want {
		return footer{}, nil, base.CorruptionErrorf("cannot verify footer checksum: got %#08x, want %#08x", got, want)
	}
	c := cursor{b: b[:sumOff]}
	var f footer
	for _, h := range f.handles() {
		h.offset = c.fixed64("footer block offset")
		h.storedLen = c.fixed64("footer block length")
		h.rawLen = c.fixed64("footer block raw length")
	}
	f.version = c.fixed32("footer format version")
	if c.err != nil {
		return footer{}, nil, c.err
	}
	if f.version < formatVersion1 || f.version > formatVersion5 {
		return footer{}, nil, base.CorruptionErrorf("cannot decode footer: got format version %d, want %d to %d", f.version, formatVersion1, formatVersion5)
	}
	if fileSize < footerLen {
		return footer{}, nil, base.CorruptionErrorf("cannot decode footer: file of %d bytes is shorter than a footer", fileSize)
	}
	// Meta blocks are contiguous, in this order, and end at the footer:
	// any damaged offset or length breaks the chain. Version 4 has no
	// partition index meta block (the first handle is the page index):
	// its handle is zero. Version 5 has the dictionary there, or zero.
	chain := []*metaHandle{&f.blockIndex, &f.partitionIndex, &f.bloom, &f.properties}
	if f.version >= formatVersion5 && f.partitionIndex != (metaHandle{}) {
		if f.partitionIndex.rawLen < minDictLen || f.partitionIndex.rawLen > maxDictLen {
			return footer{}, nil, base.CorruptionErrorf("cannot decode footer: got a dictionary of %d bytes, want %d to %d", f.partitionIndex.rawLen, minDictLen, maxDictLen)
		}
	} else if f.version >= formatVersion4 {
		if f.partitionIndex != (metaHandle{}) {
			return footer{}, nil, base.CorruptionErrorf("cannot decode footer: got a partition index handle %+v in a version %d file, want zeros", f.partitionIndex, f.version)
		}
		chain = []*metaHandle{&f.blockIndex, &f.bloom, &f.properties}
	}
	next := f.blockIndex.offset
	for _, h := range chain {
		if h.offset != next || h.offset > fileSize || h.storedLen > fileSize || h.rawLen > maxBlockRawLen || h.end() > fileSize-footerLen {
			return footer{}, nil, base.CorruptionErrorf("cannot decode footer: meta block at %d of %d bytes (raw %d) does not fit before the footer at %d (want it at %d)",
				h.offset, h.storedLen, h.rawLen, fileSize-footerLen, next)
		}
		next = h.end()
	}
	if next != fileSize-footerLen {
		return footer{}, nil, base.CorruptionErrorf("cannot decode footer: meta blocks end at %d, footer starts at %d", next, fileSize-footerLen)
	}
	return f, src[footerLen:], nil
}
