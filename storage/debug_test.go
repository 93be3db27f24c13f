package storage

import (
	"fmt"
	"strings"

	"github.com/eventide/eventide/storage/internal/base"
	"github.com/eventide/eventide/storage/internal/sstable"
)

// dumpPartition describes every source's view of a partition, for test
// failure messages.
func dumpPartition(db *DB, table string, pk []byte) string {
	var b strings.Builder
	v := db.acquireVersion()
	defer v.unref()
	db.mu.Lock()
	t := db.tables[table]
	db.mu.Unlock()
	for i, mem := range v.memtables() {
		fmt.Fprintf(&b, "memtable %d (min ts %d): deletions %+v\n", i, mem.MinTimestamp(), mem.Deletions(t.id, pk))
		it := mem.NewIter(t.id, pk, base.Unbounded, base.Unbounded, false)
		for it.Next() {
			c := it.Cell()
			fmt.Fprintf(&b, "  %x/%s %v ts=%d ldt=%d %q\n", c.Clustering, c.Column, c.Kind, c.Timestamp, c.LocalDeletionTime, c.Value)
		}
	}
	for _, h := range v.sstables[t.id] {
		info, ok, err := h.reader.FindPartition(pk)
		fmt.Fprintf(&b, "sstable %d ts [%d,%d] maxLDT %d: has=%v (err %v) deletions %+v\n", h.fileNum, h.props.MinTimestamp, h.props.MaxTimestamp, h.props.MaxLocalDeletionTime, ok, err, info.Deletions)
		if !ok {
			continue
		}
		it := h.reader.NewPartitionIter(info, sstable.IterOptions{})
		for it.Next() {
			c := it.Cell()
			fmt.Fprintf(&b, "  %x/%s %v ts=%d ldt=%d %q\n", c.Clustering, c.Column, c.Kind, c.Timestamp, c.LocalDeletionTime, c.Value)
		}
		it.Close()
	}
	return b.String()
}
