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
	// Tombstones counts tombstones, expired cells and shadowed cells walked.
	Tombstones int
	// SSTables and Blocks were read; SSTablesSkipped were ruled out
	// unopened (bloom filter, partition index, clustering range, expiry).
	SSTables, SSTablesSkipped, Blocks, Memtables int
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
	t.Blocks += s.BlocksRead
	t.Memtables += s.MemtablesRead
	t.Rows += s.Rows
	t.Partitions++
}

// String is the one-line trace: "read N live and M tombstoned cells in K
// SSTables (B blocks), P partitions".
func (t *Trace) String() string {
	return fmt.Sprintf("read %d live and %d tombstoned cells in %d SSTables (%d blocks), %d partitions",
		t.LiveCells, t.Tombstones, t.SSTables, t.Blocks, t.Partitions)
}
