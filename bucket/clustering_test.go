package bucket

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestClusteringKnownEncodings pins the byte format: these encodings are on
// disk, so any change here is a format change.
func TestClusteringKnownEncodings(t *testing.T) {
	dec := func(u int64, scale int32) Decimal { return Decimal{Unscaled: big.NewInt(u), Scale: scale} }
	tests := []struct {
		typ   ColumnType
		order Order
		value any
		want  string
	}{
		{TypeInt, Asc, int32(0), "80000000"},
		{TypeInt, Asc, int32(-1), "7fffffff"},
		{TypeInt, Asc, int32(math.MinInt32), "00000000"},
		{TypeInt, Desc, int32(0), "7fffffff"},
		{TypeBigint, Asc, int64(1), "8000000000000001"},
		{TypeTimestamp, Asc, time.Unix(0, 999_999), "8000000000000000"},
		{TypeTimestamp, Asc, time.Unix(-1, 999_000_001), "7fffffffffffffff"}, // -1ms, truncated toward the past
		{TypeBoolean, Asc, false, "00"},
		{TypeBoolean, Asc, true, "01"},
		{TypeBoolean, Desc, true, "fe"},
		{TypeText, Asc, "", "0001"},
		{TypeText, Asc, "a\x00b", "6100ff620001"},
		{TypeText, Desc, "a\x00b", "9eff009dfffe"},
		{TypeASCII, Asc, "ab", "61620001"},
		{TypeBlob, Asc, []byte(nil), "0001"},
		{TypeBlob, Asc, []byte{0, 0}, "00ff00ff0001"},
		{TypeFloat, Asc, float32(0), "80000000"},
		{TypeFloat, Asc, float32(math.Copysign(0, -1)), "7fffffff"},
		{TypeFloat, Asc, float32(1), "bf800000"},
		{TypeFloat, Asc, float32(-1), "407fffff"},
		{TypeFloat, Asc, float32(math.NaN()), "ffc00000"},
		{TypeFloat, Asc, math.Float32frombits(0xffc00001), "ffc00000"}, // every NaN is one key
		{TypeDouble, Asc, float64(1), "bff0000000000000"},
		{TypeDouble, Asc, math.Inf(-1), "000fffffffffffff"},
		{TypeVarint, Asc, big.NewInt(0), "80"},
		{TypeVarint, Asc, big.NewInt(1), "8101"},
		{TypeVarint, Asc, big.NewInt(-1), "7efe"},
		{TypeVarint, Asc, big.NewInt(256), "820100"},
		{TypeVarint, Asc, big.NewInt(-256), "7dfeff"},
		{TypeVarint, Desc, big.NewInt(1), "7efe"},
		{TypeVarint, Asc, new(big.Int).Lsh(big.NewInt(1), 126*8), "ff0000007f01" + strings.Repeat("00", 126)},
		{TypeDecimal, Asc, dec(0, 5), "80"},
		{TypeDecimal, Asc, dec(1, 0), "8181010b00"},
		{TypeDecimal, Asc, dec(10, 1), "8181010b00"}, // 1.0 == 1
		{TypeDecimal, Asc, dec(15, 1), "8181011000"},
		{TypeDecimal, Asc, dec(-1, 0), "7e7efef4ff"},
		{TypeDecimal, Asc, dec(1, 2), "817efe0b00"}, // 0.01: exponent -1
		{TypeDecimal, Asc, dec(100, 0), "8181030b00"},
		{TypeDecimal, Asc, dec(1, -2), "8181030b00"}, // 1E+2 == 100
		{TypeDecimal, Asc, dec(12345, 0), "8181050d233300"},
		{TypeTimeUUID, Asc, uuid.MustParse("13814000-1dd2-11b2-8080-808080808080"), "11b21dd2138140000000000000000000"},
		{TypeTimeUUID, Desc, uuid.MustParse("13814000-1dd2-11b2-8080-808080808080"), "ee4de22dec7ebfffffffffffffffffff"},
		{TypeUUID, Asc, uuid.MustParse("f47ac10b-58cc-4372-a567-0e02b2c3d479"), "4f47ac10b58cc372a5670e02b2c3d479"},
		{TypeUUID, Asc, uuid.MustParse("13814000-1dd2-11b2-8080-808080808080"), "11b21dd2138140008080808080808080"},
	}
	for _, tt := range tests {
		l := ClusteringLayout{{Name: "c", Type: tt.typ, Order: tt.order}}
		got, err := l.Encode(nil, tt.value)
		if err != nil {
			t.Errorf("%s %s %v: %v", tt.typ, tt.order, tt.value, err)
			continue
		}
		if hex.EncodeToString(got) != tt.want {
			t.Errorf("%s %s %v = %x, want %s", tt.typ, tt.order, tt.value, got, tt.want)
		}
	}
}

