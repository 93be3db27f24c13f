package catalog

import (
	"fmt"

	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/storage"
)

// StorageDef is the storage engine's definition of table t.
func StorageDef(t *schema.Table) storage.TableDef {
	return storage.TableDef{Name: t.Name, Compaction: storage.CompactionStrategy(t.Compaction), DefaultTTLSeconds: t.DefaultTTLSeconds,
		GCGraceSeconds: t.GCGraceSeconds, Compression: t.Compression}
}

// Insert adds to b the row of t whose key and columns are in row: every
// partition key and clustering column must be present; regular columns
// are optional. It writes a row marker (schema.Table's layout). A failed
// Insert leaves b unchanged.
func Insert(b *storage.Batch, t *schema.Table, row schema.Values, o schema.WriteOptions) error {
	return write(b, t, row, o, true)
}

// Update is Insert without the row marker: once all its columns are
// deleted or expired, the row is gone.
func Update(b *storage.Batch, t *schema.Table, row schema.Values, o schema.WriteOptions) error {
	return write(b, t, row, o, false)
}

func write(b *storage.Batch, t *schema.Table, row schema.Values, o schema.WriteOptions, marker bool) error {
	partition, clustering, cells, err := t.EncodeRow(row)
	if err != nil {
		return err
	}
	put := func(column string, value []byte) {
		if o.TTLSeconds > 0 {
			b.PutTTL(t.Name, partition, clustering, []byte(column), value, o.TimestampMicros, o.TTLSeconds)
		} else {
			b.Put(t.Name, partition, clustering, []byte(column), value, o.TimestampMicros)
		}
	}
	if marker {
		put("", nil)
	}
	for _, c := range cells {
		put(c.Column, c.Value)
	}
	return nil
}

// DeleteRow adds to b the deletion of the row of t whose key is in key.
func DeleteRow(b *storage.Batch, t *schema.Table, key schema.Values, timestampMicros int64) error {
	partition, clustering, err := t.EncodeKey(key)
	if err != nil {
		return err
	}
	b.DeleteRow(t.Name, partition, clustering, timestampMicros)
	return nil
}

// DeletePartition adds to b the deletion of a whole partition of t.
func DeletePartition(b *storage.Batch, t *schema.Table, timestampMicros int64, partitionKey ...any) error {
	partition, err := t.EncodePartition(partitionKey...)
	if err != nil {
		return err
	}
	b.DeletePartition(t.Name, partition, timestampMicros)
	return nil
}

// DecodeRow decodes a row read from t. The row marker is not a cell.
func DecodeRow(t *schema.Table, row *storage.Row) (schema.Row, error) {
	key, err := t.Clustering.Decode(row.Clustering)
	if err != nil {
		return schema.Row{}, fmt.Errorf("decode row of %s: %w", t.Name, err)
	}
	out := schema.Row{Key: key}
	for _, c := range row.Cells {
		if len(c.Column) == 0 {
			continue
		}
		v, typ, err := t.DecodeCell(string(c.Column), c.Value)
		if err != nil {
			return schema.Row{}, err
		}
		out.Cells = append(out.Cells, schema.RowCell{Name: string(c.Column), Type: typ, Value: v,
			WriteTimeMicros: c.WriteTimeMicros, TTLSeconds: c.TTLSeconds})
	}
	return out, nil
}
