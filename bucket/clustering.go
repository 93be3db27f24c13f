package bucket

// Clustering key format. A key is the concatenation of its components'
// encodings in layout order, with nothing between them. The encoding is part of
// the storage format (SSTables hold these bytes and sort by bytes.Compare):
// changing any byte of it is a format change.
//
// Every component's ASC encoding is prefix-free (no value's encoding is a
// proper prefix of another value's) and order-preserving (bytes.Compare of two
// encodings is the typed comparison of the values, equal exactly when the
// values are equal). A DESC component is the bitwise complement of its ASC
// encoding: complementing keeps it prefix-free and reverses bytes.Compare.
// Because every component is prefix-free, two keys first differ inside the
// first component whose values differ; so bytes.Compare of whole keys is the
// component-wise comparison, and the keys that start with
// EncodePrefix(v1..vk) are exactly the keys whose first k values are v1..vk.
//
//	type       bytes  ASC encoding
//	timeuuid   16     EncodeTimeUUID (Cassandra TimeUUIDType order)
//	uuid       16     big-endian uint64 version<<60 | timestamp (version 1) or
//	                  version<<60 | the other 60 bits of bytes 0..7 in order
//	                  (other versions); then bytes 8..15 unchanged (Cassandra
//	                  UUIDType order and byte-comparable form)
//	text       var    the bytes, each 0x00 written as 0x00 0xff, then 0x00 0x01
//	ascii      var    as text
//	blob       var    as text
//	int        4      big-endian two's complement with the sign bit flipped
//	bigint     8      as int
//	timestamp  8      milliseconds since the Unix epoch, as bigint
//	boolean    1      0x00 false, 0x01 true
//	float      4      IEEE 754 bits (NaN made canonical 0x7fc00000); if the
//	                  sign bit is set all bits are flipped, else only the sign
//	double     8      as float on 64 bits (canonical NaN 0x7ff8000000000000)
//	varint     var    ordered integer, see varint.go
//	decimal    var    sign, ordered exponent, digit pairs, see decimal.go
//
// The text escape keeps a 0x00 inside a value (0x00 0xff) above the terminator
// (0x00 0x01), so a string sorts after its own prefixes; the terminator's
// second byte means the next component may start with any byte. Under DESC the
// terminator becomes 0xff 0xfe and the escape 0xff 0x00.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

const (
	escapeByte      = 0x00 // starts an escape or a terminator
	escapedZero     = 0xff // 0x00 0xff: a 0x00 byte inside the value
	terminatorByte  = 0x01 // 0x00 0x01: end of the value
	signBit32       = 1 << 31
	signBit64       = 1 << 63
	canonicalNaN32  = 0x7fc00000
	canonicalNaN64  = 0x7ff8000000000000
	maxDescribedLen = 48 // longest value echoed into an error message
)

// ClusteringColumn is one column of a clustering key.
type ClusteringColumn struct {
	Name  string
	Type  ColumnType
	Order Order
}

// ClusteringLayout is the ordered list of a table's clustering columns. Its
// encodings sort, under bytes.Compare, in CQL clustering order.
type ClusteringLayout []ClusteringColumn

// Encode appends the encoding of a full clustering key to dst: exactly one
// value per column, of the Go type its ColumnType documents (uuid.UUID, string,
// int32, int64, *big.Int, time.Time, bool, float32, float64, Decimal, []byte).
// On error it returns dst unchanged and an error wrapping
// ErrInvalidClusteringValue (or ErrInvalidLayout) that names the column, the
// expected type and the bad value.
func (l ClusteringLayout) Encode(dst []byte, values ...any) ([]byte, error) {
	if len(values) != len(l) {
		return dst, fmt.Errorf("cannot encode clustering key: %w: layout has %d columns, got %d values", ErrInvalidClusteringValue, len(l), len(values))
	}
	return l.encode(dst, values)
}

// EncodePrefix appends the encoding of the first len(values) columns to dst
// (none to all of them). Every full key whose first columns hold these values
// starts with the result, and no other key does; PrefixEnd turns it into an
// exclusive upper bound.
func (l ClusteringLayout) EncodePrefix(dst []byte, values ...any) ([]byte, error) {
	if len(values) > len(l) {
		return dst, fmt.Errorf("cannot encode clustering prefix: %w: layout has %d columns, got %d values", ErrInvalidClusteringValue, len(l), len(values))
	}
	return l.encode(dst, values)
}

