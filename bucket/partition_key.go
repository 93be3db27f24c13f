package bucket

// Partition key format (the storage partition of the events table):
//
//	ddmmyyhh|eventtype          an event type that is not split
//	ddmmyyhh|eventtype|n        sub-partition n of a split ("hot") type, 0 <= n < S
//
// ddmmyyhh is the UTC hour bucket: day, month, two-digit year (2000..2099) and
// hour of day, each as two decimal digits. n is decimal without leading zeros.
// Keys are hashed for placement, so their byte order is not time order; a time
// window is read by listing its buckets (BucketsCovering) and one key per
// bucket and sub-partition (PartitionsFor).
//
// Every key is canonical: ParsePartitionKey accepts exactly the strings that
// PartitionKey.String produces.

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
	"github.com/google/uuid"
)

const (
	// MaxEventTypeLen is the longest event type, in bytes.
	MaxEventTypeLen = 64

	// MaxSubPartitions bounds how many sub-partitions a hot event type may be
	// split into, so that one read never has to merge an unbounded number of
	// partitions per hour.
	MaxSubPartitions = 1024

	hourKeyLayout  = "02010615" // time layout of ddmmyyhh
	hourKeyLen     = len(hourKeyLayout)
	firstKeyYear   = 2000 // the century "yy" names
	lastKeyYear    = 2099
	noSubPartition = -1

	allowedEventTypeChars = "a-z, 0-9, '_', '-', '.'"
	maxQuotedLen          = 80 // longest input echoed into an error message
)

// PartitionKey names one partition of the events table: an hour bucket, an
// event type and, for a type split into sub-partitions, which one. Build it with
// NewPartitionKey, PartitionKeyFor, PartitionsFor or ParsePartitionKey, which
// enforce its invariants: the hour is UTC and truncated to the hour, the event
// type is valid, and the sub-partition is in range. The zero value is not a
// valid key. Keys compare with ==.
type PartitionKey struct {
	hour      time.Time
	eventType string
	sub       int // noSubPartition when the type is not split
}

// Hour returns the key's hour bucket (UTC, truncated to the hour).
func (k PartitionKey) Hour() time.Time { return k.hour }

// EventType returns the key's event type.
func (k PartitionKey) EventType() string { return k.eventType }

// SubPartition returns the sub-partition number and true for a key of a split
// event type, and false for a key without a sub-partition suffix.
func (k PartitionKey) SubPartition() (n int, ok bool) {
	return k.sub, k.sub != noSubPartition
}

// String returns the key in its storage form, ddmmyyhh|eventtype[|n].
func (k PartitionKey) String() string {
	b := make([]byte, 0, hourKeyLen+1+len(k.eventType)+5)
	b = k.hour.AppendFormat(b, hourKeyLayout)
	b = append(b, '|')
	b = append(b, k.eventType...)
	if k.sub != noSubPartition {
		b = append(b, '|')
		b = strconv.AppendInt(b, int64(k.sub), 10)
	}
	return string(b)
}

// NewPartitionKey returns the key of the hour bucket holding t for an event
// type that is not split into sub-partitions.
func NewPartitionKey(t time.Time, eventType string) (PartitionKey, error) {
	return newPartitionKey(HourOf(t), eventType, noSubPartition)
}

// PartitionKeyFor returns the partition an event with TimeUUID id is written
// to. The hour bucket is the hour of the id's own timestamp, so the bucket
// walk of a time window and the TimeUUID bounds of its clustering slice always
// agree about which rows are in the window. When subPartitions > 1 the key
// carries sub-partition xxhash64(id's 16 bytes) mod subPartitions: a pure
// function of the id, so a replayed event lands where it landed before, and
// spread evenly even when clock sequence and node are constant for a producer.
// This function is part of the storage format; it must never change.
// subPartitions 0 or 1 means the type is not split.
func PartitionKeyFor(id uuid.UUID, eventType string, subPartitions int) (PartitionKey, error) {
	t, err := TimeOf(id)
	if err != nil {
		return PartitionKey{}, fmt.Errorf("%w: cannot place event %s: %w", ErrInvalidPartitionKey, id, err)
	}
	if err := checkSubPartitions(subPartitions); err != nil {
		return PartitionKey{}, err
	}
	sub := noSubPartition
	if subPartitions > 1 {
		sub = int(xxhash.Sum64(id[:]) % uint64(subPartitions))
	}
	return newPartitionKey(HourOf(t), eventType, sub)
}

