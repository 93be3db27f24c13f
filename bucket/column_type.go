package bucket

import (
	"fmt"
	"strings"
)

// ColumnType is the CQL type of a clustering column. Its numeric values may be
// persisted in table schemas: they are never renumbered or reused.
type ColumnType uint8

const (
	// TypeTimeUUID is CQL timeuuid: a version 1 uuid.UUID, ordered as
	// CompareTimeUUID (Cassandra's TimeUUIDType).
	TypeTimeUUID ColumnType = 1
	// TypeUUID is CQL uuid: any uuid.UUID, ordered as Cassandra's UUIDType:
	// version nibble first; then, for version 1, the timestamp; for other
	// versions the remaining 60 bits of bytes 0..7 as an unsigned number;
	// then bytes 8..15 as UNSIGNED bytes (TimeUUIDType compares them signed;
	// Cassandra keeps this difference, CASSANDRA-8730, and so do we).
	TypeUUID ColumnType = 2
	// TypeText is CQL text (alias varchar): a valid UTF-8 string, ordered by
	// unsigned bytes.
	TypeText ColumnType = 3
	// TypeASCII is CQL ascii: a string of bytes below 0x80, ordered by bytes.
	TypeASCII ColumnType = 4
	// TypeInt is CQL int: an int32.
	TypeInt ColumnType = 5
	// TypeBigint is CQL bigint: an int64.
	TypeBigint ColumnType = 6
	// TypeVarint is CQL varint: a non-nil *big.Int, ordered numerically.
	TypeVarint ColumnType = 7
	// TypeTimestamp is CQL timestamp: a time.Time stored as signed
	// milliseconds since the Unix epoch; sub-millisecond parts are truncated
	// toward the past and decoded values are UTC.
	TypeTimestamp ColumnType = 8
	// TypeBoolean is CQL boolean: a bool, false before true.
	TypeBoolean ColumnType = 9
	// TypeFloat is CQL float: a float32 in Java's Float.compare total order,
	// which Cassandra's FloatType uses: -Inf < negatives < -0 < +0 <
	// positives < +Inf < NaN. -0 and +0 are distinct keys; every NaN is one
	// key and decodes as the canonical quiet NaN (sign and payload dropped).
	TypeFloat ColumnType = 10
	// TypeDouble is CQL double: a float64, ordered like TypeFloat.
	TypeDouble ColumnType = 11
	// TypeDecimal is CQL decimal: a Decimal, ordered by numeric value as
	// Cassandra's DecimalType (BigDecimal.compareTo), so 1.0 and 1.00 are the
	// same key and decode as the form without trailing zeros (1).
	TypeDecimal ColumnType = 12
	// TypeBlob is CQL blob: a []byte, ordered by unsigned bytes.
	TypeBlob ColumnType = 13
)

var columnTypeNames = [...]string{
	TypeTimeUUID:  "timeuuid",
	TypeUUID:      "uuid",
	TypeText:      "text",
	TypeASCII:     "ascii",
	TypeInt:       "int",
	TypeBigint:    "bigint",
	TypeVarint:    "varint",
	TypeTimestamp: "timestamp",
	TypeBoolean:   "boolean",
	TypeFloat:     "float",
	TypeDouble:    "double",
	TypeDecimal:   "decimal",
	TypeBlob:      "blob",
}

// String returns the CQL name of t.
func (t ColumnType) String() string {
	if t.valid() {
		return columnTypeNames[t]
	}
	return fmt.Sprintf("ColumnType(%d)", uint8(t))
}

// Valid reports whether t is one of the column types above.
func (t ColumnType) Valid() bool { return t.valid() }

func (t ColumnType) valid() bool {
	return t >= TypeTimeUUID && int(t) < len(columnTypeNames)
}

// ParseColumnType returns the column type with CQL name s, case-insensitively
// as CQL does; "varchar" is text, as in CQL.
func ParseColumnType(s string) (ColumnType, error) {
	name := strings.ToLower(s)
	if name == "varchar" {
		return TypeText, nil
	}
	for t := TypeTimeUUID; t.valid(); t++ {
		if columnTypeNames[t] == name {
			return t, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown column type %s (want one of %s)", ErrInvalidLayout, quote(s), strings.Join(columnTypeNames[TypeTimeUUID:], ", "))
}

// Order is the clustering order of a column. The zero value is Asc, CQL's
// default.
type Order uint8

const (
	// Asc sorts a column's values from smallest to largest.
	Asc Order = 0
	// Desc sorts a column's values from largest to smallest.
	Desc Order = 1
)

// String returns "ASC" or "DESC".
func (o Order) String() string {
	switch o {
	case Asc:
		return "ASC"
	case Desc:
		return "DESC"
	}
	return fmt.Sprintf("Order(%d)", uint8(o))
}