func (l ClusteringLayout) encode(dst []byte, values []any) ([]byte, error) {
	orig := len(dst)
	for i, v := range values {
		c := l[i]
		if err := c.check(); err != nil {
			return dst[:orig], fmt.Errorf("cannot encode clustering column %d: %w", i, err)
		}
		start := len(dst)
		var err error
		dst, err = appendValue(dst, c.Type, v)
		if err != nil {
			return dst[:orig], fmt.Errorf("cannot encode clustering column %d %s (%s %s): %w", i, quote(c.Name), c.Type, c.Order, err)
		}
		if c.Order == Desc {
			complement(dst[start:])
		}
	}
	return dst, nil
}

// Decode decodes a full clustering key into one value per column, of the Go
// types Encode takes (text and ascii as string, blob as a new []byte, timestamp
// as a UTC time.Time, decimal in its form without trailing zeros). Any input
// yields either values or an error wrapping ErrCorruptKey; it accepts exactly
// the bytes Encode produces, so re-encoding decoded values gives back src.
func (l ClusteringLayout) Decode(src []byte) ([]any, error) {
	r := keyReader{src: src}
	values := make([]any, len(l))
	for i, c := range l {
		if err := c.check(); err != nil {
			return nil, fmt.Errorf("cannot decode clustering column %d: %w", i, err)
		}
		start := r.off
		var mask byte
		if c.Order == Desc {
			mask = 0xff
		}
		v, err := r.readValue(c.Type, mask)
		if err != nil {
			return nil, fmt.Errorf("cannot decode clustering column %d %s (%s %s) at offset %d: %w", i, quote(c.Name), c.Type, c.Order, start, err)
		}
		values[i] = v
	}
	if r.off != len(src) {
		return nil, fmt.Errorf("cannot decode clustering key: %w: %d bytes after the last column at offset %d", ErrCorruptKey, len(src)-r.off, r.off)
	}
	return values, nil
}

// AppendTimeUUIDKey appends the key of a layout of one timeuuid column,
// exactly what Encode(dst, u) appends, without boxing u: the fast path of
// tables keyed by an event id. It fails like Encode, and with
// ErrInvalidLayout when l is not one timeuuid column.
func (l ClusteringLayout) AppendTimeUUIDKey(dst []byte, u uuid.UUID) ([]byte, error) {
	if err := l.checkTimeUUIDKey(); err != nil {
		return dst, err
	}
	if u.Version() != timeUUIDVersion {
		return dst, fmt.Errorf("cannot encode clustering column 0 %s (%s %s): %w: %s is a version %d UUID, want version 1",
			quote(l[0].Name), l[0].Type, l[0].Order, ErrInvalidClusteringValue, u, u.Version())
	}
	start := len(dst)
	dst = EncodeTimeUUID(dst, u)
	if l[0].Order == Desc {
		complement(dst[start:])
	}
	return dst, nil
}

// DecodeTimeUUIDKey decodes a key of a layout of one timeuuid column,
// accepting and rejecting exactly what Decode does, without allocating.
func (l ClusteringLayout) DecodeTimeUUIDKey(src []byte) (uuid.UUID, error) {
	if err := l.checkTimeUUIDKey(); err != nil {
		return uuid.UUID{}, err
	}
	if len(src) != encodedTimeUUIDLen {
		return uuid.UUID{}, fmt.Errorf("cannot decode clustering column 0 %s (%s %s): %w: key has %d bytes, want %d",
			quote(l[0].Name), l[0].Type, l[0].Order, ErrCorruptKey, len(src), encodedTimeUUIDLen)
	}
	var b [encodedTimeUUIDLen]byte
	copy(b[:], src)
	if l[0].Order == Desc {
		complement(b[:])
	}
	u, _, _ := DecodeTimeUUID(b[:]) // cannot fail on 16 bytes
	if u.Version() != timeUUIDVersion {
		return uuid.UUID{}, fmt.Errorf("cannot decode clustering column 0 %s (%s %s): %w: timeuuid %s has version %d, want 1",
			quote(l[0].Name), l[0].Type, l[0].Order, ErrCorruptKey, u, u.Version())
	}
	return u, nil
}