// PartitionsFor returns every partition of eventType in the hour bucket that
// holds t: one key when subPartitions is 0 or 1, otherwise subPartitions keys in
// sub-partition order, all of which a read of that hour must merge.
func PartitionsFor(t time.Time, eventType string, subPartitions int) ([]PartitionKey, error) {
	if err := checkSubPartitions(subPartitions); err != nil {
		return nil, err
	}
	hour := HourOf(t)
	if subPartitions <= 1 {
		k, err := newPartitionKey(hour, eventType, noSubPartition)
		if err != nil {
			return nil, err
		}
		return []PartitionKey{k}, nil
	}
	keys := make([]PartitionKey, subPartitions)
	for i := range keys {
		k, err := newPartitionKey(hour, eventType, i)
		if err != nil {
			return nil, err
		}
		keys[i] = k
	}
	return keys, nil
}

// ParsePartitionKey parses the storage form produced by PartitionKey.String.
// Errors wrap ErrInvalidPartitionKey (and ErrInvalidEventType when the type
// part is what is wrong) and say which part is bad and what is expected.
func ParsePartitionKey(s string) (PartitionKey, error) {
	hourPart, rest, ok := strings.Cut(s, "|")
	if !ok {
		return PartitionKey{}, keyError(s, "missing '|' between the hour (ddmmyyhh) and the event type")
	}
	if len(hourPart) != hourKeyLen {
		return PartitionKey{}, keyError(s, "hour %s has %d characters, want %d (ddmmyyhh)", quote(hourPart), len(hourPart), hourKeyLen)
	}
	for i := 0; i < len(hourPart); i++ {
		if !isDigit(hourPart[i]) {
			return PartitionKey{}, keyError(s, "hour %s has %s at offset %d, want a digit (ddmmyyhh)", quote(hourPart), describeChar(hourPart, i), i)
		}
	}
	day, month, year, hourOfDay := twoDigits(hourPart, 0), twoDigits(hourPart, 2), firstKeyYear+twoDigits(hourPart, 4), twoDigits(hourPart, 6)
	if month < 1 || month > 12 {
		return PartitionKey{}, keyError(s, "month %02d is out of range 01..12", month)
	}
	if hourOfDay > 23 {
		return PartitionKey{}, keyError(s, "hour of day %02d is out of range 00..23", hourOfDay)
	}
	if last := daysIn(time.Month(month), year); day < 1 || day > last {
		return PartitionKey{}, keyError(s, "day %02d does not exist in %s %d (it has days 01..%02d)", day, time.Month(month), year, last)
	}

	eventType, subPart, hasSub := strings.Cut(rest, "|")
	if err := ValidateEventType(eventType); err != nil {
		return PartitionKey{}, fmt.Errorf("%w %s: %w", ErrInvalidPartitionKey, quote(s), err)
	}
	sub := noSubPartition
	if hasSub {
		n, err := parseSubPartition(subPart)
		if err != nil {
			return PartitionKey{}, keyError(s, "%s", err)
		}
		sub = n
	}
	return PartitionKey{
		hour:      time.Date(year, time.Month(month), day, hourOfDay, 0, 0, 0, time.UTC),
		eventType: eventType,
		sub:       sub,
	}, nil
}

