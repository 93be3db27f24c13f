package reader

import (
	"fmt"

	"github.com/eventide/eventide/storage"
)

// Trace says what a query touched.
type Trace struct {
	// LiveCells is the number of live cells read (including the one row
	// read past the limit to decide whether a next page exists).
	LiveCells int
	// Tombstones counts every dead cell the query walked: tombstones,
	// expired cells (an expired cell is a tombstone) and shadowed cells,
	// and the range, row and partition deletions themselves. Expired
	// cells the query skipped without reading them are not walked: they
	// are in SSTablesSkippedExpired and BlocksSkipped.
	Tombstones int
	// SSTables and Blocks were read; SSTablesSkipped were ruled out
	// unopened (bloom filter, partition index, clustering range, expiry).
	SSTables, SSTablesSkipped, Blocks, Memtables int
	// SSTablesSkippedByBloom is the part of SSTablesSkipped the bloom
	// filter ruled out; SSTablesSkippedExpired the part whose cells of
	// the partition were all expired and shadowed nothing.
	SSTablesSkippedByBloom, SSTablesSkippedExpired int
	// BlocksSkipped were fully expired blocks skipped unread.
	BlocksSkipped int
	// Partitions is the number of partitions sliced.
	Partitions int
	// Rows is the number of live rows read.
	Rows int
}

func (t *Trace) add(s storage.ReadStats) {
	t.LiveCells += s.LiveCells
	t.Tombstones += s.TombstonesScanned
	t.SSTables += s.SSTablesRead
	t.SSTablesSkipped += s.SSTablesSkipped
	t.SSTablesSkippedByBloom += s.SSTablesSkippedByBloom
	t.SSTablesSkippedExpired += s.SSTablesSkippedExpired
	t.Blocks += s.BlocksRead
	t.BlocksSkipped += s.BlocksSkipped
	t.Memtables += s.MemtablesRead
	t.Rows += s.Rows
	t.Partitions++
}

// Merge adds what o touched to t: the trace of a request that ran several
// queries (counts of several types).
func (t *Trace) Merge(o *Trace) {
	if o == nil {
		return
	}
	t.LiveCells += o.LiveCells
	t.Tombstones += o.Tombstones
	t.SSTables += o.SSTables
	t.SSTablesSkipped += o.SSTablesSkipped
	t.SSTablesSkippedByBloom += o.SSTablesSkippedByBloom
	t.SSTablesSkippedExpired += o.SSTablesSkippedExpired
	t.Blocks += o.Blocks
	t.BlocksSkipped += o.BlocksSkipped
	t.Memtables += o.Memtables
	t.Rows += o.Rows
	t.Partitions += o.Partitions
}

// String is the one-line trace: "read N live and M tombstoned cells in K
// SSTables (B blocks), P partitions; skipped unread S SSTables (F by bloom
// filter, E expired) and X expired blocks".
func (t *Trace) String() string {
	return fmt.Sprintf("read %d live and %d tombstoned cells in %d SSTables (%d blocks), %d partitions; skipped unread %d SSTables (%d by bloom filter, %d expired) and %d expired blocks",
		t.LiveCells, t.Tombstones, t.SSTables, t.Blocks, t.Partitions,
		t.SSTablesSkipped, t.SSTablesSkippedByBloom, t.SSTablesSkippedExpired, t.BlocksSkipped)
}