// AppendTextKey decodes a key of a layout of one text column and appends
// the text's bytes to dst, accepting and rejecting exactly what Decode
// does, without boxing the value or allocating a string: the fast path of
// tables keyed by a name, whose callers decode one key per row (the
// fan-out streams a follower list this way). On error dst is returned
// unchanged. It fails with ErrInvalidLayout when l is not one text column.
func (l ClusteringLayout) AppendTextKey(dst, src []byte) ([]byte, error) {
	if len(l) != 1 || l[0].Type != TypeText {
		return dst, fmt.Errorf("%w: a text key needs a layout of one text column, have %v", ErrInvalidLayout, l)
	}
	if err := l[0].check(); err != nil {
		return dst, err
	}
	var mask byte
	if l[0].Order == Desc {
		mask = 0xff
	}
	r := keyReader{src: src}
	start := len(dst)
	out, err := r.appendUnescaped(dst, mask)
	if err == nil && !utf8.Valid(out[start:]) {
		err = fmt.Errorf("%w: text value is not valid UTF-8", ErrCorruptKey)
	}
	if err != nil {
		return dst[:start], fmt.Errorf("cannot decode clustering column 0 %s (%s %s) at offset 0: %w", quote(l[0].Name), l[0].Type, l[0].Order, err)
	}
	if r.off != len(src) {
		return dst[:start], fmt.Errorf("cannot decode clustering key: %w: %d bytes after the last column at offset %d", ErrCorruptKey, len(src)-r.off, r.off)
	}
	return out, nil
}

func (l ClusteringLayout) checkTimeUUIDKey() error {
	if len(l) != 1 || l[0].Type != TypeTimeUUID {
		return fmt.Errorf("%w: a timeuuid key needs a layout of one timeuuid column, have %v", ErrInvalidLayout, l)
	}
	return l[0].check()
}

// PrefixEnd returns the smallest byte string greater than every string that
// starts with prefix, or nil when there is none (prefix empty or all 0xff), in
// which case the range is unbounded above. A slice "clustering <= P" for an
// encoded prefix P is "clustering < PrefixEnd(P)". The result never aliases
// prefix.
func PrefixEnd(prefix []byte) []byte {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] != 0xff {
			end := make([]byte, i+1)
			copy(end, prefix)
			end[i]++
			return end
		}
	}
	return nil
}

func (c ClusteringColumn) check() error {
	if !c.Type.valid() {
		return fmt.Errorf("%w: column %s has unknown type %s", ErrInvalidLayout, quote(c.Name), c.Type)
	}
	if c.Order != Asc && c.Order != Desc {
		return fmt.Errorf("%w: column %s has unknown order %s", ErrInvalidLayout, quote(c.Name), c.Order)
	}
	return nil
}