// ValidateEventType reports whether s may be an event type: 1 to
// MaxEventTypeLen bytes of a-z, 0-9, '_', '-' and '.'. The grammar keeps '|'
// out (it separates key parts) and upper case out (so "Click" and "click"
// cannot become two partitions of one logical type).
func ValidateEventType(s string) error {
	if s == "" {
		return fmt.Errorf("%w \"\": empty (use 1 to %d characters from %s)", ErrInvalidEventType, MaxEventTypeLen, allowedEventTypeChars)
	}
	if len(s) > MaxEventTypeLen {
		return fmt.Errorf("%w %s: %d bytes long, more than the %d allowed", ErrInvalidEventType, quote(s), len(s), MaxEventTypeLen)
	}
	for i := 0; i < len(s); i++ {
		if !isEventTypeByte(s[i]) {
			return fmt.Errorf("%w %s: %s at offset %d is not allowed (use %s)", ErrInvalidEventType, quote(s), describeChar(s, i), i, allowedEventTypeChars)
		}
	}
	return nil
}

// HasPartitionKey reports whether the hour bucket holding t can be named by
// a partition key: its UTC year is in 2000..2099, the years "yy" names. No
// event of another hour can be stored, so a read skips such hours (they
// hold nothing) rather than fail.
func HasPartitionKey(t time.Time) bool {
	y := t.UTC().Year()
	return y >= firstKeyYear && y <= lastKeyYear
}

func newPartitionKey(hour time.Time, eventType string, sub int) (PartitionKey, error) {
	if !HasPartitionKey(hour) {
		return PartitionKey{}, fmt.Errorf("%w: hour %s is outside %d..%d, the years a two-digit yy names",
			ErrInvalidPartitionKey, hour.Format(time.RFC3339), firstKeyYear, lastKeyYear)
	}
	if err := ValidateEventType(eventType); err != nil {
		return PartitionKey{}, fmt.Errorf("%w: %w", ErrInvalidPartitionKey, err)
	}
	return PartitionKey{hour: hour, eventType: eventType, sub: sub}, nil
}

func checkSubPartitions(n int) error {
	if n < 0 || n > MaxSubPartitions {
		return fmt.Errorf("%w: %d sub-partitions is out of range 0..%d", ErrInvalidPartitionKey, n, MaxSubPartitions)
	}
	return nil
}

func parseSubPartition(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("empty sub-partition after the second '|'")
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, fmt.Errorf("sub-partition %s has %s at offset %d, want a decimal number", quote(s), describeChar(s, i), i)
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("sub-partition %s has a leading zero", quote(s))
	}
	n, err := strconv.Atoi(s)
	if err != nil || n >= MaxSubPartitions {
		return 0, fmt.Errorf("sub-partition %s is out of range 0..%d", quote(s), MaxSubPartitions-1)
	}
	return n, nil
}

func keyError(s, format string, args ...any) error {
	return fmt.Errorf("%w %s: %s", ErrInvalidPartitionKey, quote(s), fmt.Sprintf(format, args...))
}

func isEventTypeByte(c byte) bool {
	return 'a' <= c && c <= 'z' || isDigit(c) || c == '_' || c == '-' || c == '.'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func twoDigits(s string, i int) int { return int(s[i]-'0')*10 + int(s[i+1]-'0') }

func daysIn(m time.Month, year int) int {
	return time.Date(year, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// describeChar names the character starting at s[i] for an error message: the
// rune when s holds valid UTF-8 there, the raw byte otherwise.
func describeChar(s string, i int) string {
	r, size := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && size <= 1 {
		return fmt.Sprintf("byte 0x%02x", s[i])
	}
	return fmt.Sprintf("character %q", r)
}

// quote quotes s for an error message, shortened so that a hostile or broken
// input cannot blow up logs and dead-letter headers.
func quote(s string) string {
	if len(s) > maxQuotedLen {
		return strconv.Quote(s[:maxQuotedLen]) + "..."
	}
	return strconv.Quote(s)
}
