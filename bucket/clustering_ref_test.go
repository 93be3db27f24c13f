package bucket

// Reference comparators and random value generators for the clustering tests.
// The comparators work on typed Go values and never look at an encoding; where
// Cassandra defines the order in Java, they transcribe that Java.

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/google/uuid"
)

var allColumnTypes = []ColumnType{TypeTimeUUID, TypeUUID, TypeText, TypeASCII, TypeInt, TypeBigint, TypeVarint,
	TypeTimestamp, TypeBoolean, TypeFloat, TypeDouble, TypeDecimal, TypeBlob}

// refCompare is the typed comparison of two values of column type t.
func refCompare(t ColumnType, a, b any) int {
	switch t {
	case TypeTimeUUID:
		return refCompareTimeUUID(a.(uuid.UUID), b.(uuid.UUID))
	case TypeUUID:
		return refCompareUUID(a.(uuid.UUID), b.(uuid.UUID))
	case TypeText, TypeASCII:
		return strings.Compare(a.(string), b.(string))
	case TypeBlob:
		return bytes.Compare(a.([]byte), b.([]byte))
	case TypeInt:
		return cmp.Compare(a.(int32), b.(int32))
	case TypeBigint:
		return cmp.Compare(a.(int64), b.(int64))
	case TypeVarint:
		return a.(*big.Int).Cmp(b.(*big.Int))
	case TypeTimestamp:
		return cmp.Compare(a.(time.Time).UnixMilli(), b.(time.Time).UnixMilli())
	case TypeBoolean:
		x, y := a.(bool), b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case TypeFloat:
		return javaFloatCompare(a.(float32), b.(float32))
	case TypeDouble:
		return javaDoubleCompare(a.(float64), b.(float64))
	case TypeDecimal:
		return ratOf(a.(Decimal)).Cmp(ratOf(b.(Decimal)))
	}
	panic(fmt.Sprintf("refCompare: type %v", t))
}

// refCompareUUID transcribes Cassandra's UUIDType.compareCustom: version
// first; version 1 by reordered timestamp (signed long, always positive),
// others by unsigned msb; then the lsb as an unsigned long.
func refCompareUUID(a, b uuid.UUID) int {
	msbA, msbB := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(b[:8])
	va, vb := int(msbA>>12&0xf), int(msbB>>12&0xf)
	if va != vb {
		return cmp.Compare(va, vb)
	}
	var c int
	if va == 1 {
		reorder := func(msb uint64) int64 { return int64(msb<<48 | msb<<16&0xFFFF00000000 | msb>>32) }
		c = cmp.Compare(reorder(msbA), reorder(msbB))
	} else {
		c = cmp.Compare(msbA, msbB)
	}
	if c != 0 {
		return c
	}
	return cmp.Compare(binary.BigEndian.Uint64(a[8:]), binary.BigEndian.Uint64(b[8:]))
}

// javaFloatCompare is java.lang.Float.compare: numeric order, then the raw
// bits of floatToIntBits (NaN collapsed to 0x7fc00000) as signed ints, which
// puts -0 before +0 and NaN after +Inf.
func javaFloatCompare(a, b float32) int {
	if a < b {
		return -1
	}
	if a > b {
		return 1
	}
	bitsOf := func(f float32) int32 {
		if f != f {
			return 0x7fc00000
		}
		return int32(math.Float32bits(f))
	}
	return cmp.Compare(bitsOf(a), bitsOf(b))
}

func javaDoubleCompare(a, b float64) int {
	if a < b {
		return -1
	}
	if a > b {
		return 1
	}
	bitsOf := func(f float64) int64 {
		if f != f {
			return 0x7ff8000000000000
		}
		return int64(math.Float64bits(f))
	}
	return cmp.Compare(bitsOf(a), bitsOf(b))
}