// TestClusteringOrderPerType is the main property: for every type and both
// orders, bytes.Compare of encodings is the typed comparison (reversed for
// DESC), and decoding gives back the canonical value.
func TestClusteringOrderPerType(t *testing.T) {
	for _, typ := range allColumnTypes {
		for _, order := range []Order{Asc, Desc} {
			t.Run(typ.String()+"_"+order.String(), func(t *testing.T) {
				rng := newRand(t)
				l := ClusteringLayout{{Name: "c", Type: typ, Order: order}}
				for i := 0; i < 3000; i++ {
					a, b := randValue(rng, typ), randValue(rng, typ)
					if i%4 == 0 {
						b = a // equal values must encode equally
					}
					ea := mustEncode(t, l, a)
					eb := mustEncode(t, l, b)
					want := refCompare(typ, a, b)
					if order == Desc {
						want = -want
					}
					if got := bytes.Compare(ea, eb); got != want {
						t.Fatalf("%v vs %v: encodings %x and %x compare %d, want %d", a, b, ea, eb, got, want)
					}
					checkRoundTrip(t, l, []any{a}, ea)
				}
			})
		}
	}
}

// TestClusteringOrderComposite checks whole keys of several columns with mixed
// orders against the component-wise reference, with frequent ties in leading
// columns so that later columns decide.
func TestClusteringOrderComposite(t *testing.T) {
	rng := newRand(t)
	for round := 0; round < 300; round++ {
		l := make(ClusteringLayout, 1+rng.IntN(4))
		for i := range l {
			l[i] = ClusteringColumn{Name: "c" + string(rune('0'+i)), Type: allColumnTypes[rng.IntN(len(allColumnTypes))], Order: Order(rng.IntN(2))}
		}
		for i := 0; i < 100; i++ {
			a, b := make([]any, len(l)), make([]any, len(l))
			for j, c := range l {
				a[j], b[j] = randValue(rng, c.Type), randValue(rng, c.Type)
				if rng.IntN(2) == 0 {
					b[j] = a[j]
				}
			}
			want := 0
			for j, c := range l {
				if want = refCompare(c.Type, a[j], b[j]); want != 0 {
					if c.Order == Desc {
						want = -want
					}
					break
				}
			}
			ea, eb := mustEncode(t, l, a...), mustEncode(t, l, b...)
			if got := bytes.Compare(ea, eb); got != want {
				t.Fatalf("layout %v: %v vs %v: encodings %x and %x compare %d, want %d", l, a, b, ea, eb, got, want)
			}
			checkRoundTrip(t, l, a, ea)

			// Prefixes: b starts with a's k-column prefix exactly when their
			// first k values are equal.
			k := rng.IntN(len(l) + 1)
			pa, err := l.EncodePrefix(nil, a[:k]...)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(ea, pa) {
				t.Fatalf("layout %v: key %x does not start with its own %d-column prefix %x", l, ea, k, pa)
			}
			equal := true
			for j := 0; j < k; j++ {
				equal = equal && refCompare(l[j].Type, a[j], b[j]) == 0
			}
			if bytes.HasPrefix(eb, pa) != equal {
				t.Fatalf("layout %v: HasPrefix(%x, %x) = %v, but first %d values equal = %v (%v vs %v)", l, eb, pa, !equal, k, equal, a, b)
			}
			if end := PrefixEnd(pa); equal && end != nil && bytes.Compare(eb, end) >= 0 {
				t.Fatalf("key %x with prefix %x is not below PrefixEnd %x", eb, pa, end)
			}
		}
	}
}

func mustEncode(t *testing.T, l ClusteringLayout, values ...any) []byte {
	t.Helper()
	b, err := l.Encode(nil, values...)
	if err != nil {
		t.Fatalf("Encode(%v): %v", values, err)
	}
	return b
}

