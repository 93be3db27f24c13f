package sstable

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/eventide/eventide/storage/internal/base"
)

// BlockMeta describes a data block from the block index, so a reader can
// decide to skip it without reading it. Its slices alias the reader's
// index and must not be modified.
type BlockMeta struct {
	// MinClustering and MaxClustering are the first and last cells'
	// clustering keys.
	MinClustering, MaxClustering []byte
	// MinTimestamp and MaxTimestamp bound the cells' write times (µs).
	MinTimestamp, MaxTimestamp int64
	// MaxLocalDeletionTime is the latest expiry or deletion time of the
	// cells, or base.NoDeletionTime if any cell is live or a counter: a
	// block whose value is < now holds nothing live.
	MaxLocalDeletionTime int64
	// Cells is the number of cells.
	Cells int
}

// blockHandle is one block index entry: where a data block is and what it
// holds.
type blockHandle struct {
	storedLen uint64 // payload bytes in the file, not counting the trailer
	rawLen    uint64 // decompressed bytes
	meta      BlockMeta
}

// frameLen is the block's length in the file, trailer included.
func (h *blockHandle) frameLen() uint64 { return h.storedLen + blockTrailerLen }

// appendBlockIndexEntry appends the encoding of h (layout in writer.go).
func appendBlockIndexEntry(dst []byte, h *blockHandle) []byte {
	dst = binary.AppendUvarint(dst, h.storedLen)
	dst = binary.AppendUvarint(dst, h.rawLen)
	dst = binary.AppendUvarint(dst, uint64(h.meta.Cells))
	dst = appendBytes(dst, h.meta.MinClustering)
	dst = appendBytes(dst, h.meta.MaxClustering)
	dst = binary.AppendVarint(dst, h.meta.MinTimestamp)
	dst = binary.AppendUvarint(dst, uint64(h.meta.MaxTimestamp)-uint64(h.meta.MinTimestamp))
	return appendLDT(dst, h.meta.MaxLocalDeletionTime)
}

// decodeBlockIndexEntry decodes one entry and checks it is self-consistent.
func decodeBlockIndexEntry(src []byte) (blockHandle, []byte, error) {
	c := cursor{b: src}
	var h blockHandle
	h.storedLen = c.uvarint("block stored length")
	h.rawLen = c.uvarint("block raw length")
	cells := c.uvarint("block cell count")
	h.meta.MinClustering = c.bytes("block min clustering")
	h.meta.MaxClustering = c.bytes("block max clustering")
	h.meta.MinTimestamp = c.varint("block min timestamp")
	span := c.uvarint("block timestamp span")
	h.meta.MaxLocalDeletionTime = c.ldt("block max deletion time")
	if c.err != nil {
		return blockHandle{}, nil, c.err
	}
	if h.storedLen == 0 || h.rawLen == 0 || h.rawLen > maxBlockRawLen {
		return blockHandle{}, nil, base.CorruptionErrorf("cannot decode block index entry: got stored length %d, raw length %d, want 1..%d", h.storedLen, h.rawLen, maxBlockRawLen)
	}
	// A block needs at least one flag byte per cell.
	if cells == 0 || cells > h.rawLen {
		return blockHandle{}, nil, base.CorruptionErrorf("cannot decode block index entry: got %d cells in %d bytes", cells, h.rawLen)
	}
	h.meta.Cells = int(cells)
	if bytes.Compare(h.meta.MinClustering, h.meta.MaxClustering) > 0 {
		return blockHandle{}, nil, base.CorruptionErrorf("cannot decode block index entry: min clustering %x sorts after max %x", h.meta.MinClustering, h.meta.MaxClustering)
	}
	if span > uint64(math.MaxInt64)-uint64(h.meta.MinTimestamp) {
		return blockHandle{}, nil, base.CorruptionErrorf("cannot decode block index entry: timestamp span %d overflows from %d", span, h.meta.MinTimestamp)
	}
	h.meta.MaxTimestamp = int64(uint64(h.meta.MinTimestamp) + span)
	return h, c.b, nil
}

// blockIndex is the decompressed block index kept in memory: entries are
// decoded on demand through the offset tables built (and validated) by
// decodeBlockIndex, which costs 12 bytes per block instead of a decoded
// struct.
type blockIndex struct {
	raw       []byte
	entryOffs []uint32 // offset of each entry in raw
	fileOffs  []uint64 // file offset of each block
	// decoded, only while an index page is being validated, holds every
	// entry already decoded, so that checking the partitions against
	// their blocks does not decode each entry a second time. It is nil
	// in any index a reader keeps.
	decoded []blockHandle
}

// decodeBlockIndex decodes and validates every entry of a block index
// whose blocks fill the file's data section [0, dataLen) exactly, in order.
func decodeBlockIndex(raw []byte, dataLen uint64) (blockIndex, error) {
	return decodeBlockIndexKeep(raw, dataLen, nil)
}

// decodeBlockIndexKeep is decodeBlockIndex that also keeps every decoded
// entry, appended to keep's array, in the index's decoded list (see
// blockIndex.decoded) when keep is not nil.
func decodeBlockIndexKeep(raw []byte, dataLen uint64, keep []blockHandle) (blockIndex, error) {
	if uint64(len(raw)) > math.MaxUint32 {
		return blockIndex{}, base.CorruptionErrorf("cannot decode block index: got %d bytes, want at most %d", len(raw), uint64(math.MaxUint32))
	}
	bi := blockIndex{raw: raw, decoded: keep}
	var off uint64
	for src := raw; len(src) > 0; {
		pos := len(raw) - len(src)
		h, tail, err := decodeBlockIndexEntry(src)
		if err != nil {
			return blockIndex{}, fmt.Errorf("block index entry %d: %w", len(bi.entryOffs), err)
		}
		if h.frameLen() > dataLen-off {
			return blockIndex{}, base.CorruptionErrorf("cannot decode block index entry %d: block at offset %d of %d bytes overruns the data section (%d bytes)", len(bi.entryOffs), off, h.frameLen(), dataLen)
		}
		bi.entryOffs = append(bi.entryOffs, uint32(pos))
		bi.fileOffs = append(bi.fileOffs, off)
		if bi.decoded != nil {
			bi.decoded = append(bi.decoded, h)
		}
		off += h.frameLen()
		src = tail
	}
	if off != dataLen {
		return blockIndex{}, base.CorruptionErrorf("cannot decode block index: blocks cover %d bytes, data section is %d", off, dataLen)
	}
	return bi, nil
}

func (bi *blockIndex) len() int { return len(bi.entryOffs) }

// handle decodes entry i, which decodeBlockIndex has validated.
func (bi *blockIndex) handle(i int) blockHandle {
	if bi.decoded != nil {
		return bi.decoded[i]
	}
	h, _, err := decodeBlockIndexEntry(bi.raw[bi.entryOffs[i]:])
	if err != nil {
		panic(fmt.Sprintf("BUG: validated block index entry %d no longer decodes: %v", i, err))
	}
	return h
}