// appendValue appends the ASC encoding of v as a value of type t.
func appendValue(dst []byte, t ColumnType, v any) ([]byte, error) {
	switch t {
	case TypeTimeUUID:
		u, ok := v.(uuid.UUID)
		if !ok {
			return dst, wrongGoType("uuid.UUID (version 1)", v)
		}
		if u.Version() != timeUUIDVersion {
			return dst, fmt.Errorf("%w: %s is a version %d UUID, want version 1", ErrInvalidClusteringValue, u, u.Version())
		}
		return EncodeTimeUUID(dst, u), nil
	case TypeUUID:
		u, ok := v.(uuid.UUID)
		if !ok {
			return dst, wrongGoType("uuid.UUID", v)
		}
		return appendUUID(dst, u), nil
	case TypeText:
		s, ok := v.(string)
		if !ok {
			return dst, wrongGoType("string", v)
		}
		if !utf8.ValidString(s) {
			return dst, fmt.Errorf("%w: text value %s is not valid UTF-8", ErrInvalidClusteringValue, quote(s))
		}
		return appendEscaped(dst, s), nil
	case TypeASCII:
		s, ok := v.(string)
		if !ok {
			return dst, wrongGoType("string", v)
		}
		if i := nonASCII(s); i >= 0 {
			return dst, fmt.Errorf("%w: ascii value %s has byte 0x%02x at offset %d", ErrInvalidClusteringValue, quote(s), s[i], i)
		}
		return appendEscaped(dst, s), nil
	case TypeBlob:
		b, ok := v.([]byte)
		if !ok {
			return dst, wrongGoType("[]byte", v)
		}
		return appendEscaped(dst, b), nil
	case TypeInt:
		n, ok := v.(int32)
		if !ok {
			return dst, wrongGoType("int32", v)
		}
		return binary.BigEndian.AppendUint32(dst, uint32(n)^signBit32), nil
	case TypeBigint:
		n, ok := v.(int64)
		if !ok {
			return dst, wrongGoType("int64", v)
		}
		return binary.BigEndian.AppendUint64(dst, uint64(n)^signBit64), nil
	case TypeTimestamp:
		ts, ok := v.(time.Time)
		if !ok {
			return dst, wrongGoType("time.Time", v)
		}
		ms, ok := unixMilli(ts)
		if !ok {
			return dst, fmt.Errorf("%w: timestamp %s is outside the int64 millisecond range", ErrInvalidClusteringValue, ts.Format(time.RFC3339Nano))
		}
		return binary.BigEndian.AppendUint64(dst, uint64(ms)^signBit64), nil
	case TypeBoolean:
		b, ok := v.(bool)
		if !ok {
			return dst, wrongGoType("bool", v)
		}
		if b {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case TypeFloat:
		f, ok := v.(float32)
		if !ok {
			return dst, wrongGoType("float32", v)
		}
		bits := math.Float32bits(f)
		if f != f {
			bits = canonicalNaN32
		}
		if bits&signBit32 != 0 {
			bits = ^bits
		} else {
			bits |= signBit32
		}
		return binary.BigEndian.AppendUint32(dst, bits), nil
	case TypeDouble:
		f, ok := v.(float64)
		if !ok {
			return dst, wrongGoType("float64", v)
		}
		bits := math.Float64bits(f)
		if f != f {
			bits = canonicalNaN64
		}
		if bits&signBit64 != 0 {
			bits = ^bits
		} else {
			bits |= signBit64
		}
		return binary.BigEndian.AppendUint64(dst, bits), nil
	case TypeVarint:
		x, ok := v.(*big.Int)
		if !ok || x == nil {
			return dst, wrongGoType("non-nil *big.Int", v)
		}
		return appendOrderedBigInt(dst, x)
	case TypeDecimal:
		d, ok := v.(Decimal)
		if !ok {
			return dst, wrongGoType("bucket.Decimal", v)
		}
		return appendDecimal(dst, d)
	}
	return dst, fmt.Errorf("BUG: appendValue called with unchecked column type %s", t)
}

// keyReader walks an encoded key. Every read takes the mask its bytes were
// complemented with: 0x00 for ASC, 0xff for DESC, flipped again inside the
// complemented body of a negative number.
type keyReader struct {
	src []byte
	off int
}

func (r *keyReader) readValue(t ColumnType, mask byte) (any, error) {
	switch t {
	case TypeTimeUUID:
		var b [encodedTimeUUIDLen]byte
		if err := r.readFixed(b[:], mask); err != nil {
			return nil, err
		}
		u, _, _ := DecodeTimeUUID(b[:]) // cannot fail on 16 bytes
		if u.Version() != timeUUIDVersion {
			return nil, fmt.Errorf("%w: timeuuid %s has version %d, want 1", ErrCorruptKey, u, u.Version())
		}
		return u, nil
	case TypeUUID:
		var b [16]byte
		if err := r.readFixed(b[:], mask); err != nil {
			return nil, err
		}
		return decodeUUID(b), nil
	case TypeText:
		b, err := r.readEscaped(mask)
		if err != nil {
			return nil, err
		}
		if !utf8.Valid(b) {
			return nil, fmt.Errorf("%w: text value is not valid UTF-8", ErrCorruptKey)
		}
		return string(b), nil
	case TypeASCII:
		b, err := r.readEscaped(mask)
		if err != nil {
			return nil, err
		}
		s := string(b)
		if i := nonASCII(s); i >= 0 {
			return nil, fmt.Errorf("%w: ascii value has byte 0x%02x at offset %d", ErrCorruptKey, s[i], i)
		}
		return s, nil
	case TypeBlob:
		return r.readEscaped(mask)
	case TypeInt:
		var b [4]byte
		if err := r.readFixed(b[:], mask); err != nil {
			return nil, err
		}
		return int32(binary.BigEndian.Uint32(b[:]) ^ signBit32), nil
	case TypeBigint:
		var b [8]byte
		if err := r.readFixed(b[:], mask); err != nil {
			return nil, err
		}
		return int64(binary.BigEndian.Uint64(b[:]) ^ signBit64), nil
	case TypeTimestamp:
		var b [8]byte
		if err := r.readFixed(b[:], mask); err != nil {
			return nil, err
		}
		return time.UnixMilli(int64(binary.BigEndian.Uint64(b[:]) ^ signBit64)).UTC(), nil
	case TypeBoolean:
		b, err := r.readByte(mask)
		if err != nil {
			return nil, err
		}
		if b > 1 {
			return nil, fmt.Errorf("%w: boolean byte 0x%02x, want 0x00 or 0x01", ErrCorruptKey, b)
		}
		return b == 1, nil
	case TypeFloat:
		var b [4]byte
		if err := r.readFixed(b[:], mask); err != nil {
			return nil, err
		}
		bits := binary.BigEndian.Uint32(b[:])
		if bits&signBit32 != 0 {
			bits &^= signBit32
		} else {
			bits = ^bits
		}
		f := math.Float32frombits(bits)
		if f != f && bits != canonicalNaN32 {
			return nil, fmt.Errorf("%w: float NaN with bits 0x%08x, want canonical 0x%08x", ErrCorruptKey, bits, canonicalNaN32)
		}
		return f, nil
	case TypeDouble:
		var b [8]byte
		if err := r.readFixed(b[:], mask); err != nil {
			return nil, err
		}
		bits := binary.BigEndian.Uint64(b[:])
		if bits&signBit64 != 0 {
			bits &^= signBit64
		} else {
			bits = ^bits
		}
		f := math.Float64frombits(bits)
		if f != f && bits != canonicalNaN64 {
			return nil, fmt.Errorf("%w: double NaN with bits 0x%016x, want canonical 0x%016x", ErrCorruptKey, bits, uint64(canonicalNaN64))
		}
		return f, nil
	case TypeVarint:
		return r.readOrderedBigInt(mask)
	case TypeDecimal:
		return r.readDecimal(mask)
	}
	return nil, fmt.Errorf("BUG: readValue called with unchecked column type %s", t)
}

func (r *keyReader) readByte(mask byte) (byte, error) {
	if r.off >= len(r.src) {
		return 0, r.truncated(1)
	}
	b := r.src[r.off] ^ mask
	r.off++
	return b, nil
}

// readFixed fills dst with the next len(dst) bytes, unmasked.
func (r *keyReader) readFixed(dst []byte, mask byte) error {
	if len(r.src)-r.off < len(dst) {
		return r.truncated(len(dst))
	}
	for i := range dst {
		dst[i] = r.src[r.off+i] ^ mask
	}
	r.off += len(dst)
	return nil
}

func (r *keyReader) truncated(need int) error {
	return fmt.Errorf("%w: truncated at offset %d: need %d bytes, have %d", ErrCorruptKey, r.off, need, len(r.src)-r.off)
}

// readEscaped reads a terminated, escaped byte string (text, ascii, blob). The
// result is a new non-nil slice.
func (r *keyReader) readEscaped(mask byte) ([]byte, error) {
	return r.appendUnescaped([]byte{}, mask)
}

// appendUnescaped reads one escaped value and appends its bytes to out.
func (r *keyReader) appendUnescaped(out []byte, mask byte) ([]byte, error) {
	for {
		i := bytes.IndexByte(r.src[r.off:], escapeByte^mask)
		if i < 0 || r.off+i+1 >= len(r.src) {
			return nil, fmt.Errorf("%w: value starting at offset %d has no 0x00 0x01 terminator", ErrCorruptKey, r.off)
		}
		for _, b := range r.src[r.off : r.off+i] {
			out = append(out, b^mask)
		}
		r.off += i
		switch second := r.src[r.off+1] ^ mask; second {
		case escapedZero:
			out = append(out, 0)
			r.off += 2
		case terminatorByte:
			r.off += 2
			return out, nil
		default:
			return nil, fmt.Errorf("%w: byte 0x%02x after 0x00 at offset %d, want 0xff (escaped 0x00) or 0x01 (end of value)", ErrCorruptKey, second, r.off)
		}
	}
}

func appendEscaped[T string | []byte](dst []byte, s T) []byte {
	for {
		i := indexZero(s)
		if i < 0 {
			dst = append(dst, s...)
			return append(dst, escapeByte, terminatorByte)
		}
		dst = append(dst, s[:i]...)
		dst = append(dst, escapeByte, escapedZero)
		s = s[i+1:]
	}
}

func indexZero[T string | []byte](s T) int {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return i
		}
	}
	return -1
}

