package schema

import (
	"encoding/hex"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/google/uuid"
)

// ParseLiteral parses a CQL literal as a value of type t: 'quoted' text
// (” is a quote), numbers, true/false, RFC 3339 or millisecond timestamps,
// UUIDs, 0x-prefixed blobs, and decimals such as 1.50 or 1E+2.
func ParseLiteral(t bucket.ColumnType, s string) (any, error) {
	bad := func(want string) error {
		return fmt.Errorf("%w: %.48q is not a %s literal (want %s)", ErrInvalidValue, s, t, want)
	}
	switch t {
	case bucket.TypeText, bucket.TypeASCII:
		if len(s) < 2 || s[0] != '\'' || s[len(s)-1] != '\'' {
			return nil, bad("a 'quoted' string")
		}
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'"), nil
	case bucket.TypeBlob:
		if !strings.HasPrefix(s, "0x") {
			return nil, bad("0x followed by hex digits")
		}
		b, err := hex.DecodeString(s[2:])
		if err != nil {
			return nil, bad("0x followed by hex digits")
		}
		return b, nil
	case bucket.TypeInt:
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return nil, bad("an integer in -2147483648..2147483647")
		}
		return int32(n), nil
	case bucket.TypeBigint:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, bad("a 64-bit integer")
		}
		return n, nil
	case bucket.TypeVarint:
		n, ok := new(big.Int).SetString(s, 10)
		if !ok {
			return nil, bad("an integer")
		}
		return n, nil
	case bucket.TypeFloat:
		f, err := strconv.ParseFloat(s, 32)
		if err != nil {
			return nil, bad("a number")
		}
		return float32(f), nil
	case bucket.TypeDouble:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, bad("a number")
		}
		return f, nil
	case bucket.TypeBoolean:
		switch strings.ToLower(s) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, bad("true or false")
	case bucket.TypeTimestamp:
		unq := strings.Trim(s, "'")
		if ts, err := time.Parse(time.RFC3339Nano, unq); err == nil {
			return ts.UTC(), nil
		}
		if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.UnixMilli(ms).UTC(), nil
		}
		return nil, bad("an RFC 3339 time or milliseconds since the epoch")
	case bucket.TypeUUID, bucket.TypeTimeUUID:
		u, err := uuid.Parse(s)
		if err != nil {
			return nil, bad("a UUID such as c232ab00-9414-11ec-b3c8-9f6bdeced846")
		}
		if t == bucket.TypeTimeUUID && u.Version() != 1 {
			return nil, fmt.Errorf("%w: %s is a version %d UUID; a timeuuid must be version 1", ErrInvalidValue, s, u.Version())
		}
		return u, nil
	case bucket.TypeDecimal:
		return parseDecimal(s)
	}
	return nil, fmt.Errorf("%w: unknown type %s", ErrInvalidValue, t)
}

// parseDecimal parses [-]digits[.digits][E[+-]digits] exactly.
func parseDecimal(s string) (bucket.Decimal, error) {
	mant, exp := s, int64(0)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.ParseInt(s[i+1:], 10, 32)
		if err != nil {
			return bucket.Decimal{}, fmt.Errorf("%w: decimal %.48q has a bad exponent", ErrInvalidValue, s)
		}
		mant, exp = s[:i], e
	}
	scale := int64(0)
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		scale = int64(len(mant) - i - 1)
		mant = mant[:i] + mant[i+1:]
	}
	n, ok := new(big.Int).SetString(mant, 10)
	if !ok {
		return bucket.Decimal{}, fmt.Errorf("%w: %.48q is not a decimal literal (want a decimal such as 1.50)", ErrInvalidValue, s)
	}
	scale -= exp
	if scale < -1<<31 || scale > 1<<31-1 {
		return bucket.Decimal{}, fmt.Errorf("%w: decimal %.48q is out of range", ErrInvalidValue, s)
	}
	return bucket.Decimal{Unscaled: n, Scale: int32(scale)}, nil
}

// FormatValue formats a value as ParseLiteral parses it.
func FormatValue(v any) string {
	switch x := v.(type) {
	case string:
		return "'" + strings.ReplaceAll(x, "'", "''") + "'"
	case []byte:
		return "0x" + hex.EncodeToString(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case nil:
		return "null"
	}
	return fmt.Sprint(v)
}