func checkRoundTrip(t *testing.T, l ClusteringLayout, values []any, enc []byte) {
	t.Helper()
	got, err := l.Decode(enc)
	if err != nil {
		t.Fatalf("Decode(%x) of %v: %v", enc, values, err)
	}
	for i, c := range l {
		if want := canonical(c.Type, values[i]); !sameValue(c.Type, got[i], want) {
			t.Fatalf("column %d (%s): Decode gave %T %v, want %T %v", i, c.Type, got[i], got[i], want, want)
		}
	}
}

func TestPrefixEnd(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"ff", ""},
		{"ffff", ""},
		{"00", "01"},
		{"61", "62"},
		{"61ff", "62"},
		{"61fefe", "61feff"},
		{"01ffff", "02"},
	}
	for _, tt := range tests {
		in, _ := hex.DecodeString(tt.in)
		got := PrefixEnd(in)
		if hex.EncodeToString(got) != tt.want || (tt.want == "" && got != nil) {
			t.Errorf("PrefixEnd(%s) = %x (nil %v), want %q", tt.in, got, got == nil, tt.want)
		}
		if len(got) > 0 && len(in) > 0 && &got[0] == &in[0] {
			t.Errorf("PrefixEnd(%s) aliases its input", tt.in)
		}
	}
}

// TestPrefixEndIsTheLeastUpperBound checks on random short strings that
// PrefixEnd(p) is above every string starting with p, and that every string
// in [p, PrefixEnd(p)) starts with p.
func TestPrefixEndIsTheLeastUpperBound(t *testing.T) {
	rng := newRand(t)
	alphabet := []byte{0x00, 0x01, 0xfe, 0xff}
	randBytes := func() []byte {
		b := make([]byte, rng.IntN(5))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return b
	}
	for i := 0; i < 20000; i++ {
		p, k := randBytes(), randBytes()
		if rng.IntN(2) == 0 {
			k = append(bytes.Clone(p), k...)
		}
		end := PrefixEnd(p)
		has := bytes.HasPrefix(k, p)
		inRange := bytes.Compare(k, p) >= 0 && (end == nil || bytes.Compare(k, end) < 0)
		if has != inRange {
			t.Fatalf("prefix %x, end %x, key %x: HasPrefix %v but in [p, end) %v", p, end, k, has, inRange)
		}
	}
}