func ratOf(d Decimal) *big.Rat {
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(int(d.Scale)))), nil)
	if d.Scale >= 0 {
		return new(big.Rat).SetFrac(d.Unscaled, p)
	}
	return new(big.Rat).SetInt(new(big.Int).Mul(d.Unscaled, p))
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// canonical is the value Decode must return for v.
func canonical(t ColumnType, v any) any {
	switch t {
	case TypeTimestamp:
		return time.UnixMilli(v.(time.Time).UnixMilli()).UTC()
	case TypeFloat:
		if f := v.(float32); f != f {
			return math.Float32frombits(0x7fc00000)
		}
	case TypeDouble:
		if f := v.(float64); f != f {
			return math.Float64frombits(0x7ff8000000000000)
		}
	case TypeDecimal:
		d := v.(Decimal)
		u, s := new(big.Int).Set(d.Unscaled), int64(d.Scale)
		if u.Sign() == 0 {
			return Decimal{Unscaled: u}
		}
		ten, q, r := big.NewInt(10), new(big.Int), new(big.Int)
		for {
			q.QuoRem(u, ten, r)
			if r.Sign() != 0 {
				break
			}
			u.Set(q)
			s--
		}
		return Decimal{Unscaled: u, Scale: int32(s)}
	case TypeBlob:
		if v.([]byte) == nil {
			return []byte{}
		}
	}
	return v
}

// sameValue is strict equality of decoded values: same Go type and same
// representation (bits for floats, location for times, scale for decimals).
func sameValue(t ColumnType, a, b any) bool {
	switch t {
	case TypeTimestamp:
		x, ok1 := a.(time.Time)
		y, ok2 := b.(time.Time)
		return ok1 && ok2 && x.Equal(y) && x.Location() == y.Location()
	case TypeFloat:
		x, ok1 := a.(float32)
		y, ok2 := b.(float32)
		return ok1 && ok2 && math.Float32bits(x) == math.Float32bits(y)
	case TypeDouble:
		x, ok1 := a.(float64)
		y, ok2 := b.(float64)
		return ok1 && ok2 && math.Float64bits(x) == math.Float64bits(y)
	case TypeDecimal:
		x, ok1 := a.(Decimal)
		y, ok2 := b.(Decimal)
		return ok1 && ok2 && x.Unscaled.Cmp(y.Unscaled) == 0 && x.Scale == y.Scale
	case TypeVarint:
		x, ok1 := a.(*big.Int)
		y, ok2 := b.(*big.Int)
		return ok1 && ok2 && x.Cmp(y) == 0
	case TypeBlob:
		x, ok1 := a.([]byte)
		y, ok2 := b.([]byte)
		return ok1 && ok2 && bytes.Equal(x, y) && (x == nil) == (y == nil)
	}
	return a == b
}