func nonASCII(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return i
		}
	}
	return -1
}

// appendUUID appends Cassandra's byte-comparable form of a UUIDType value.
func appendUUID(dst []byte, u uuid.UUID) []byte {
	msb := binary.BigEndian.Uint64(u[0:])
	version := msb >> 12 & 0xf
	var hi uint64
	if version == timeUUIDVersion {
		hi = msbKey(u)
	} else {
		// Drop the version nibble out of the middle and put it on top; the
		// other 60 bits keep their relative order, so they still compare as
		// the unsigned msb Cassandra compares.
		hi = version<<60 | msb>>4&0x0ffffffffffff000 | msb&0xfff
	}
	dst = binary.BigEndian.AppendUint64(dst, hi)
	return append(dst, u[8:]...)
}

func decodeUUID(b [16]byte) uuid.UUID {
	hi := binary.BigEndian.Uint64(b[:])
	version := hi >> 60
	var u uuid.UUID
	if version == timeUUIDVersion {
		u, _, _ = DecodeTimeUUID(b[:]) // undoes msbKey; fix the unflipped lsb below
	} else {
		binary.BigEndian.PutUint64(u[0:], hi<<4&0xffffffffffff0000|version<<12|hi&0xfff)
	}
	copy(u[8:], b[8:])
	return u
}

