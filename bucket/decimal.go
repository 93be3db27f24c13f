package bucket

// Ordered decimal encoding. A nonzero value v is written in normalized form
// v = sign × 0.D × 10^E, where D is the decimal digit string of |unscaled| with
// trailing zeros removed (so D starts and ends with a nonzero digit) and
// E = len(D) - scale (scale also adjusted for the removed zeros):
//
//	0x80                                        zero
//	0x81, E (ordered integer, varint.go),
//	      digit pairs, 0x00                     positive
//	bitwise complement of the form of |v|       negative
//
// D is padded with one '0' to even length; each pair "ab" is the byte
// 1 + 10a + b (0x01..0x64), and 0x00 ends the digits. For positives a larger E
// is a larger value (0.D lies in [0.1, 1)), and for equal E the digit bytes
// compare as the fractions 0.D do: the terminator sorts below any pair, and a
// longer D that extends a shorter one ends in a nonzero digit, so it is larger.
// The pad is unambiguous because D never ends in '0'. The complement reverses
// the order for negatives (header 0x7e < 0x80 < 0x81), as in varint.go.
//
// The encoding is a function of the numeric value, so it equals Cassandra's
// DecimalType order (BigDecimal.compareTo), where 1.0 == 1.00; the scale of
// the written value is not kept (Cassandra's own byte-comparable decimal drops
// it too), and a decoded value comes back in the form with no trailing zeros in
// Unscaled, which may have a negative Scale: 100 decodes as 1E+2.

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

const (
	decimalZero       = 0x80
	decimalPositive   = 0x81
	decimalNegative   = ^byte(decimalPositive) // 0x7e
	decimalDigitsEnd  = 0x00
	decimalPairOffset = 1   // pair byte = 1 + 10a + b, so 0x00 stays free
	maxDecimalPair    = 100 // 1 + 99
)

// Decimal is an arbitrary-precision decimal Unscaled × 10^-Scale, the value of
// a CQL decimal (a Java BigDecimal): 1.50 is {150, 2}, 1E+2 is {1, -2}.
// Unscaled must not be nil.
type Decimal struct {
	Unscaled *big.Int
	Scale    int32
}

// String formats d as Java's BigDecimal.toString does (and so as cqlsh shows
// it): plain notation when Scale >= 0 and the exponent is not below -6,
// scientific notation such as 1E+2 otherwise.
func (d Decimal) String() string {
	if d.Unscaled == nil {
		return "<nil>"
	}
	digits := d.Unscaled.Text(10)
	sign := ""
	if digits[0] == '-' {
		sign, digits = "-", digits[1:]
	}
	scale := int64(d.Scale)
	adjusted := int64(len(digits)-1) - scale
	if scale >= 0 && adjusted >= -6 {
		switch {
		case scale == 0:
			return sign + digits
		case int64(len(digits)) > scale:
			point := int64(len(digits)) - scale
			return sign + digits[:point] + "." + digits[point:]
		default:
			return sign + "0." + strings.Repeat("0", int(scale)-len(digits)) + digits
		}
	}
	var b strings.Builder
	b.WriteString(sign)
	b.WriteByte(digits[0])
	if len(digits) > 1 {
		b.WriteByte('.')
		b.WriteString(digits[1:])
	}
	b.WriteByte('E')
	if adjusted >= 0 {
		b.WriteByte('+')
	}
	b.WriteString(strconv.FormatInt(adjusted, 10))
	return b.String()
}

func appendDecimal(dst []byte, d Decimal) ([]byte, error) {
	if d.Unscaled == nil {
		return dst, fmt.Errorf("%w: decimal with nil Unscaled", ErrInvalidClusteringValue)
	}
	sign := d.Unscaled.Sign()
	if sign == 0 {
		return append(dst, decimalZero), nil
	}
	digits := d.Unscaled.Text(10)
	if sign < 0 {
		digits = digits[1:]
	}
	trimmed := strings.TrimRight(digits, "0")
	scale := int64(d.Scale) - int64(len(digits)-len(trimmed))
	if scale < math.MinInt32 {
		// Decoding would have to return this value with a scale int32 cannot hold.
		return dst, fmt.Errorf("%w: decimal %s has scale %d once its trailing zeros are removed, below the int32 range", ErrInvalidClusteringValue, d, scale)
	}
	start := len(dst)
	dst = append(dst, decimalPositive)
	dst = appendOrderedInt64(dst, int64(len(trimmed))-scale)
	for i := 0; i < len(trimmed); i += 2 {
		pair := int(trimmed[i]-'0') * 10
		if i+1 < len(trimmed) {
			pair += int(trimmed[i+1] - '0')
		}
		dst = append(dst, byte(decimalPairOffset+pair))
	}
	dst = append(dst, decimalDigitsEnd)
	if sign < 0 {
		complement(dst[start:])
	}
	return dst, nil
}

func (r *keyReader) readDecimal(mask byte) (Decimal, error) {
	h, err := r.readByte(mask)
	if err != nil {
		return Decimal{}, err
	}
	switch h {
	case decimalZero:
		return Decimal{Unscaled: new(big.Int)}, nil
	case decimalPositive:
	case decimalNegative:
		mask = ^mask
	default:
		return Decimal{}, fmt.Errorf("%w: decimal header 0x%02x at offset %d, want 0x7e, 0x80 or 0x81", ErrCorruptKey, h, r.off-1)
	}
	exp, err := r.readOrderedInt64(mask)
	if err != nil {
		return Decimal{}, err
	}
	start := r.off
	var digits []byte
	for {
		b, err := r.readByte(mask)
		if err != nil {
			return Decimal{}, err
		}
		if b == decimalDigitsEnd {
			break
		}
		if b > maxDecimalPair {
			return Decimal{}, fmt.Errorf("%w: decimal digit pair byte 0x%02x at offset %d, want 0x01..0x64", ErrCorruptKey, b, r.off-1)
		}
		pair := b - decimalPairOffset
		digits = append(digits, '0'+pair/10, '0'+pair%10)
	}
	if len(digits) == 0 {
		return Decimal{}, fmt.Errorf("%w: decimal without digits at offset %d", ErrCorruptKey, start)
	}
	if digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1] // the pad of an odd-length digit string
	}
	if digits[0] == '0' || digits[len(digits)-1] == '0' {
		return Decimal{}, fmt.Errorf("%w: decimal digits %q at offset %d have a leading or trailing zero", ErrCorruptKey, digits, start)
	}
	n := int64(len(digits))
	if exp < n-math.MaxInt32 || exp > n-math.MinInt32 {
		return Decimal{}, fmt.Errorf("%w: decimal exponent %d at offset %d puts the scale outside int32", ErrCorruptKey, exp, start)
	}
	unscaled, ok := new(big.Int).SetString(string(digits), 10)
	if !ok {
		return Decimal{}, fmt.Errorf("BUG: cannot parse validated decimal digits %q", digits)
	}
	if h == decimalNegative {
		unscaled.Neg(unscaled)
	}
	return Decimal{Unscaled: unscaled, Scale: int32(n - exp)}, nil
}