func TestClusteringEncodeErrors(t *testing.T) {
	v4 := uuid.MustParse("f47ac10b-58cc-4372-a567-0e02b2c3d479")
	col := func(typ ColumnType) ClusteringLayout {
		return ClusteringLayout{{Name: "event_id", Type: typ, Order: Desc}}
	}
	tests := []struct {
		name    string
		layout  ClusteringLayout
		values  []any
		wantErr error
		wantMsg string
	}{
		{"wrong Go type", col(TypeInt), []any{5}, ErrInvalidClusteringValue,
			`cannot encode clustering column 0 "event_id" (int DESC): invalid clustering value: want int32, got int 5`},
		{"string for timeuuid", col(TypeTimeUUID), []any{"abc"}, ErrInvalidClusteringValue, `want uuid.UUID (version 1), got string "abc"`},
		{"nil", col(TypeBlob), []any{nil}, ErrInvalidClusteringValue, "want []byte, got nil"},
		{"v4 for timeuuid", col(TypeTimeUUID), []any{v4}, ErrInvalidClusteringValue, "is a version 4 UUID, want version 1"},
		{"invalid UTF-8", col(TypeText), []any{"a\xffb"}, ErrInvalidClusteringValue, "is not valid UTF-8"},
		{"non-ASCII", col(TypeASCII), []any{"caf\u00e9"}, ErrInvalidClusteringValue, "has byte 0xc3 at offset 3"},
		{"nil *big.Int", col(TypeVarint), []any{(*big.Int)(nil)}, ErrInvalidClusteringValue, "want non-nil *big.Int"},
		{"nil decimal", col(TypeDecimal), []any{Decimal{}}, ErrInvalidClusteringValue, "nil Unscaled"},
		{"decimal scale underflow", col(TypeDecimal), []any{Decimal{Unscaled: big.NewInt(10), Scale: math.MinInt32}}, ErrInvalidClusteringValue, "below the int32 range"},
		{"timestamp out of range", col(TypeTimestamp), []any{time.Unix(math.MaxInt64/1000+1, 0)}, ErrInvalidClusteringValue, "outside the int64 millisecond range"},
		{"too many values", col(TypeInt), []any{int32(1), int32(2)}, ErrInvalidClusteringValue, "layout has 1 columns, got 2 values"},
		{"too few values", ClusteringLayout{{Name: "a", Type: TypeInt}, {Name: "b", Type: TypeInt}}, []any{int32(1)}, ErrInvalidClusteringValue, "layout has 2 columns, got 1 values"},
		{"unknown type", ClusteringLayout{{Name: "x", Type: 0}}, []any{int32(1)}, ErrInvalidLayout, `column "x" has unknown type ColumnType(0)`},
		{"unknown order", ClusteringLayout{{Name: "x", Type: TypeInt, Order: 7}}, []any{int32(1)}, ErrInvalidLayout, "unknown order Order(7)"},
		{"long value is shortened", col(TypeInt), []any{strings.Repeat("x", 1000)}, ErrInvalidClusteringValue, `got string "xxxxxxxx`},
	}
	for _, tt := range tests {
		dst := []byte("keep")
		got, err := tt.layout.Encode(dst, tt.values...)
		if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) {
			t.Errorf("%s: error %v, want %v containing %q", tt.name, err, tt.wantErr, tt.wantMsg)
		}
		if string(got) != "keep" {
			t.Errorf("%s: on error Encode returned %q, want dst unchanged", tt.name, got)
		}
		if err != nil && len(err.Error()) > 300 {
			t.Errorf("%s: error message of %d bytes is not shortened", tt.name, len(err.Error()))
		}
	}
	// A later column failing must not leave the earlier columns appended.
	l := ClusteringLayout{{Name: "a", Type: TypeInt}, {Name: "b", Type: TypeInt}}
	if got, err := l.Encode(nil, int32(1), "x"); err == nil || len(got) != 0 {
		t.Errorf("Encode with a bad second value = %x, %v; want nothing appended", got, err)
	}
	if _, err := l.EncodePrefix(nil, int32(1), int32(2), int32(3)); !errors.Is(err, ErrInvalidClusteringValue) {
		t.Errorf("EncodePrefix with too many values: %v", err)
	}
}

func TestClusteringDecodeCorrupt(t *testing.T) {
	one := func(typ ColumnType) ClusteringLayout { return ClusteringLayout{{Name: "c", Type: typ}} }
	tests := []struct {
		name    string
		layout  ClusteringLayout
		hex     string
		wantMsg string
	}{
		{"empty", one(TypeInt), "", "truncated"},
		{"short int", one(TypeInt), "800000", "truncated at offset 0: need 4 bytes, have 3"},
		{"trailing bytes", one(TypeInt), "8000000000", "1 bytes after the last column"},
		{"unterminated text", one(TypeText), "6162", "no 0x00 0x01 terminator"},
		{"text ends after 0x00", one(TypeText), "616200", "no 0x00 0x01 terminator"},
		{"bad escape", one(TypeText), "610002", "byte 0x02 after 0x00 at offset 1"},
		{"invalid UTF-8", one(TypeText), "ff0001", "not valid UTF-8"},
		{"non-ASCII", one(TypeASCII), "800001", "byte 0x80"},
		{"boolean 2", one(TypeBoolean), "02", "boolean byte 0x02"},
		{"non-canonical float NaN", one(TypeFloat), "ffc00001", "float NaN"},
		{"non-canonical double NaN", one(TypeDouble), "fff8000000000001", "double NaN"},
		{"varint leading zero", one(TypeVarint), "820001", "leading zero byte"},
		{"varint negative zero", one(TypeVarint), "7f", "negative zero"},
		{"varint long header for a short magnitude", one(TypeVarint), "ff0000000101", "long integer header"},
		{"varint long header beyond the input", one(TypeVarint), "ff0000ffff01", "truncated"},
		{"varint huge long header", one(TypeVarint), "ffffffffff", "truncated"},
		{"decimal bad header", one(TypeDecimal), "82", "decimal header 0x82"},
		{"decimal without digits", one(TypeDecimal), "81810100", "without digits"},
		{"decimal pair out of range", one(TypeDecimal), "8181016500", "pair byte 0x65"},
		{"decimal leading zero", one(TypeDecimal), "8181010500", "leading or trailing zero"},
		{"decimal trailing zero", one(TypeDecimal), "8181010c0100", "leading or trailing zero"},
		{"decimal unterminated", one(TypeDecimal), "8181010b", "truncated"},
		{"decimal exponent beyond int64", one(TypeDecimal), "818901000000000000000000", "does not fit in 64 bits"},
		{"decimal exponent beyond the int32 scale", one(TypeDecimal), "818501000000000b00", "scale outside int32"},
		{"timeuuid of version 4", one(TypeTimeUUID), "4f47ac10b58cc372a5670e02b2c3d479", "has version 4, want 1"},
		{"second column truncated", ClusteringLayout{{Name: "a", Type: TypeBoolean}, {Name: "b", Type: TypeInt}}, "0180", `column 1 "b" (int ASC) at offset 1`},
	}
	for _, tt := range tests {
		src, err := hex.DecodeString(tt.hex)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tt.layout.Decode(src)
		if !errors.Is(err, ErrCorruptKey) || !strings.Contains(err.Error(), tt.wantMsg) {
			t.Errorf("%s: Decode(%s) error %v, want ErrCorruptKey containing %q", tt.name, tt.hex, err, tt.wantMsg)
		}
	}
	if _, err := (ClusteringLayout{{Name: "x", Type: 99}}).Decode([]byte{0}); !errors.Is(err, ErrInvalidLayout) {
		t.Errorf("Decode with an unknown column type: %v, want ErrInvalidLayout", err)
	}
}

