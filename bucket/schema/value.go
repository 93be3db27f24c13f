package schema

// Cell value format. Every regular cell a schema table stores is
//
//	value := type:u8 payload
//
// where type is the bucket.ColumnType the value was written as (its
// persisted number) and payload is:
//
//	text, ascii, blob   the bytes as they are (no escaping, no terminator)
//	every other type    the ASC clustering encoding of the one value
//	                    (bucket.ClusteringLayout with one column)
//
// The type byte makes a cell self-describing, so a schema-optional table
// can hold fields it has no column for, and a row decodes the same way
// whatever the schema says today. Counter cells are the engine's own
// 8-byte sums and carry no type byte. This format is part of Eventide's
// on-disk format: it must never change meaning.

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/eventide/eventide/bucket"
)

// ErrCorruptValue is wrapped by errors for stored cell values that do not
// decode.
var ErrCorruptValue = errors.New("corrupt cell value")

// AppendValue appends the stored form of v, a value of type t in the Go type
// bucket.ClusteringLayout.Encode documents, to dst.
func AppendValue(dst []byte, t bucket.ColumnType, v any) ([]byte, error) {
	switch t {
	case bucket.TypeText:
		s, ok := v.(string)
		if !ok {
			return dst, fmt.Errorf("%w: want a string for a text value, got %T", ErrInvalidValue, v)
		}
		if !utf8.ValidString(s) {
			return dst, fmt.Errorf("%w: text value %.48q is not valid UTF-8", ErrInvalidValue, s)
		}
		return append(append(dst, byte(t)), s...), nil
	case bucket.TypeASCII:
		s, ok := v.(string)
		if !ok {
			return dst, fmt.Errorf("%w: want a string for an ascii value, got %T", ErrInvalidValue, v)
		}
		for i := 0; i < len(s); i++ {
			if s[i] >= 0x80 {
				return dst, fmt.Errorf("%w: ascii value %.48q has byte 0x%02x at offset %d", ErrInvalidValue, s, s[i], i)
			}
		}
		return append(append(dst, byte(t)), s...), nil
	case bucket.TypeBlob:
		b, ok := v.([]byte)
		if !ok {
			return dst, fmt.Errorf("%w: want []byte for a blob value, got %T", ErrInvalidValue, v)
		}
		return append(append(dst, byte(t)), b...), nil
	}
	out, err := bucket.ClusteringLayout{{Type: t}}.Encode(append(dst, byte(t)), v)
	if err != nil {
		return dst, fmt.Errorf("%w: %w", ErrInvalidValue, err)
	}
	return out, nil
}

// DecodeValue decodes a stored value written by AppendValue. A blob is
// returned as a slice of stored: copy it to keep it.
func DecodeValue(stored []byte) (any, error) {
	v, _, err := DecodeTypedValue(stored)
	return v, err
}

// DecodeTypedValue decodes a stored value and returns its type too.
func DecodeTypedValue(stored []byte) (any, bucket.ColumnType, error) {
	if len(stored) == 0 {
		return nil, 0, fmt.Errorf("%w: empty value", ErrCorruptValue)
	}
	t, payload := bucket.ColumnType(stored[0]), stored[1:]
	switch t {
	case bucket.TypeText, bucket.TypeASCII:
		return string(payload), t, nil
	case bucket.TypeBlob:
		return payload, t, nil
	}
	if !t.Valid() {
		return nil, 0, fmt.Errorf("%w: unknown type byte %d", ErrCorruptValue, stored[0])
	}
	vals, err := bucket.ClusteringLayout{{Type: t}}.Decode(payload)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %s value: %w", ErrCorruptValue, t, err)
	}
	return vals[0], t, nil
}
