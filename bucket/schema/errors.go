package schema

import "errors"

// Sentinel errors; check them with errors.Is. Messages name the table, the
// column, the expected type and the bad value.
var (
	// ErrUnknownTable: no table has that name.
	ErrUnknownTable = errors.New("unknown table")
	// ErrUnknownColumn: the table has no such column and is not
	// schema-optional.
	ErrUnknownColumn = errors.New("unknown column")
	// ErrInvalidValue: a value does not fit its column's type.
	ErrInvalidValue = errors.New("invalid value")
	// ErrInvalidSchema: a table definition is not valid.
	ErrInvalidSchema = errors.New("invalid table definition")
	// ErrMissingKey: a write or read lacks a primary key column.
	ErrMissingKey = errors.New("missing primary key column")
)
