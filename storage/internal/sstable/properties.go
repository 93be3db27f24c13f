package sstable

import (
	"bytes"
	"encoding/binary"
	"math"

	"github.com/eventide/eventide/storage/internal/base"
)

// Properties are an SSTable's statistics, computed by the writer and
// stored in the file, plus sizes taken from the footer. Compaction and the
// read path decide from them whether a file is worth reading at all.
type Properties struct {
	Partitions     int64
	Cells          int64
	LiveCells      int64
	ExpiringCells  int64
	TombstoneCells int64
	CounterCells   int64
	// RangeTombstones counts range (and row) tombstones;
	// PartitionDeletions counts partitions with a partition deletion.
	RangeTombstones    int64
	PartitionDeletions int64
	// DataBlocks is the number of data blocks.
	DataBlocks int64

	// MinTimestamp and MaxTimestamp bound the write times (µs) of every
	// cell and deletion (MarkedForDeleteAt); both 0 if there are none.
	MinTimestamp, MaxTimestamp int64
	// MinClustering and MaxClustering bound the cells' clustering keys
	// over all partitions; nil if there are no cells.
	MinClustering, MaxClustering []byte
	// MaxLocalDeletionTime is the latest expiry of the expiring cells and
	// deletion time of the tombstones and deletions, or
	// base.NoDeletionTime if any cell is live or a counter, so that
	// MaxLocalDeletionTime < now means everything has expired or is
	// deleted. math.MinInt64 when there are no cells nor deletions.
	MaxLocalDeletionTime int64
	// MinLocalDeletionTime is the earliest of the same times, or
	// base.NoDeletionTime if there are none.
	MinLocalDeletionTime int64

	// Compression is the writer's compression (a block that does not
	// shrink is stored uncompressed regardless).
	Compression Compression
	// DataBytes is the size of the data blocks, IndexBytes of everything
	// else (indexes, bloom filter, properties, footer), FileBytes the
	// whole file.
	DataBytes, IndexBytes, FileBytes int64
	// DictionaryBytes is the decompressed size of the file's zstd
	// dictionary (format version 5), 0 if it has none. Like the sizes
	// above, it is not stored in the properties block.
	DictionaryBytes int64
	// FormatVersion is the file's format version.
	FormatVersion uint32
	// Tombstones are the creation time and tombstone histograms (format
	// version 3; zero in older files).
	Tombstones TombstoneStats
}

// DroppableRatio estimates the share of the file's cells and deletions a
// compaction at nowSeconds could purge on time grounds (see
// TombstoneStats.Droppable): Cassandra's droppable tombstone ratio.
func (p *Properties) DroppableRatio(nowSeconds, gcBefore int64) float64 {
	total := p.Cells + p.RangeTombstones + p.PartitionDeletions
	if total == 0 {
		return 0
	}
	return float64(p.Tombstones.Droppable(nowSeconds, gcBefore)) / float64(total)
}

// newProperties returns the properties of an empty table, ready to
// accumulate into.
func newProperties(c Compression) Properties {
	return Properties{
		Compression:          c,
		MinTimestamp:         math.MaxInt64,
		MaxTimestamp:         math.MinInt64,
		MaxLocalDeletionTime: math.MinInt64,
		MinLocalDeletionTime: base.NoDeletionTime,
	}
}

// appendProperties appends the stored properties (layout in writer.go).
func appendProperties(dst []byte, p *Properties) []byte {
	for _, v := range [...]int64{p.Partitions, p.Cells, p.LiveCells, p.ExpiringCells, p.TombstoneCells,
		p.CounterCells, p.RangeTombstones, p.PartitionDeletions, p.DataBlocks} {
		dst = binary.AppendUvarint(dst, uint64(v))
	}
	dst = binary.AppendVarint(dst, p.MinTimestamp)
	dst = binary.AppendVarint(dst, p.MaxTimestamp)
	dst = appendOptionalBytes(dst, p.MinClustering)
	dst = appendOptionalBytes(dst, p.MaxClustering)
	dst = appendLDT(dst, p.MaxLocalDeletionTime)
	dst = appendLDT(dst, p.MinLocalDeletionTime)
	dst = append(dst, byte(p.Compression))
	// Version 3.
	dst = binary.AppendVarint(dst, p.Tombstones.CreatedAt)
	dst = appendHistogram(dst, &p.Tombstones.Deletions)
	dst = appendHistogram(dst, &p.Tombstones.Expiring)
	return appendHistogram(dst, &p.Tombstones.ExpiringWritten)
}

