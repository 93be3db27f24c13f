package catalog

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/storage"
)

// PutCheckpoint records in b that consumer has applied every message up to
// stream sequence seq.
func PutCheckpoint(b *storage.Batch, consumer string, seq uint64) {
	b.Put(schema.CheckpointsTable, []byte(consumer), nil, []byte(schema.ColumnSeq), binary.BigEndian.AppendUint64(nil, seq), int64(seq))
}

// ReadCheckpoint returns the last sequence recorded for consumer, 0 if none.
func ReadCheckpoint(db *storage.DB, consumer string) (uint64, error) {
	it, err := db.Slice(context.Background(), storage.SliceQuery{Table: schema.CheckpointsTable, Partition: []byte(consumer), Limit: 1})
	if err != nil {
		return 0, fmt.Errorf("read checkpoint of %s: %w", consumer, err)
	}
	defer it.Close()
	var seq uint64
	for it.Next() {
		for _, c := range it.Row().Cells {
			if string(c.Column) == schema.ColumnSeq {
				if len(c.Value) != 8 {
					return 0, fmt.Errorf("read checkpoint of %s: %w: value has %d bytes, want 8", consumer, storage.ErrCorruption, len(c.Value))
				}
				seq = binary.BigEndian.Uint64(c.Value)
			}
		}
	}
	if err := it.Err(); err != nil {
		return 0, fmt.Errorf("read checkpoint of %s: %w", consumer, err)
	}
	return seq, nil
}
