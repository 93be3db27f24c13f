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

// history chains versions given newest first, each with its first hour.
func history(t *testing.T, versions ...any) *EventTypes {
	t.Helper()
	var head, last *EventTypes
	for i := 0; i < len(versions); i += 2 {
		v, err := ParseEventTypes(versions[i].(string))
		if err != nil {
			t.Fatal(err)
		}
		v.Since = versions[i+1].(time.Time)
		if head == nil {
			head = v
		} else {
			last.Previous = v
		}
		last = v
	}
	return head
}

func TestEventTypesAt(t *testing.T) {
	h := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	types := history(t, "click:sub=8", h.Add(2*time.Hour), "click:sub=4", h, "click:sub=0", time.Time{})
	tests := []struct {
		at   time.Time
		want int
	}{
		{time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC), 0},
		{h.Add(-time.Nanosecond), 0},
		{h, 4},
		{h.Add(119 * time.Minute), 4},
		{h.Add(2 * time.Hour), 8},
		{h.Add(2*time.Hour - time.Nanosecond).In(time.FixedZone("x", 3600)), 4},
		{h.Add(1000 * time.Hour), 8},
	}
	for _, tt := range tests {
		if got := types.SettingsAt("click", tt.at).SubPartitions; got != tt.want {
			t.Errorf("SettingsAt(%s) = sub %d, want %d", tt.at, got, tt.want)
		}
	}
	if got := types.SettingsAt("view", h).SubPartitions; got != 0 {
		t.Errorf("unlisted type: sub %d, want 0", got)
	}
	var none *EventTypes
	if none.At(h) != nil || none.SettingsAt("x", h).TTL != DefaultEventTTL {
		t.Error("nil EventTypes must give the defaults at every hour")
	}
	if flat, _ := ParseEventTypes("click:sub=2"); flat.SettingsAt("click", h).SubPartitions != 2 {
		t.Error("settings without a history apply to every hour")
	}
}

// TestLiveFrom: each version's hours are clamped with the TTL they were
// written with, so a shorter TTL never hides data written under a longer
// one, and a longer one reaches back no further than it applies.
func TestLiveFrom(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 30, 0, 0, time.UTC)
	change := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) // 2.5 h before now
	tests := []struct {
		name  string
		types *EventTypes
		want  time.Time
	}{
		{"no history", history(t, "click:ttl=1h", time.Time{}), now.Add(-time.Hour)},
		{"nil: default TTL", nil, now.Add(-DefaultEventTTL)},
		{"TTL shortened: the older hours keep 24h", history(t, "click:ttl=1h", change, "click:ttl=24h", time.Time{}), now.Add(-24 * time.Hour)},
		{"TTL shortened long ago: the old hours have expired", history(t, "click:ttl=1h", change, "click:ttl=2h", time.Time{}), now.Add(-time.Hour)},
		{"TTL lengthened: the new TTL reaches back only to its start", history(t, "click:ttl=24h", change, "click:ttl=1h", time.Time{}), change},
		{"pending change does not matter yet", history(t, "click:ttl=1h", now.Add(time.Hour), "click:ttl=24h", time.Time{}), now.Add(-24 * time.Hour)},
		{"other type unaffected", history(t, "click:ttl=1h,view:ttl=3h", change, "click:ttl=24h,view:ttl=3h", time.Time{}), now.Add(-24 * time.Hour)},
	}
	for _, tt := range tests {
		if got := tt.types.LiveFrom("click", now); !got.Equal(tt.want) {
			t.Errorf("%s: LiveFrom = %s, want %s", tt.name, got, tt.want)
		}
	}
}

// FuzzParseEventTypes: the --types parser never panics, and whatever it
// accepts, String gives a spec that parses back to the same settings.
func FuzzParseEventTypes(f *testing.F) {
	for _, seed := range []string{"", "*", "*:ttl=168h,click:ttl=24h:sub=4", "click:sub=4,view", "a:ttl=1h30m:sub=1024",
		"click:ttl=0s", "x:sub=-1", "a,a", " click : ttl=1h", "*:sub=2,*:ttl=1h", "click:ttl=1ns", "b:ttl=2562047h"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		c, err := ParseEventTypes(spec)
		if err != nil {
			return
		}
		again, err := ParseEventTypes(c.String())
		if err != nil {
			t.Fatalf("ParseEventTypes(%q) = %q, which does not parse: %v", spec, c, err)
		}
		if !reflect.DeepEqual(c, again) {
			t.Fatalf("ParseEventTypes(%q) = %+v; its String %q parses to %+v", spec, c, c.String(), again)
		}
	})
}