// TestDecimalExtremeScales round-trips scales at the int32 limits, where the
// exponent and the scale adjustment must not overflow.
func TestDecimalExtremeScales(t *testing.T) {
	l := ClusteringLayout{{Name: "d", Type: TypeDecimal}}
	for _, d := range []Decimal{
		{big.NewInt(1), math.MaxInt32},
		{big.NewInt(-7), math.MinInt32},
		{big.NewInt(12), math.MinInt32},
		{big.NewInt(100), math.MinInt32 + 2},
		{new(big.Int).Exp(big.NewInt(10), big.NewInt(300), nil), 5},
	} {
		enc := mustEncode(t, l, d)
		checkRoundTrip(t, l, []any{d}, enc)
	}
}

func TestTimestampRange(t *testing.T) {
	l := ClusteringLayout{{Name: "ts", Type: TypeTimestamp}}
	for _, ms := range []int64{math.MinInt64, math.MinInt64 + 1, math.MaxInt64, math.MaxInt64 - 1} {
		tm := time.UnixMilli(ms)
		enc := mustEncode(t, l, tm)
		checkRoundTrip(t, l, []any{tm}, enc)
	}
	for _, tm := range []time.Time{
		time.UnixMilli(math.MaxInt64).Add(time.Millisecond),
		time.UnixMilli(math.MinInt64).Add(-time.Nanosecond),
		time.Unix(math.MinInt64/1000-5, 0),
	} {
		if _, err := l.Encode(nil, tm); !errors.Is(err, ErrInvalidClusteringValue) {
			t.Errorf("Encode(%s): %v, want ErrInvalidClusteringValue", tm, err)
		}
	}
}

func TestDecimalString(t *testing.T) {
	tests := []struct {
		d    Decimal
		want string
	}{
		{Decimal{big.NewInt(1), -2}, "1E+2"},
		{Decimal{big.NewInt(150), 2}, "1.50"},
		{Decimal{big.NewInt(-15), 1}, "-1.5"},
		{Decimal{big.NewInt(1), 7}, "1E-7"},
		{Decimal{big.NewInt(1), 6}, "0.000001"},
		{Decimal{big.NewInt(0), 2}, "0.00"},
		{Decimal{big.NewInt(123), -1}, "1.23E+3"},
		{Decimal{big.NewInt(12345), 0}, "12345"},
		{Decimal{big.NewInt(-1), 3}, "-0.001"},
		{Decimal{big.NewInt(-123), 10}, "-1.23E-8"},
		{Decimal{}, "<nil>"},
	}
	for _, tt := range tests {
		if got := tt.d.String(); got != tt.want {
			t.Errorf("Decimal{%v, %d}.String() = %q, want %q", tt.d.Unscaled, tt.d.Scale, got, tt.want)
		}
	}
}

