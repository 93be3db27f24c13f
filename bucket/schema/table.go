package schema

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/eventide/eventide/bucket"
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
//   - catalog.Insert also writes a row marker, the cell with the empty column name
//     and an empty value, so a row with only key columns exists (CQL's
//     primary key liveness); catalog.Update does not.
type Table struct {
	Name         string
	PartitionKey []Column
	Clustering   bucket.ClusteringLayout
	Columns      []Column
	// SchemaOptional tables accept fields without a column: strings as
	// text, []byte as blob.
	SchemaOptional bool
	// Storage options, as the engine's table definition
	// (catalog.StorageDef maps them).
	DefaultTTLSeconds int32
	GCGraceSeconds    *int64
	Compaction        CompactionStrategy
	Compression       string
}

// CompactionStrategy names a storage compaction strategy; its values are
// the storage engine's (storage.CompactionStrategy), which the catalog
// package checks. Empty means the engine's default.
type CompactionStrategy string

// Compaction strategies.
const (
	SizeTiered CompactionStrategy = "size_tiered"
	TimeWindow CompactionStrategy = "time_window"
)

var columnNamePattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,63}$`)

// Validate checks t's definition.
func (t *Table) Validate() error {
	if !columnNamePattern.MatchString(t.Name) || strings.HasPrefix(t.Name, "_") {
		return fmt.Errorf("%w: table name %q: use 1 to 64 of a-z, 0-9 and _, not starting with _ or a digit", ErrInvalidSchema, t.Name)
	}
	for _, name := range slices.Concat(BuiltinTables, FanoutTables) {
		if name == t.Name {
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

// EncodedCell is one regular cell of a row write: the column name and the
// stored value (value.go).
type EncodedCell struct {
	Column string
	Value  []byte
}

// EncodeRow validates row and returns its partition and clustering keys
// and the cells of its present regular columns: every partition key and
// clustering column must be present; regular columns are optional and a
// nil value is unset (no cell). Nothing is returned unless everything is
// valid, so a caller that adds the result to a batch adds all or nothing.
// The catalog package's Insert and Update add it to a storage batch.
func (t *Table) EncodeRow(row Values) (partition, clustering []byte, cells []EncodedCell, err error) {
	partition, clustering, err = t.EncodeKey(row)
	if err != nil {
		return nil, nil, nil, err
	}
	cells = make([]EncodedCell, 0, len(row))
	for name, v := range row {
		if v == nil || t.isKeyColumn(name) {
			continue
		}
		c, ok := t.Column(name)
		if !ok {
			if !t.SchemaOptional {
				return nil, nil, nil, fmt.Errorf("%w: table %s has no column %q (columns: %s)", ErrUnknownColumn, t.Name, name, t.columnNames())
			}
			switch v.(type) {
			case string:
				c = Column{Name: name, Type: bucket.TypeText}
			case []byte:
				c = Column{Name: name, Type: bucket.TypeBlob}
			default:
				return nil, nil, nil, fmt.Errorf("%w: table %s: field %q has no column and is a %T; schema-optional fields must be text (string) or blob ([]byte)", ErrInvalidValue, t.Name, name, v)
			}
		}
		enc, err := AppendValue(nil, c.Type, v)
		if err != nil {
			return nil, nil, nil, t.valueError(c, v, err)
		}
		cells = append(cells, EncodedCell{name, enc})
	}
	return partition, clustering, cells, nil
}

func (t *Table) columnNames() string {
	names := make([]string, 0, len(t.Columns))
	for _, c := range t.Columns {
		names = append(names, c.Name)
	}
	return strings.Join(names, ", ")
}

// EncodeKey encodes the partition and clustering key of row, which must
// hold every key column; other columns are ignored.
func (t *Table) EncodeKey(row Values) (partition, clustering []byte, err error) {
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

// DecodeCell decodes the stored value of regular column name of t (the
// row marker, the empty name, is not a column: callers skip it). A blob is
// copied, so the result does not alias stored.
func (t *Table) DecodeCell(name string, stored []byte) (any, bucket.ColumnType, error) {
	v, typ, err := DecodeTypedValue(stored)
	if err != nil {
		return nil, 0, fmt.Errorf("decode row of %s column %s: %w", t.Name, name, err)
	}
	if b, ok := v.([]byte); ok {
		v = append([]byte(nil), b...)
	}
	return v, typ, nil
}

// tableJSON is the persisted form of a Table (types and orders by name).
type tableJSON struct {
	Name              string             `json:"name"`
	PartitionKey      []columnJSON       `json:"partition_key"`
	Clustering        []columnJSON       `json:"clustering,omitempty"`
	Columns           []columnJSON       `json:"columns,omitempty"`
	SchemaOptional    bool               `json:"schema_optional,omitempty"`
	DefaultTTLSeconds int32              `json:"default_ttl_seconds,omitempty"`
	GCGraceSeconds    *int64             `json:"gc_grace_seconds,omitempty"`
	Compaction        CompactionStrategy `json:"compaction,omitempty"`
	Compression       string             `json:"compression,omitempty"`
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
