package writer

// Wire format of an event (docs/events.md is the producer's reference):
//
//	{"type": "click",                        string; or from the subject events.<type>
//	 "time": "2026-01-02T03:04:05.123Z",     RFC 3339 string, or unix milliseconds
//	 "id":   "<version 1 UUID>",             optional
//	 "ttl":  3600,                           optional, seconds, overrides the type's TTL
//	 "user": "u1", "author": "a1",           optional strings
//	 "data": {...}}                          optional JSON object, stored as sent ({} if absent)
//
// The body must be valid UTF-8 throughout and nest at most MaxNestingDepth
// levels. Other top-level fields are ignored; null counts as absent.
// Checks run in the order of the reasons below, and the first failure is
// the reason.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
	"github.com/google/uuid"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
)

// Rejection reasons, the machine part of the Eventide-Error header. They
// are part of the producer contract (docs/events.md): never rename one.
const (
	reasonPayloadTooLarge  = "payload_too_large"
	reasonMalformedJSON    = "malformed_json"
	reasonInvalidUTF8      = "invalid_utf8"
	reasonTooDeep          = "nesting_too_deep"
	reasonMissingType      = "missing_type"
	reasonInvalidType      = "invalid_type"
	reasonTypeMismatch     = "type_mismatch"
	reasonTypeNotAllowed   = "type_not_allowed"
	reasonInvalidID        = "invalid_id"
	reasonMissingTime      = "missing_time"
	reasonInvalidTime      = "invalid_time"
	reasonIDTimeMismatch   = "id_time_mismatch"
	reasonInvalidTTL       = "invalid_ttl"
	reasonInvalidUser      = "invalid_user"
	reasonInvalidAuthor    = "invalid_author"
	reasonInvalidData      = "invalid_data"
	reasonTimeInFuture     = "time_in_future"
	reasonExpiredOnArrival = "expired_on_arrival"
)

// allReasons lists every reason, in check order.
var allReasons = []string{
	reasonPayloadTooLarge, reasonMalformedJSON, reasonInvalidUTF8, reasonTooDeep, reasonMissingType, reasonInvalidType,
	reasonTypeMismatch, reasonTypeNotAllowed, reasonInvalidID, reasonMissingTime,
	reasonInvalidTime, reasonIDTimeMismatch, reasonInvalidTTL, reasonInvalidUser,
	reasonInvalidAuthor, reasonInvalidData, reasonTimeInFuture, reasonExpiredOnArrival,
}

// MaxNestingDepth is the deepest nesting of objects and arrays a body may
// have, the event object itself being depth 1. Deeper bodies are rejected
// (nesting_too_deep): every reader of the stored data, not just this one,
// has to walk it.
const MaxNestingDepth = 64

// Bounds of an event time: the years a partition key can name.
var (
	minEventTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	maxEventTime = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
)

// rejection says why a message is not an event.
type rejection struct {
	reason  string // one of the reason constants
	message string // for a human: what was wrong and what is accepted
}

func (r *rejection) Error() string { return r.reason + ": " + r.message }

func reject(reason, format string, args ...any) *rejection {
	return &rejection{reason: reason, message: fmt.Sprintf(format, args...)}
}

// parsedEvent is a valid event, ready to store.
type parsedEvent struct {
	event schema.Event
	// seq is the stream sequence of the message that carried it.
	seq uint64
	// remainingTTLSeconds is what is left of its TTL at validation time,
	// rounded up; always >= 1.
	remainingTTLSeconds int32
	subPartitions       int
	// storedHere is set by eventBatch.Write: whether this writer stores
	// the event's partition (always, unless Config.StoresPartition says
	// otherwise). Stored reads it rather than hashing the partition again.
	storedHere bool
}

// msgIdentity is where a message sits in the stream: the input of the ids
// of events sent without one.
type msgIdentity struct {
	stream string
	epoch  uint64 // checkpoint epoch, see checkpoint.go
	seq    uint64
}

// clockSeqAndNode derives the last 8 bytes of a generated event id from the
// message's identity, so a redelivered message gets the id it had before.
// The multicast bit is set, as RFC 4122 asks of a node that is not an IEEE
// 802 address, so a derived id never equals a MAC-based one.
func (m msgIdentity) clockSeqAndNode() [8]byte {
	var scratch [96]byte
	in := append(scratch[:0], m.stream...)
	in = append(in, 0)
	in = binary.BigEndian.AppendUint64(in, m.epoch)
	in = binary.BigEndian.AppendUint64(in, m.seq)
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], xxhash.Sum64(in))
	b[2] |= 0x01
	return b
}