func TestParseColumnType(t *testing.T) {
	for _, typ := range allColumnTypes {
		got, err := ParseColumnType(typ.String())
		if err != nil || got != typ {
			t.Errorf("ParseColumnType(%q) = %v, %v", typ.String(), got, err)
		}
	}
	for in, want := range map[string]ColumnType{"VARCHAR": TypeText, "varchar": TypeText, "TimeUUID": TypeTimeUUID, "BIGINT": TypeBigint} {
		if got, err := ParseColumnType(in); err != nil || got != want {
			t.Errorf("ParseColumnType(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "counter", "list<int>", "int "} {
		if _, err := ParseColumnType(in); !errors.Is(err, ErrInvalidLayout) || !strings.Contains(err.Error(), "timeuuid, uuid, text") {
			t.Errorf("ParseColumnType(%q) error = %v, want ErrInvalidLayout listing the types", in, err)
		}
	}
	if len(allColumnTypes) != len(columnTypeNames)-1 {
		t.Errorf("the tests cover %d column types, the package has %d", len(allColumnTypes), len(columnTypeNames)-1)
	}
	if s := ColumnType(0).String(); s != "ColumnType(0)" {
		t.Errorf("ColumnType(0).String() = %q", s)
	}
	if Asc.String() != "ASC" || Desc.String() != "DESC" || Order(2).String() != "Order(2)" {
		t.Errorf("Order strings: %s %s %s", Asc, Desc, Order(2))
	}
}

// fuzzLayout turns fuzz bytes into a layout of up to 6 columns, covering every
// type in both orders.
func fuzzLayout(spec []byte) ClusteringLayout {
	if len(spec) > 6 {
		spec = spec[:6]
	}
	l := make(ClusteringLayout, len(spec))
	n := byte(len(allColumnTypes))
	for i, b := range spec {
		l[i] = ClusteringColumn{Name: "c", Type: allColumnTypes[b%n], Order: Order(b / n % 2)}
	}
	return l
}

// FuzzDecodeClustering checks that Decode never panics, fails only with
// ErrCorruptKey, and accepts only canonical keys: whatever decodes re-encodes
// to the same bytes.
func FuzzDecodeClustering(f *testing.F) {
	f.Add([]byte{0}, EncodeTimeUUID(nil, uuid.MustParse("13814000-1dd2-11b2-8080-808080808080")))
	f.Add([]byte{2, 15}, []byte("a\x00\xffb\x00\x01\x9e\xff\x00\x9d\xff\xfe"))
	f.Fuzz(func(t *testing.T, spec, key []byte) {
		l := fuzzLayout(spec)
		values, err := l.Decode(key)
		if err != nil {
			if !errors.Is(err, ErrCorruptKey) {
				t.Fatalf("Decode(%x) with %v: error %v does not wrap ErrCorruptKey", key, l, err)
			}
			return
		}
		again, err := l.Encode(nil, values...)
		if err != nil {
			t.Fatalf("Decode(%x) with %v gave %v, which does not encode: %v", key, l, values, err)
		}
		if !bytes.Equal(again, key) {
			t.Fatalf("Decode(%x) with %v gave %v, which encodes as %x: not canonical", key, l, values, again)
		}
	})
}

// FuzzTimeUUIDKey checks the timeuuid fast path against the general one:
// DecodeTimeUUIDKey accepts and rejects what Decode does and returns the
// same id, and AppendTimeUUIDKey writes what Encode writes, in both orders.
func FuzzTimeUUIDKey(f *testing.F) {
	id := uuid.MustParse("13814000-1dd2-11b2-8080-808080808080")
	f.Add(EncodeTimeUUID(nil, id))
	f.Add(append(EncodeTimeUUID(nil, id), 0))
	f.Add(EncodeTimeUUID(nil, uuid.MustParse("123e4567-e89b-42d3-a456-426614174000")))
	f.Fuzz(func(t *testing.T, key []byte) {
		for _, order := range []Order{Asc, Desc} {
			l := ClusteringLayout{{Name: "id", Type: TypeTimeUUID, Order: order}}
			u, err := l.DecodeTimeUUIDKey(key)
			values, generalErr := l.Decode(key)
			if (err == nil) != (generalErr == nil) {
				t.Fatalf("%s key %x: DecodeTimeUUIDKey error %v, Decode error %v", order, key, err, generalErr)
			}
			if err != nil {
				if !errors.Is(err, ErrCorruptKey) {
					t.Fatalf("%s key %x: error %v does not wrap ErrCorruptKey", order, key, err)
				}
				continue
			}
			if values[0].(uuid.UUID) != u {
				t.Fatalf("%s key %x: DecodeTimeUUIDKey %s, Decode %s", order, key, u, values[0])
			}
			fast, err := l.AppendTimeUUIDKey([]byte{7}, u)
			general, generalErr := l.Encode([]byte{7}, u)
			if err != nil || generalErr != nil || !bytes.Equal(fast, general) || !bytes.Equal(fast[1:], key) {
				t.Fatalf("%s id %s: AppendTimeUUIDKey %x (%v), Encode %x (%v), key %x", order, u, fast, err, general, generalErr, key)
			}
		}
	})
}

// FuzzTextKey checks the text fast path against the general one:
// AppendTextKey accepts and rejects what Decode does and appends the same
// text, in both orders, leaving dst as it was on error.
func FuzzTextKey(f *testing.F) {
	asc := ClusteringLayout{{Name: "name", Type: TypeText}}
	for _, s := range []string{"", "alice", "a\x00b", "\x00\x00", "été"} {
		k, _ := asc.Encode(nil, s)
		f.Add(k)
	}
	f.Add([]byte("a\x00\x01b"))
	f.Add([]byte("a\x00\x02"))
	f.Add([]byte{0xff, 0x00, 0x01})
	f.Add([]byte{0x9e, 0xff, 0xfe})
	f.Fuzz(func(t *testing.T, key []byte) {
		for _, order := range []Order{Asc, Desc} {
			l := ClusteringLayout{{Name: "name", Type: TypeText, Order: order}}
			fast, err := l.AppendTextKey([]byte("x"), key)
			values, generalErr := l.Decode(key)
			if (err == nil) != (generalErr == nil) {
				t.Fatalf("%s key %x: AppendTextKey error %v, Decode error %v", order, key, err, generalErr)
			}
			if err != nil {
				if !errors.Is(err, ErrCorruptKey) {
					t.Fatalf("%s key %x: error %v does not wrap ErrCorruptKey", order, key, err)
				}
				if string(fast) != "x" {
					t.Fatalf("%s key %x: failed AppendTextKey returned %q, want dst unchanged", order, key, fast)
				}
				continue
			}
			if string(fast) != "x"+values[0].(string) {
				t.Fatalf("%s key %x: AppendTextKey %q, Decode %q", order, key, fast[1:], values[0])
			}
		}
	})
}

func TestTextKeyErrors(t *testing.T) {
	for _, l := range []ClusteringLayout{nil, {{Name: "id", Type: TypeTimeUUID}}, {{Name: "a", Type: TypeASCII}}, {{Name: "t", Type: TypeText}, {Name: "u", Type: TypeText}}} {
		if _, err := l.AppendTextKey(nil, []byte("a\x00\x01")); !errors.Is(err, ErrInvalidLayout) {
			t.Errorf("layout %v: AppendTextKey error %v, want ErrInvalidLayout", l, err)
		}
	}
}

func TestTimeUUIDKeyErrors(t *testing.T) {
	desc := ClusteringLayout{{Name: "id", Type: TypeTimeUUID, Order: Desc}}
	if _, err := desc.AppendTimeUUIDKey(nil, uuid.MustParse("123e4567-e89b-42d3-a456-426614174000")); !errors.Is(err, ErrInvalidClusteringValue) {
		t.Errorf("version 4 id: %v, want ErrInvalidClusteringValue", err)
	}
	for _, l := range []ClusteringLayout{nil, {{Name: "t", Type: TypeText}}, append(desc, desc[0])} {
		if _, err := l.AppendTimeUUIDKey(nil, uuid.MustParse("13814000-1dd2-11b2-8080-808080808080")); !errors.Is(err, ErrInvalidLayout) {
			t.Errorf("layout %v: AppendTimeUUIDKey error %v, want ErrInvalidLayout", l, err)
		}
		if _, err := l.DecodeTimeUUIDKey(make([]byte, 16)); !errors.Is(err, ErrInvalidLayout) {
			t.Errorf("layout %v: DecodeTimeUUIDKey error %v, want ErrInvalidLayout", l, err)
		}
	}
}
