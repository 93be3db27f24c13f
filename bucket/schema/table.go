package schema

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/storage"
)

// Column is a typed column.
type Column struct {
	Name string
	Type bucket.ColumnType
}

// Table is a table's schema: a partition key, clustering columns with an
// order, and sparse typed regular columns. Rows store only the columns
// they have; a missing or nil value never writes a tombstone.
//
// Physical layout in the storage engine (a format: never change its
// meaning):
//   - partition: when the partition key is one text, ascii or blob column,
//     its bytes; otherwise the ASC clustering encoding of its columns;
//   - clustering: Clustering.Encode of the clustering values;
//   - one cell per present regular column, named by the column, holding
//     the value in the format of value.go;
//   - Insert also writes a row marker, the cell with the empty column name
//     and an empty value, so a row with only key columns exists (CQL's
//     primary key liveness); Update does not.
type Table struct {
	Name         string
	PartitionKey []Column
	Clustering   bucket.ClusteringLayout
	Columns      []Column
	// SchemaOptional tables accept fields without a column: strings as
	// text, []byte as blob.
	SchemaOptional bool
	// Storage options, as storage.TableDef.
	DefaultTTLSeconds int32
	GCGraceSeconds    *int64
	Compaction        storage.CompactionStrategy
	Compression       string
}

var columnNamePattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,63}$`)

// Validate checks t's definition.
func (t *Table) Validate() error {
	if !columnNamePattern.MatchString(t.Name) || strings.HasPrefix(t.Name, "_") {
		return fmt.Errorf("%w: table name %q: use 1 to 64 of a-z, 0-9 and _, not starting with _ or a digit", ErrInvalidSchema, t.Name)
	}
	for _, def := range BuiltinTableDefs() {
		if def.Name == t.Name {
			return fmt.Errorf("%w: table name %q is taken by a built-in table; choose another name", ErrInvalidSchema, t.Name)
		}
	}
	if len(t.PartitionKey) == 0 {
		return fmt.Errorf("%w: table %s has no partition key column", ErrInvalidSchema, t.Name)
	}
	seen := map[string]bool{}
	check := func(kind, name string, typ bucket.ColumnType) error {
		if !columnNamePattern.MatchString(name) {
			return fmt.Errorf("%w: table %s: %s column name %q: use a-z, 0-9 and _, starting with a letter or _", ErrInvalidSchema, t.Name, kind, name)
		}
		if seen[name] {
			return fmt.Errorf("%w: table %s: column %s is defined twice", ErrInvalidSchema, t.Name, name)
		}
		seen[name] = true
		if !typ.Valid() {
			return fmt.Errorf("%w: table %s: column %s has unknown type %s", ErrInvalidSchema, t.Name, name, typ)
		}
		return nil
	}
	for _, c := range t.PartitionKey {
		if err := check("partition key", c.Name, c.Type); err != nil {
			return err
		}
	}
	for _, c := range t.Clustering {
		if err := check("clustering", c.Name, c.Type); err != nil {
			return err
		}
		if c.Order != bucket.Asc && c.Order != bucket.Desc {
			return fmt.Errorf("%w: table %s: clustering column %s has order %s", ErrInvalidSchema, t.Name, c.Name, c.Order)
		}
	}
	for _, c := range t.Columns {
		if err := check("regular", c.Name, c.Type); err != nil {
			return err
		}
	}
	return nil
}

// StorageDef is t's definition for the storage engine.
func (t *Table) StorageDef() storage.TableDef {
	return storage.TableDef{Name: t.Name, Compaction: t.Compaction, DefaultTTLSeconds: t.DefaultTTLSeconds,
		GCGraceSeconds: t.GCGraceSeconds, Compression: t.Compression}
}

// Column returns the regular column called name.
func (t *Table) Column(name string) (Column, bool) {
	for _, c := range t.Columns {
		if c.Name == name {
			return c, true
		}
	}
	return Column{}, false
}

func (t *Table) isKeyColumn(name string) bool {
	for _, c := range t.PartitionKey {
		if c.Name == name {
			return true
		}
	}
	for _, c := range t.Clustering {
		if c.Name == name {
			return true
		}
	}
	return false
}

// EncodePartition returns the partition bytes of the partition key values,
// in PartitionKey order.
func (t *Table) EncodePartition(values ...any) ([]byte, error) {
	if len(values) != len(t.PartitionKey) {
		return nil, fmt.Errorf("%w: table %s: partition key has %d columns (%s), got %d values",
			ErrMissingKey, t.Name, len(t.PartitionKey), t.partitionColumnNames(), len(values))
	}
	if len(t.PartitionKey) == 1 {
		c := t.PartitionKey[0]
		switch c.Type {
		case bucket.TypeText, bucket.TypeASCII, bucket.TypeBlob:
			v, err := AppendValue(nil, c.Type, values[0])
			if err != nil {
				return nil, t.valueError(c, values[0], err)
			}
			if len(v) == 1 {
				return nil, fmt.Errorf("%w: table %s: partition key column %s is empty", ErrInvalidValue, t.Name, c.Name)
			}
			return v[1:], nil
		}
	}
	layout := make(bucket.ClusteringLayout, len(t.PartitionKey))
	for i, c := range t.PartitionKey {
		layout[i] = bucket.ClusteringColumn{Name: c.Name, Type: c.Type}
	}
	b, err := layout.Encode(nil, values...)
	if err != nil {
		return nil, fmt.Errorf("%w: table %s partition key: %w", ErrInvalidValue, t.Name, err)
	}
	return b, nil
}

func (t *Table) partitionColumnNames() string {
	names := make([]string, len(t.PartitionKey))
	for i, c := range t.PartitionKey {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

func (t *Table) valueError(c Column, v any, err error) error {
	return fmt.Errorf("%w: table %s column %s: want %s, got %s: %w", ErrInvalidValue, t.Name, c.Name, c.Type, describe(v), err)
}

func describe(v any) string {
	s := fmt.Sprintf("%T %v", v, v)
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// WriteOptions are the options of one row write.
type WriteOptions struct {
	// TimestampMicros is the write timestamp of every cell.
	TimestampMicros int64
	// TTLSeconds overrides the table's default TTL when > 0.
	TTLSeconds int32
}

// Values maps column names to values of the Go types
// bucket.ClusteringLayout.Encode documents. A nil value is "unset".
type Values map[string]any

// Insert adds to b the row whose key and columns are in row: every
// partition key and clustering column must be present; regular columns
// are optional. It writes a row marker.
func (t *Table) Insert(b *storage.Batch, row Values, o WriteOptions) error {
	return t.write(b, row, o, true)
}

// Update is Insert without the row marker: once all its columns are
// deleted or expired, the row is gone.
func (t *Table) Update(b *storage.Batch, row Values, o WriteOptions) error {
	return t.write(b, row, o, false)
}

func (t *Table) write(b *storage.Batch, row Values, o WriteOptions, marker bool) error {
	partition, clustering, err := t.keyOf(row)
	if err != nil {
		return err
	}
	// Validate every column before adding anything to the batch.
	type cell struct {
		name  string
		value []byte
	}
	cells := make([]cell, 0, len(row))
	for name, v := range row {
		if v == nil || t.isKeyColumn(name) {
			continue
		}
		c, ok := t.Column(name)
		if !ok {
			if !t.SchemaOptional {
				return fmt.Errorf("%w: table %s has no column %q (columns: %s)", ErrUnknownColumn, t.Name, name, t.columnNames())
			}
			switch v.(type) {
			case string:
				c = Column{Name: name, Type: bucket.TypeText}
			case []byte:
				c = Column{Name: name, Type: bucket.TypeBlob}
			default:
				return fmt.Errorf("%w: table %s: field %q has no column and is a %T; schema-optional fields must be text (string) or blob ([]byte)", ErrInvalidValue, t.Name, name, v)
			}
		}
		enc, err := AppendValue(nil, c.Type, v)
		if err != nil {
			return t.valueError(c, v, err)
		}
		cells = append(cells, cell{name, enc})
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
		put(c.name, c.value)
	}
	return nil
}

func (t *Table) columnNames() string {
	names := make([]string, 0, len(t.Columns))
	for _, c := range t.Columns {
		names = append(names, c.Name)
	}
	return strings.Join(names, ", ")
}

// keyOf encodes the partition and clustering key of row.
func (t *Table) keyOf(row Values) (partition, clustering []byte, err error) {
	pvals := make([]any, len(t.PartitionKey))
	for i, c := range t.PartitionKey {
		v, ok := row[c.Name]
		if !ok || v == nil {
			return nil, nil, fmt.Errorf("%w: table %s: partition key column %s is missing", ErrMissingKey, t.Name, c.Name)
		}
		pvals[i] = v
	}
	partition, err = t.EncodePartition(pvals...)
	if err != nil {
		return nil, nil, err
	}
	cvals := make([]any, len(t.Clustering))
	for i, c := range t.Clustering {
		v, ok := row[c.Name]
		if !ok || v == nil {
			return nil, nil, fmt.Errorf("%w: table %s: clustering column %s is missing", ErrMissingKey, t.Name, c.Name)
		}
		cvals[i] = v
	}
	clustering, err = t.Clustering.Encode(nil, cvals...)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: table %s: %w", ErrInvalidValue, t.Name, err)
	}
	return partition, clustering, nil
}

// DeleteRow adds to b the deletion of the row whose key is in key.
func (t *Table) DeleteRow(b *storage.Batch, key Values, timestampMicros int64) error {
	partition, clustering, err := t.keyOf(key)
	if err != nil {
		return err
	}
	b.DeleteRow(t.Name, partition, clustering, timestampMicros)
	return nil
}

// DeletePartition adds to b the deletion of a whole partition.
func (t *Table) DeletePartition(b *storage.Batch, timestampMicros int64, partitionKey ...any) error {
	partition, err := t.EncodePartition(partitionKey...)
	if err != nil {
		return err
	}
	b.DeletePartition(t.Name, partition, timestampMicros)
	return nil
}

// Row is a decoded row.
type Row struct {
	// Key holds the clustering values in layout order.
	Key []any
	// Cells holds the live regular cells in column-name order.
	Cells []RowCell
}

// RowCell is one live cell of a Row.
type RowCell struct {
	Name            string
	Type            bucket.ColumnType
	Value           any
	WriteTimeMicros int64
	TTLSeconds      int32
}

// Get returns the value of column name, or nil.
func (r *Row) Get(name string) any {
	for _, c := range r.Cells {
		if c.Name == name {
			return c.Value
		}
	}
	return nil
}

// DecodeRow decodes a row read from t. The row marker is not a cell.
func (t *Table) DecodeRow(row *storage.Row) (Row, error) {
	key, err := t.Clustering.Decode(row.Clustering)
	if err != nil {
		return Row{}, fmt.Errorf("decode row of %s: %w", t.Name, err)
	}
	out := Row{Key: key}
	for _, c := range row.Cells {
		if len(c.Column) == 0 {
			continue
		}
		v, typ, err := DecodeTypedValue(c.Value)
		if err != nil {
			return Row{}, fmt.Errorf("decode row of %s column %s: %w", t.Name, c.Column, err)
		}
		if b, ok := v.([]byte); ok {
			v = append([]byte(nil), b...)
		}
		out.Cells = append(out.Cells, RowCell{Name: string(c.Column), Type: typ, Value: v,
			WriteTimeMicros: c.WriteTimeMicros, TTLSeconds: c.TTLSeconds})
	}
	return out, nil
}

// tableJSON is the persisted form of a Table (types and orders by name).
type tableJSON struct {
	Name              string                     `json:"name"`
	PartitionKey      []columnJSON               `json:"partition_key"`
	Clustering        []columnJSON               `json:"clustering,omitempty"`
	Columns           []columnJSON               `json:"columns,omitempty"`
	SchemaOptional    bool                       `json:"schema_optional,omitempty"`
	DefaultTTLSeconds int32                      `json:"default_ttl_seconds,omitempty"`
	GCGraceSeconds    *int64                     `json:"gc_grace_seconds,omitempty"`
	Compaction        storage.CompactionStrategy `json:"compaction,omitempty"`
	Compression       string                     `json:"compression,omitempty"`
}

type columnJSON struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Order string `json:"order,omitempty"`
}

// MarshalJSON encodes t with type and order names.
func (t Table) MarshalJSON() ([]byte, error) {
	j := tableJSON{Name: t.Name, SchemaOptional: t.SchemaOptional, DefaultTTLSeconds: t.DefaultTTLSeconds,
		GCGraceSeconds: t.GCGraceSeconds, Compaction: t.Compaction, Compression: t.Compression}
	for _, c := range t.PartitionKey {
		j.PartitionKey = append(j.PartitionKey, columnJSON{Name: c.Name, Type: c.Type.String()})
	}
	for _, c := range t.Clustering {
		j.Clustering = append(j.Clustering, columnJSON{Name: c.Name, Type: c.Type.String(), Order: c.Order.String()})
	}
	for _, c := range t.Columns {
		j.Columns = append(j.Columns, columnJSON{Name: c.Name, Type: c.Type.String()})
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (t *Table) UnmarshalJSON(data []byte) error {
	var j tableJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	out := Table{Name: j.Name, SchemaOptional: j.SchemaOptional, DefaultTTLSeconds: j.DefaultTTLSeconds,
		GCGraceSeconds: j.GCGraceSeconds, Compaction: j.Compaction, Compression: j.Compression}
	col := func(c columnJSON) (Column, error) {
		typ, err := bucket.ParseColumnType(c.Type)
		if err != nil {
			return Column{}, fmt.Errorf("column %s: %w", c.Name, err)
		}
		return Column{Name: c.Name, Type: typ}, nil
	}
	for _, c := range j.PartitionKey {
		cc, err := col(c)
		if err != nil {
			return err
		}
		out.PartitionKey = append(out.PartitionKey, cc)
	}
	for _, c := range j.Clustering {
		cc, err := col(c)
		if err != nil {
			return err
		}
		order := bucket.Asc
		switch strings.ToUpper(c.Order) {
		case "", "ASC":
		case "DESC":
			order = bucket.Desc
		default:
			return fmt.Errorf("column %s: order %q is not ASC or DESC", c.Name, c.Order)
		}
		out.Clustering = append(out.Clustering, bucket.ClusteringColumn{Name: cc.Name, Type: cc.Type, Order: order})
	}
	for _, c := range j.Columns {
		cc, err := col(c)
		if err != nil {
			return err
		}
		out.Columns = append(out.Columns, cc)
	}
	*t = out
	return nil
}