// idClockSeqAndNode derives the last 8 bytes of an event id from the id a
// producer sent, when the stored id must carry another timestamp (see
// parse). The multicast bit is set, as for clockSeqAndNode.
func idClockSeqAndNode(id [16]byte) [8]byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], xxhash.Sum64(append([]byte("id\x00"), id[:]...)))
	b[2] |= 0x01
	return b
}

// validator turns message bodies into events.
type validator struct {
	maxPayload int
	maxSkew    time.Duration
	types      *schema.EventTypes
	// subjectPatterns are the stream's subjects split into tokens; a
	// subject matching one that ends in ">" names its event type with
	// the tokens matched by ">".
	subjectPatterns [][]string
}

func newValidator(cfg Config) *validator {
	v := &validator{maxPayload: cfg.MaxPayload, maxSkew: cfg.MaxSkew, types: cfg.Types}
	for _, s := range cfg.storedSubjects() {
		v.subjectPatterns = append(v.subjectPatterns, strings.Split(s, "."))
	}
	return v
}

// subjectType returns the event type a subject names, and whether it names
// one (valid or not): for the pattern "events.>", the subject
// "events.click" names "click".
func (v *validator) subjectType(subject string) (string, bool) {
	for _, pattern := range v.subjectPatterns {
		rest, more := subject, true // the tokens not matched yet, and whether there are any
		for _, p := range pattern {
			if p == ">" {
				if more {
					return rest, true
				}
				break
			}
			if !more {
				break
			}
			var token string
			token, rest, more = strings.Cut(rest, ".")
			if p != "*" && p != token {
				break
			}
		}
	}
	return "", false
}

// dlqType is the event type a dead letter is filed under: its subject's,
// if valid, otherwise "unknown".
func (v *validator) dlqType(subject string) string {
	if t, ok := v.subjectType(subject); ok && bucket.ValidateEventType(t) == nil {
		return t
	}
	return "unknown"
}