// randValue returns a random value of type t. Small alphabets and pools of
// edge values make ties, shared prefixes and boundary cases common.
func randValue(rng *rand.Rand, t ColumnType) any {
	pick := func(n int) int { return rng.IntN(n) }
	switch t {
	case TypeTimeUUID:
		return randTimeUUID(rng)
	case TypeUUID:
		u := randAnyUUID(rng)
		if pick(4) == 0 {
			u[6] = u[6]&0x0f | byte(pick(16))<<4
		}
		return u
	case TypeText:
		alphabet := []rune{0, 1, 'a', 'b', 0x7f, 'é', '世', 0xfffd, 0x10ffff}
		var b strings.Builder
		for n := pick(6); n > 0; n-- {
			b.WriteRune(alphabet[pick(len(alphabet))])
		}
		return b.String()
	case TypeASCII:
		alphabet := []byte{0, 1, 'a', 'b', 0x7f}
		b := make([]byte, pick(6))
		for i := range b {
			b[i] = alphabet[pick(len(alphabet))]
		}
		return string(b)
	case TypeBlob:
		if pick(10) == 0 {
			return []byte(nil)
		}
		alphabet := []byte{0, 1, 2, 0x7f, 0x80, 0xfe, 0xff}
		b := make([]byte, pick(6))
		for i := range b {
			b[i] = alphabet[pick(len(alphabet))]
		}
		return b
	case TypeInt:
		pool := []int32{math.MinInt32, math.MinInt32 + 1, -256, -1, 0, 1, 255, math.MaxInt32}
		if pick(2) == 0 {
			return pool[pick(len(pool))]
		}
		return int32(rng.Uint32())
	case TypeBigint:
		pool := []int64{math.MinInt64, math.MinInt64 + 1, -1 << 32, -1, 0, 1, 1 << 32, math.MaxInt64}
		if pick(2) == 0 {
			return pool[pick(len(pool))]
		}
		return int64(rng.Uint64())
	case TypeVarint:
		return randBigInt(rng)
	case TypeTimestamp:
		pool := []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, 1, 1_795_000_000_000, math.MaxInt64}
		ms := int64(rng.Uint64())
		if pick(2) == 0 {
			ms = pool[pick(len(pool))]
		}
		tm := time.UnixMilli(ms)
		if ms < math.MaxInt64 && pick(2) == 0 {
			tm = tm.Add(time.Duration(pick(1e6))) // sub-millisecond noise is truncated
		}
		if pick(2) == 0 {
			tm = tm.In(time.FixedZone("X", 3600))
		}
		return tm
	case TypeBoolean:
		return pick(2) == 0
	case TypeFloat:
		pool := []float32{float32(math.Inf(-1)), -math.MaxFloat32, -1, -math.SmallestNonzeroFloat32, float32(math.Copysign(0, -1)), 0,
			math.SmallestNonzeroFloat32, 1, math.MaxFloat32, float32(math.Inf(1)), float32(math.NaN()),
			math.Float32frombits(0xffc00001), math.Float32frombits(0x7f800001)}
		if pick(2) == 0 {
			return pool[pick(len(pool))]
		}
		return math.Float32frombits(rng.Uint32())
	case TypeDouble:
		pool := []float64{math.Inf(-1), -math.MaxFloat64, -1, -math.SmallestNonzeroFloat64, math.Copysign(0, -1), 0,
			math.SmallestNonzeroFloat64, 1, math.MaxFloat64, math.Inf(1), math.NaN(),
			math.Float64frombits(0xfff8000000000001), math.Float64frombits(0x7ff0000000000001)}
		if pick(2) == 0 {
			return pool[pick(len(pool))]
		}
		return math.Float64frombits(rng.Uint64())
	case TypeDecimal:
		return randDecimal(rng)
	}
	panic(fmt.Sprintf("randValue: type %v", t))
}

func randBigInt(rng *rand.Rand) *big.Int {
	one := big.NewInt(1)
	pow := func(bits uint) *big.Int { return new(big.Int).Lsh(one, bits) }
	pool := []*big.Int{big.NewInt(0), big.NewInt(1), big.NewInt(127), big.NewInt(128), big.NewInt(255), big.NewInt(256),
		pow(63), new(big.Int).Sub(pow(126*8), one), pow(126 * 8), pow(127 * 8), pow(2000)}
	var x *big.Int
	if rng.IntN(2) == 0 {
		x = new(big.Int).Set(pool[rng.IntN(len(pool))])
	} else {
		b := make([]byte, rng.IntN(140))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		x = new(big.Int).SetBytes(b)
	}
	if rng.IntN(2) == 0 {
		x.Neg(x)
	}
	return x
}

func randDecimal(rng *rand.Rand) Decimal {
	pool := []int64{0, 1, 5, 10, 15, 100, 150, 1000, 999, 1001, 12345678901234567}
	u := big.NewInt(pool[rng.IntN(len(pool))])
	switch rng.IntN(4) {
	case 0:
		u = randBigInt(rng)
		if u.BitLen() > 200 {
			u.Rsh(u, uint(u.BitLen()-200))
		}
	case 1:
		u.SetInt64(int64(rng.Uint64() >> uint(rng.IntN(64))))
	}
	if rng.IntN(2) == 0 {
		u.Neg(u)
	}
	return Decimal{Unscaled: u, Scale: int32(rng.IntN(41) - 20)}
}