// unixMilli is t.UnixMilli, rounded toward the past, reporting false instead
// of overflowing when t is outside the int64 millisecond range.
func unixMilli(t time.Time) (int64, bool) {
	const (
		maxSec = math.MaxInt64 / 1000   // its millisecond part may reach 807
		minSec = math.MinInt64/1000 - 1 // its millisecond part must reach 192
	)
	sec, ms := t.Unix(), int64(t.Nanosecond()/1e6)
	switch {
	case sec > maxSec || sec < minSec:
		return 0, false
	case sec == maxSec && ms > math.MaxInt64%1000:
		return 0, false
	case sec == minSec:
		// sec*1000 alone would overflow; borrow one second from ms.
		if ms < 1000+math.MinInt64%1000 {
			return 0, false
		}
		return (sec+1)*1000 + ms - 1000, true
	}
	return sec*1000 + ms, true
}

func complement(b []byte) {
	for i := range b {
		b[i] = ^b[i]
	}
}

func wrongGoType(want string, v any) error {
	return fmt.Errorf("%w: want %s, got %s", ErrInvalidClusteringValue, want, describeValue(v))
}

// describeValue shows a bad value in an error message, shortened.
func describeValue(v any) string {
	if v == nil {
		return "nil"
	}
	var s string
	switch x := v.(type) {
	case string:
		s = quote(x)
	case []byte:
		s = fmt.Sprintf("%x", x)
	default:
		s = fmt.Sprintf("%v", x)
	}
	if len(s) > maxDescribedLen {
		s = s[:maxDescribedLen] + "..."
	}
	return fmt.Sprintf("%T %s", v, s)
}