// parse validates one message as of now.
func (v *validator) parse(subject string, body []byte, id msgIdentity, now time.Time) (parsedEvent, *rejection) {
	var p parsedEvent
	if len(body) > v.maxPayload {
		return p, reject(reasonPayloadTooLarge, "body is %d bytes, more than the %d allowed", len(body), v.maxPayload)
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return p, reject(reasonMalformedJSON, "body is not a JSON object")
	}
	fields, ok := scanEventFields(body)
	if !ok {
		var probe map[string]json.RawMessage // only for encoding/json's description of what is wrong
		err := json.Unmarshal(body, &probe)
		if err == nil {
			panic(fmt.Sprintf("BUG: writer: encoding/json accepts a body the event scanner rejects: %q", clip(body)))
		}
		return p, reject(reasonMalformedJSON, "body is not valid JSON: %v", err)
	}
	// encoding/json, and so the scanner, takes invalid UTF-8 inside
	// strings; stored raw in data, it would make every page that returns
	// the event invalid JSON, and decoded in user or author it would be
	// silently changed to U+FFFD.
	if fields.nonASCII && !utf8.Valid(body) {
		at := firstInvalidUTF8(body)
		return p, reject(reasonInvalidUTF8, "body is not valid UTF-8: invalid byte 0x%02x at offset %d", body[at], at)
	}
	// An escaped lone UTF-16 surrogate ("\ud800" without its pair) is no
	// character: encoding/json decodes it to U+FFFD and strict parsers
	// refuse the page, as with invalid UTF-8.
	if fields.uEscape {
		if at := loneSurrogateEscape(body); at >= 0 {
			return p, reject(reasonInvalidUTF8, "body escapes a lone UTF-16 surrogate (%s at offset %d), which is no Unicode character; escape a pair, or send the character as UTF-8", body[at:at+6], at)
		}
	}
	if fields.depth > MaxNestingDepth {
		return p, reject(reasonTooDeep, "body nests objects and arrays %d deep, more than the %d allowed", fields.depth, MaxNestingDepth)
	}
	field := func(raw []byte) []byte {
		if string(raw) == "null" {
			return nil
		}
		return raw
	}

	// Type.
	subjType, subjHasType := v.subjectType(subject)
	var eventType string
	if raw := field(fields.typ); raw != nil {
		var isString bool
		if eventType, isString = jsonString(raw); !isString {
			return p, reject(reasonInvalidType, "type must be a string, got %s", clip(raw))
		}
		if err := bucket.ValidateEventType(eventType); err != nil {
			return p, reject(reasonInvalidType, "%v", err)
		}
		if subjHasType && subjType != eventType {
			return p, reject(reasonTypeMismatch, "type %q in the body differs from type %q in subject %q", eventType, subjType, subject)
		}
	} else {
		if !subjHasType {
			return p, reject(reasonMissingType, "no type in the body, and subject %q names none (publish to events.<type>)", subject)
		}
		if err := bucket.ValidateEventType(subjType); err != nil {
			return p, reject(reasonInvalidType, "subject %q: %v", subject, err)
		}
		eventType = subjType
	}
	if !v.types.Allowed(eventType) {
		return p, reject(reasonTypeNotAllowed, "event type %q is not in the configured list of types", eventType)
	}

	// Id.
	var eventID uuid.UUID
	hasID := false
	if raw := field(fields.id); raw != nil {
		s, isString := jsonString(raw)
		if !isString {
			return p, reject(reasonInvalidID, "id must be a string holding a version 1 UUID, got %s", clip(raw))
		}
		u, err := uuid.Parse(s)
		if err != nil {
			return p, reject(reasonInvalidID, "id %q is not a UUID: %v", clipString(s), err)
		}
		if u.Version() != 1 {
			return p, reject(reasonInvalidID, "id %s is a version %d UUID; event ids are version 1 (time-based)", u, u.Version())
		}
		eventID, hasID = u, true
	}

	// Time. With an id, the id's time is the event time; a time sent
	// along must agree with it to the millisecond.
	var eventTime time.Time
	if raw := field(fields.time); raw != nil {
		t, err := parseTime(raw)
		if err != nil {
			return p, reject(reasonInvalidTime, "%v", err)
		}
		eventTime = t
	} else if !hasID {
		return p, reject(reasonMissingTime, "no time and no id: send time as an RFC 3339 string or unix milliseconds")
	}
	if hasID {
		idTime, err := bucket.TimeOf(eventID)
		if err != nil {
			panic("BUG: version 1 UUID has no time: " + err.Error())
		}
		switch {
		case eventTime.IsZero():
			eventTime = idTime
		case eventTime.UnixMilli() != idTime.UnixMilli():
			return p, reject(reasonIDTimeMismatch, "time %s and the time of id %s, %s, are not the same millisecond",
				eventTime.UTC().Format(time.RFC3339Nano), eventID, idTime.Format(time.RFC3339Nano))
		case !idTime.Equal(eventTime.Truncate(100 * time.Nanosecond)):
			// The id has digits below the millisecond that time has not
			// (or other ones). The event is stored at time, as published,
			// under an id with time's timestamp and clock sequence and
			// node hashed from the id sent: still deterministic per
			// message, and ids that differed only below the millisecond
			// still differ.
			derived, err := bucket.NewTimeUUID(eventTime, idClockSeqAndNode(eventID))
			if err != nil {
				return p, reject(reasonInvalidTime, "%v", err)
			}
			eventID = derived
		}
	}
	if eventTime.Before(minEventTime) || !eventTime.Before(maxEventTime) {
		return p, reject(reasonInvalidTime, "time %s is outside the years 2000 to 2099", eventTime.UTC().Format(time.RFC3339Nano))
	}

	// TTL and sub-partitions: the settings of the event's hour bucket, so
	// that an hour is written with one setting whenever its events arrive.
	settings := v.types.At(eventTime)
	ttlSeconds := settings.TTLSeconds(eventType)
	if raw := field(fields.ttl); raw != nil {
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n <= 0 || n > math.MaxInt32 {
			return p, reject(reasonInvalidTTL, "ttl must be a whole number of seconds from 1 to %d, got %s", math.MaxInt32, clip(raw))
		}
		ttlSeconds = n
	}

	// User and author.
	var user, author string
	if raw := field(fields.user); raw != nil {
		var isString bool
		if user, isString = jsonString(raw); !isString {
			return p, reject(reasonInvalidUser, "user must be a string, got %s", clip(raw))
		}
	}
	if raw := field(fields.author); raw != nil {
		var isString bool
		if author, isString = jsonString(raw); !isString {
			return p, reject(reasonInvalidAuthor, "author must be a string, got %s", clip(raw))
		}
	}

	// Data: a JSON object, stored byte for byte.
	data := []byte("{}")
	if raw := field(fields.data); raw != nil {
		if raw[0] != '{' {
			return p, reject(reasonInvalidData, "data must be a JSON object, got %s", clip(raw))
		}
		if fields.bigNumber {
			if num, ok := numberOutOfRange(raw); ok {
				return p, reject(reasonInvalidData, "data holds the number %s, outside the range of a 64-bit float", clip(num))
			}
		}
		data = raw
	}

	// Time against now.
	if eventTime.After(now.Add(v.maxSkew)) {
		return p, reject(reasonTimeInFuture, "time %s is %s ahead of the server's clock, more than the %s allowed",
			eventTime.UTC().Format(time.RFC3339Nano), eventTime.Sub(now).Round(time.Millisecond), v.maxSkew)
	}
	expiresAt := eventTime.Add(time.Duration(ttlSeconds) * time.Second)
	if !expiresAt.After(now) {
		return p, reject(reasonExpiredOnArrival, "time %s plus ttl %ds is %s, already past",
			eventTime.UTC().Format(time.RFC3339Nano), ttlSeconds, expiresAt.UTC().Format(time.RFC3339Nano))
	}

	if !hasID {
		u, err := bucket.NewTimeUUID(eventTime, id.clockSeqAndNode())
		if err != nil {
			panic("BUG: event time in range has no TimeUUID: " + err.Error())
		}
		eventID = u
	}
	remaining := (expiresAt.Sub(now) + time.Second - 1) / time.Second
	p.event = schema.Event{ID: eventID, Type: eventType, User: user, Author: author, Data: data}
	p.remainingTTLSeconds = int32(min(int64(remaining), math.MaxInt32))
	p.subPartitions = settings.Settings(eventType).SubPartitions
	return p, nil
}

