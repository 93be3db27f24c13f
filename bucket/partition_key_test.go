package bucket

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestNewPartitionKey(t *testing.T) {
	tests := []struct {
		t         time.Time
		eventType string
		want      string
		wantErr   error
	}{
		{time.Date(2026, 11, 21, 13, 5, 0, 0, time.UTC), "click", "21112613|click", nil},
		{time.Date(2026, 11, 21, 14, 5, 0, 0, time.FixedZone("CET", 3600)), "click", "21112613|click", nil},
		{time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), "a", "01010000|a", nil},
		{time.Date(2099, 12, 31, 23, 59, 59, 999999999, time.UTC), "page.view", "31129923|page.view", nil},
		{time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC), "click", "", ErrInvalidPartitionKey},
		{time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC), "click", "", ErrInvalidPartitionKey},
		{time.Date(2026, 11, 21, 13, 5, 0, 0, time.UTC), "Click", "", ErrInvalidEventType},
	}
	for _, tt := range tests {
		k, err := NewPartitionKey(tt.t, tt.eventType)
		if tt.wantErr != nil {
			if !errors.Is(err, tt.wantErr) || !errors.Is(err, ErrInvalidPartitionKey) {
				t.Errorf("NewPartitionKey(%s, %q) error = %v, want %v", tt.t, tt.eventType, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("NewPartitionKey(%s, %q): %v", tt.t, tt.eventType, err)
			continue
		}
		if k.String() != tt.want {
			t.Errorf("NewPartitionKey(%s, %q) = %s, want %s", tt.t, tt.eventType, k, tt.want)
		}
		if k.Hour() != HourOf(tt.t) || k.EventType() != tt.eventType {
			t.Errorf("key %s has hour %s type %q", k, k.Hour(), k.EventType())
		}
		if _, ok := k.SubPartition(); ok {
			t.Errorf("key %s reports a sub-partition", k)
		}
	}
}

func TestValidateEventType(t *testing.T) {
	tests := []struct {
		in      string
		wantMsg string // "" means valid
	}{
		{"click", ""},
		{"a", ""},
		{"page.view", ""},
		{"a_b-c.d9", ""},
		{strings.Repeat("x", MaxEventTypeLen), ""},
		{"Click", `invalid event type "Click": character 'C' at offset 0 is not allowed (use a-z, 0-9, '_', '-', '.')`},
		{"", `invalid event type "": empty (use 1 to 64 characters from a-z, 0-9, '_', '-', '.')`},
		{strings.Repeat("x", MaxEventTypeLen+1), `65 bytes long, more than the 64 allowed`},
		{"a|b", `character '|' at offset 1 is not allowed`},
		{"caf\u00e9", `character 'é' at offset 3 is not allowed`},
		{"a\xffb", `byte 0xff at offset 1 is not allowed`},
		{"new user", `character ' ' at offset 3 is not allowed`},
	}
	for _, tt := range tests {
		err := ValidateEventType(tt.in)
		if tt.wantMsg == "" {
			if err != nil {
				t.Errorf("ValidateEventType(%q) = %v, want nil", tt.in, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidEventType) {
			t.Errorf("ValidateEventType(%q) = %v, want ErrInvalidEventType", tt.in, err)
			continue
		}
		if !strings.Contains(err.Error(), tt.wantMsg) {
			t.Errorf("ValidateEventType(%q) = %q, want it to contain %q", tt.in, err, tt.wantMsg)
		}
	}
}

func TestParsePartitionKey(t *testing.T) {
	valid := []struct {
		in        string
		hour      time.Time
		eventType string
		sub       int // -1: none
	}{
		{"21112613|click", time.Date(2026, 11, 21, 13, 0, 0, 0, time.UTC), "click", -1},
		{"29022400|x", time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), "x", -1},
		{"01010000|a|0", time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), "a", 0},
		{"31129923|page.view|1023", time.Date(2099, 12, 31, 23, 0, 0, 0, time.UTC), "page.view", 1023},
	}
	for _, tt := range valid {
		k, err := ParsePartitionKey(tt.in)
		if err != nil {
			t.Errorf("ParsePartitionKey(%q): %v", tt.in, err)
			continue
		}
		sub, ok := k.SubPartition()
		if !k.Hour().Equal(tt.hour) || k.Hour().Location() != time.UTC || k.EventType() != tt.eventType || (ok != (tt.sub >= 0)) || (ok && sub != tt.sub) {
			t.Errorf("ParsePartitionKey(%q) = hour %s type %q sub %d,%v; want %s %q %d", tt.in, k.Hour(), k.EventType(), sub, ok, tt.hour, tt.eventType, tt.sub)
		}
		if k.String() != tt.in {
			t.Errorf("ParsePartitionKey(%q).String() = %q", tt.in, k)
		}
	}

	invalid := []struct {
		in       string
		wantType bool // also ErrInvalidEventType
		wantMsg  string
	}{
		{"", false, "missing '|'"},
		{"21112613", false, "missing '|'"},
		{"2111261|click", false, `hour "2111261" has 7 characters, want 8 (ddmmyyhh)`},
		{"211126130|click", false, "has 9 characters"},
		{"2111261x|click", false, `character 'x' at offset 7, want a digit`},
		{"21-12613|click", false, `character '-' at offset 2, want a digit`},
		{"31022613|click", false, "day 31 does not exist in February 2026 (it has days 01..28)"},
		{"29022513|click", false, "day 29 does not exist in February 2025"},
		{"31042613|click", false, "day 31 does not exist in April 2026"},
		{"00112613|click", false, "day 00 does not exist"},
		{"21132613|click", false, "month 13 is out of range 01..12"},
		{"21002613|click", false, "month 00 is out of range"},
		{"21112624|click", false, "hour of day 24 is out of range 00..23"},
		{"21112613|", true, "empty"},
		{"21112613|Click", true, "character 'C' at offset 0"},
		{"21112613|click|", false, "empty sub-partition"},
		{"21112613|click|01", false, "leading zero"},
		{"21112613|click|1024", false, "out of range 0..1023"},
		{"21112613|click|99999999999999999999999", false, "out of range 0..1023"},
		{"21112613|click|-1", false, "character '-' at offset 0"},
		{"21112613|click|1|2", false, "character '|' at offset 1"},
		{"21112613|click| 1", false, "character ' ' at offset 0"},
	}
	for _, tt := range invalid {
		_, err := ParsePartitionKey(tt.in)
		if !errors.Is(err, ErrInvalidPartitionKey) {
			t.Errorf("ParsePartitionKey(%q) = %v, want ErrInvalidPartitionKey", tt.in, err)
			continue
		}
		if errors.Is(err, ErrInvalidEventType) != tt.wantType {
			t.Errorf("ParsePartitionKey(%q) = %v: errors.Is(ErrInvalidEventType) = %v, want %v", tt.in, err, !tt.wantType, tt.wantType)
		}
		if !strings.Contains(err.Error(), tt.wantMsg) {
			t.Errorf("ParsePartitionKey(%q) = %q, want it to contain %q", tt.in, err, tt.wantMsg)
		}
	}
}

func TestPartitionKeyFor(t *testing.T) {
	id := uuid.MustParse("c232ab00-9414-11ec-b3c8-9f6bdeced846") // 2022-02-22T19:22:22Z
	k, err := PartitionKeyFor(id, "click", 0)
	if err != nil || k.String() != "22022219|click" {
		t.Fatalf("PartitionKeyFor(unsplit) = %s, %v; want 22022219|click", k, err)
	}
	if k1, _ := PartitionKeyFor(id, "click", 1); k1 != k {
		t.Errorf("1 sub-partition gave %s, want the unsplit key %s", k1, k)
	}
	// The sub-partition is part of the storage format: these values must
	// never change (xxhash64 of the 16 id bytes, mod S).
	for _, tt := range []struct {
		subs int
		want string
	}{
		{2, "22022219|click|0"},
		{16, "22022219|click|12"},
		{MaxSubPartitions, "22022219|click|780"},
	} {
		k, err := PartitionKeyFor(id, "click", tt.subs)
		if err != nil || k.String() != tt.want {
			t.Errorf("PartitionKeyFor(%d sub-partitions) = %s, %v; want %s", tt.subs, k, err, tt.want)
		}
	}

	for _, tt := range []struct {
		name    string
		id      uuid.UUID
		typ     string
		subs    int
		wantErr []error
	}{
		{"not a TimeUUID", uuid.MustParse("f47ac10b-58cc-4372-a567-0e02b2c3d479"), "click", 4, []error{ErrInvalidPartitionKey, ErrNotTimeUUID}},
		{"too many sub-partitions", id, "click", MaxSubPartitions + 1, []error{ErrInvalidPartitionKey}},
		{"negative sub-partitions", id, "click", -1, []error{ErrInvalidPartitionKey}},
		{"bad type", id, "Click", 4, []error{ErrInvalidPartitionKey, ErrInvalidEventType}},
	} {
		_, err := PartitionKeyFor(tt.id, tt.typ, tt.subs)
		for _, want := range tt.wantErr {
			if !errors.Is(err, want) {
				t.Errorf("%s: error %v, want %v", tt.name, err, want)
			}
		}
	}
}

// TestPartitionKeyForSpreads checks that events of one producer (constant
// clock sequence and node) still spread over the sub-partitions.
func TestPartitionKeyForSpreads(t *testing.T) {
	const subs, events = 16, 16000
	counts := make([]int, subs)
	start := time.Date(2026, 11, 21, 13, 0, 0, 0, time.UTC)
	for i := 0; i < events; i++ {
		id, err := NewTimeUUID(start.Add(time.Duration(i)*time.Millisecond), [8]byte{0x80, 1, 2, 3, 4, 5, 6, 7})
		if err != nil {
			t.Fatal(err)
		}
		k, err := PartitionKeyFor(id, "click", subs)
		if err != nil {
			t.Fatal(err)
		}
		n, ok := k.SubPartition()
		if !ok || n < 0 || n >= subs {
			t.Fatalf("key %s: sub-partition %d, %v", k, n, ok)
		}
		if again, _ := PartitionKeyFor(id, "click", subs); again != k {
			t.Fatalf("PartitionKeyFor is not stable: %s then %s", k, again)
		}
		counts[n]++
	}
	for n, c := range counts {
		if c < events/subs*3/4 || c > events/subs*5/4 {
			t.Errorf("sub-partition %d got %d of %d events, want about %d: %v", n, c, events, events/subs, counts)
		}
	}
}

func TestPartitionsFor(t *testing.T) {
	at := time.Date(2026, 11, 21, 13, 42, 0, 0, time.UTC)
	for _, tt := range []struct {
		subs int
		want []string
	}{
		{0, []string{"21112613|click"}},
		{1, []string{"21112613|click"}},
		{3, []string{"21112613|click|0", "21112613|click|1", "21112613|click|2"}},
	} {
		keys, err := PartitionsFor(at, "click", tt.subs)
		if err != nil {
			t.Fatalf("PartitionsFor(%d): %v", tt.subs, err)
		}
		var got []string
		for _, k := range keys {
			got = append(got, k.String())
			parsed, err := ParsePartitionKey(k.String())
			if err != nil || parsed != k {
				t.Errorf("ParsePartitionKey(%s) = %v, %v; want the same key back", k, parsed, err)
			}
		}
		if strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("PartitionsFor(%d) = %v, want %v", tt.subs, got, tt.want)
		}
	}
	if got, _ := PartitionsFor(at, "click", MaxSubPartitions); len(got) != MaxSubPartitions {
		t.Errorf("PartitionsFor(MaxSubPartitions) returned %d keys", len(got))
	}
	for _, subs := range []int{-1, MaxSubPartitions + 1} {
		if _, err := PartitionsFor(at, "click", subs); !errors.Is(err, ErrInvalidPartitionKey) {
			t.Errorf("PartitionsFor(%d) error = %v, want ErrInvalidPartitionKey", subs, err)
		}
	}
	if _, err := PartitionsFor(at, "Click", 4); !errors.Is(err, ErrInvalidEventType) {
		t.Errorf("PartitionsFor(bad type) error = %v, want ErrInvalidEventType", err)
	}
}

// FuzzParsePartitionKey checks that the parser never panics, that every error
// is ErrInvalidPartitionKey, and that what parses is canonical.
func FuzzParsePartitionKey(f *testing.F) {
	for _, s := range []string{"21112613|click", "01010000|a|0", "29022413|x|1023", "31022613|click", "21112613|click|01", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParsePartitionKey(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidPartitionKey) {
				t.Fatalf("ParsePartitionKey(%q) error %v does not wrap ErrInvalidPartitionKey", s, err)
			}
			return
		}
		if k.String() != s {
			t.Fatalf("ParsePartitionKey(%q).String() = %q: not canonical", s, k)
		}
		if k.Hour() != HourOf(k.Hour()) || ValidateEventType(k.EventType()) != nil {
			t.Fatalf("ParsePartitionKey(%q) broke an invariant: %#v", s, k)
		}
	})
}