// appendOptionalBytes distinguishes nil (0) from bytes (length + 1).
func appendOptionalBytes(dst, b []byte) []byte {
	if b == nil {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(b))+1)
	return append(dst, b...)
}

func (c *cursor) optionalBytes(what string) []byte {
	n := c.uvarint(what)
	if n == 0 || c.err != nil {
		return nil
	}
	if n-1 > uint64(len(c.b)) {
		c.fail(what, "got length %d, but only %d bytes remain", n-1, len(c.b))
		return nil
	}
	return nonNil(c.take(what, int(n-1)))
}

// decodeProperties decodes the stored properties of a file of the given
// format version and checks that they are self-consistent. The clustering
// keys alias src.
func decodeProperties(src []byte, version uint32) (Properties, []byte, error) {
	c := cursor{b: src}
	var p Properties
	for _, f := range [...]*int64{&p.Partitions, &p.Cells, &p.LiveCells, &p.ExpiringCells, &p.TombstoneCells,
		&p.CounterCells, &p.RangeTombstones, &p.PartitionDeletions, &p.DataBlocks} {
		v := c.uvarint("property count")
		if c.err == nil && v > math.MaxInt64/4 {
			c.fail("property count", "got %d, want at most %d", v, math.MaxInt64/4)
		}
		*f = int64(v)
	}
	p.MinTimestamp = c.varint("property min timestamp")
	p.MaxTimestamp = c.varint("property max timestamp")
	p.MinClustering = c.optionalBytes("property min clustering")
	p.MaxClustering = c.optionalBytes("property max clustering")
	p.MaxLocalDeletionTime = c.ldt("property max deletion time")
	p.MinLocalDeletionTime = c.ldt("property min deletion time")
	p.Compression = Compression(c.byte1("property compression"))
	if version >= formatVersion3 {
		p.Tombstones.CreatedAt = c.varint("property creation time")
		p.Tombstones.Deletions = c.histogram("property deletion histogram")
		p.Tombstones.Expiring = c.histogram("property expiry histogram")
		p.Tombstones.ExpiringWritten = c.histogram("property expiring write histogram")
	}
	if c.err != nil {
		return Properties{}, nil, c.err
	}
	if !p.Compression.Valid() {
		return Properties{}, nil, base.CorruptionErrorf("cannot decode properties: unknown compression %d", p.Compression)
	}
	if sum := p.LiveCells + p.ExpiringCells + p.TombstoneCells + p.CounterCells; sum != p.Cells {
		return Properties{}, nil, base.CorruptionErrorf("cannot decode properties: cells by kind sum to %d, want %d", sum, p.Cells)
	}
	if (p.Cells == 0) != (p.MinClustering == nil) || (p.MinClustering == nil) != (p.MaxClustering == nil) {
		return Properties{}, nil, base.CorruptionErrorf("cannot decode properties: clustering bounds present %v/%v with %d cells", p.MinClustering != nil, p.MaxClustering != nil, p.Cells)
	}
	if n := p.Tombstones.Deletions.Total(); n > p.TombstoneCells+p.RangeTombstones+p.PartitionDeletions {
		return Properties{}, nil, base.CorruptionErrorf("cannot decode properties: deletion histogram counts %d, more than the %d tombstones and deletions", n, p.TombstoneCells+p.RangeTombstones+p.PartitionDeletions)
	}
	if p.Tombstones.Expiring.Total() > p.ExpiringCells || p.Tombstones.ExpiringWritten.Total() > p.ExpiringCells {
		return Properties{}, nil, base.CorruptionErrorf("cannot decode properties: expiry histograms count more than the %d expiring cells", p.ExpiringCells)
	}
	if bytes.Compare(p.MinClustering, p.MaxClustering) > 0 || p.MinTimestamp > p.MaxTimestamp {
		return Properties{}, nil, base.CorruptionErrorf("cannot decode properties: min sorts after max")
	}
	return p, c.b, nil
}