// firstInvalidUTF8 is the offset of the first byte of b that does not
// start a valid UTF-8 sequence; len(b) if there is none.
func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// parseTime reads an RFC 3339 string or a JSON integer of unix
// milliseconds.
func parseTime(raw []byte) (time.Time, error) {
	if raw[0] == '"' {
		s, isString := jsonString(raw)
		if !isString {
			return time.Time{}, fmt.Errorf("time %s is not a valid JSON string", clip(raw))
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return time.Time{}, fmt.Errorf("time %q is not RFC 3339 (like 2026-01-02T03:04:05.123Z)", clipString(s))
		}
		return t, nil
	}
	ms, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %s is neither an RFC 3339 string nor an integer of unix milliseconds", clip(raw))
	}
	return time.UnixMilli(ms), nil
}

// maxEcho is the longest piece of input quoted back in a message.
const maxEcho = 64

func clip(raw []byte) string { return clipString(string(raw)) }

func clipString(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	return s[:maxEcho] + "..."
}

// numberOutOfRange returns the first number in the valid JSON value raw
// that a 64-bit float cannot hold (1e400): valid JSON, but encoding/json
// refuses to decode it into any or float64, so stored in data it would
// break every page that returns the event for such clients. Only numbers
// with an exponent or of more than 300 bytes can be out of range, so the
// others are not parsed.
func numberOutOfRange(raw []byte) ([]byte, bool) {
	for i := 0; i < len(raw); {
		switch c := raw[i]; {
		case c == '"':
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
			i++
		case c == '-' || c >= '0' && c <= '9':
			start, exp := i, false
			for ; i < len(raw) && strings.IndexByte("+-.0123456789eE", raw[i]) >= 0; i++ {
				exp = exp || raw[i] == 'e' || raw[i] == 'E'
			}
			if num := raw[start:i]; exp || len(num) > 300 {
				if _, err := strconv.ParseFloat(string(num), 64); err != nil {
					return num, true
				}
			}
		default:
			i++
		}
	}
	return nil, false
}

// loneSurrogateEscape returns the offset of the first \uXXXX escape of a
// UTF-16 surrogate that is not a high surrogate followed at once by an
// escaped low one, or -1. body must be valid JSON: a backslash then only
// starts an escape inside a string.
func loneSurrogateEscape(body []byte) int {
	surrogate := func(i int) (rune, bool) { // the escape \uXXXX at i
		if i+6 > len(body) || body[i] != '\\' || body[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(body[i+2:i+6]), 16, 16)
		if err != nil || v < 0xd800 || v > 0xdfff {
			return 0, false
		}
		return rune(v), true
	}
	for i := 0; i < len(body); i++ {
		j := bytes.IndexByte(body[i:], '\\')
		if j < 0 {
			return -1
		}
		i += j
		if r, ok := surrogate(i); ok {
			if low, ok := surrogate(i + 6); r <= 0xdbff && ok && low >= 0xdc00 {
				i += 11 // the pair; the loop adds the last byte
				continue
			}
			return i
		}
		i++ // the escaped byte: never the start of another escape
	}
	return -1
}
