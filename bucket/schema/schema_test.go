package schema

import (
	"bytes"
	"errors"
	"math"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/google/uuid"
)

func TestValueRoundTrip(t *testing.T) {
	tu := uuid.MustParse("c232ab00-9414-11ec-b3c8-9f6bdeced846")
	tests := []struct {
		typ bucket.ColumnType
		v   any
	}{
		{bucket.TypeText, "héllo"},
		{bucket.TypeText, ""},
		{bucket.TypeASCII, "plain"},
		{bucket.TypeBlob, []byte{0, 1, 0xff}},
		{bucket.TypeInt, int32(-7)},
		{bucket.TypeBigint, int64(math.MaxInt64)},
		{bucket.TypeVarint, big.NewInt(-123456789)},
		{bucket.TypeTimestamp, time.Date(2026, 11, 22, 10, 0, 0, 5e6, time.UTC)},
		{bucket.TypeBoolean, true},
		{bucket.TypeFloat, float32(1.5)},
		{bucket.TypeDouble, -2.25},
		{bucket.TypeDecimal, bucket.Decimal{Unscaled: big.NewInt(150), Scale: 1}},
		{bucket.TypeTimeUUID, tu},
		{bucket.TypeUUID, uuid.MustParse("123e4567-e89b-42d3-a456-426614174000")},
	}
	for _, tt := range tests {
		t.Run(tt.typ.String(), func(t *testing.T) {
			enc, err := AppendValue(nil, tt.typ, tt.v)
			if err != nil {
				t.Fatal(err)
			}
			got, typ, err := DecodeTypedValue(enc)
			if err != nil {
				t.Fatal(err)
			}
			if typ != tt.typ {
				t.Fatalf("type %s, want %s", typ, tt.typ)
			}
			again, err := AppendValue(nil, typ, got)
			if err != nil || !bytes.Equal(again, enc) {
				t.Fatalf("re-encoding %v gives %x (%v), want %x", got, again, err, enc)
			}
			if tt.typ != bucket.TypeDecimal && tt.typ != bucket.TypeVarint && !reflect.DeepEqual(got, tt.v) {
				t.Fatalf("decoded %#v, want %#v", got, tt.v)
			}
		})
	}
}

func TestDecodeValueErrors(t *testing.T) {
	for _, in := range [][]byte{nil, {0}, {99, 1}, {byte(bucket.TypeInt), 1, 2}, {byte(bucket.TypeBoolean), 7}} {
		if _, err := DecodeValue(in); !errors.Is(err, ErrCorruptValue) {
			t.Errorf("DecodeValue(%x) = %v, want ErrCorruptValue", in, err)
		}
	}
}

func FuzzDecodeValue(f *testing.F) {
	for _, seed := range [][]byte{{byte(bucket.TypeText), 'a'}, {byte(bucket.TypeInt), 0x80, 0, 0, 1}, {byte(bucket.TypeDecimal), 0x80}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		v, typ, err := DecodeTypedValue(in)
		if err != nil {
			if !errors.Is(err, ErrCorruptValue) {
				t.Fatalf("error %v does not wrap ErrCorruptValue", err)
			}
			return
		}
		enc, err := AppendValue(nil, typ, v)
		if err != nil {
			if typ == bucket.TypeText || typ == bucket.TypeASCII {
				return // stored bytes are not re-validated as UTF-8/ASCII on read
			}
			t.Fatalf("decoded %v (%s) does not re-encode: %v", v, typ, err)
		}
		if !bytes.Equal(enc, in) {
			t.Fatalf("decode/encode of %x gives %x", in, enc)
		}
	})
}

func TestParseEventTypes(t *testing.T) {
	tests := []struct {
		spec, want, err string
	}{
		{"", "*", ""},
		{"*:ttl=24h,click:ttl=1h:sub=4,view", "*:ttl=24h0m0s,click:ttl=1h0m0s:sub=4,view", ""},
		{"click:ttl=x", "", `ttl "x" is not a positive duration`},
		{"click:sub=-1", "", `sub "-1" is not a number`},
		{"click:foo=1", "", `unknown option "foo"`},
		{"click:ttl", "", "is not key=value"},
		{"Click", "", "invalid event type"},
		{"a,a", "", "listed twice"},
	}
	for _, tt := range tests {
		c, err := ParseEventTypes(tt.spec)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseEventTypes(%q) error %v, want %q", tt.spec, err, tt.err)
			}
			continue
		}
		if err != nil || c.String() != tt.want {
			t.Errorf("ParseEventTypes(%q) = %q, %v; want %q", tt.spec, c, err, tt.want)
		}
	}
	c, _ := ParseEventTypes("*:ttl=24h,click:sub=4")
	if c.TTLSeconds("click") != 86400 || c.TTLSeconds("view") != 86400 || c.Settings("click").SubPartitions != 4 {
		t.Fatalf("settings: %+v", c)
	}
	var none *EventTypes
	if none.TTLSeconds("x") != int64(DefaultEventTTL/time.Second) || !none.Allowed("x") {
		t.Fatal("nil EventTypes must give defaults")
	}
}
