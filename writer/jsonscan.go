package writer

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"unicode/utf8"
)

// The writer reads every message body once, and encoding/json made that
// the writer's largest cost: it validates the body in one pass and decodes
// it in a second, allocating a map. scanEventFields does both in one pass
// without allocating. It accepts exactly the bodies encoding/json accepts
// (FuzzScanEventFields checks it against json.Unmarshal into a
// map[string]json.RawMessage, with the same result for every field), so
// the choice of parser never changes which events are rejected.

// maxJSONDepth is encoding/json's nesting limit: deeper input is invalid.
const maxJSONDepth = 10000

// eventFields are the raw JSON values of an event's top-level fields; nil
// when the field is absent. A field sent more than once takes its last
// value, as with encoding/json.
type eventFields struct {
	typ, id, time, ttl, user, author, data []byte
	// depth is the deepest nesting of objects and arrays in the body:
	// 1 for an object holding only scalars.
	depth int
	// What the scan saw, so that the checks parse makes on top of JSON's
	// grammar read the body again only when they can fail:
	// nonASCII: a string holds a byte above 0x7f (only strings can; the
	// body may then be invalid UTF-8). uEscape: a string holds a \uXXXX
	// escape (maybe a lone surrogate). bigNumber: a number has an exponent
	// or more than 300 bytes (maybe outside a float64's range).
	nonASCII, uEscape, bigNumber bool
}

// slot returns where the value of a top-level key goes, nil for a key that
// is not an event field. key is the raw string token, quotes included.
func (f *eventFields) slot(key []byte) *[]byte {
	name := key[1 : len(key)-1]
	for _, c := range name {
		if c == '\\' {
			// An escaped key ("t\u0079pe") names the field it decodes to.
			var s string
			if json.Unmarshal(key, &s) != nil {
				return nil
			}
			name = []byte(s)
			break
		}
	}
	switch string(name) {
	case "type":
		return &f.typ
	case "id":
		return &f.id
	case "time":
		return &f.time
	case "ttl":
		return &f.ttl
	case "user":
		return &f.user
	case "author":
		return &f.author
	case "data":
		return &f.data
	}
	return nil
}

// scanEventFields reads body, which must be one JSON object (surrounding
// white space allowed), and returns the values of its event fields; ok is
// false if body is not valid JSON or not an object.
func scanEventFields(body []byte) (f eventFields, ok bool) {
	s := jsonScanner{b: body}
	s.skipSpace()
	if s.i >= len(s.b) || s.b[s.i] != '{' || !s.object(&f) {
		return eventFields{}, false
	}
	s.skipSpace()
	if s.i != len(s.b) {
		return eventFields{}, false
	}
	f.depth = s.maxDepth
	f.nonASCII, f.uEscape, f.bigNumber = s.nonASCII, s.uEscape, s.bigNumber
	return f, true
}

// jsonScanner validates JSON (RFC 8259 as encoding/json reads it) from b[i:].
type jsonScanner struct {
	b               []byte
	i               int
	depth, maxDepth int
	// As eventFields' flags of the same names.
	nonASCII, uEscape, bigNumber bool
}

// bigNumberBytes is the length above which a number without an exponent
// may be out of a float64's range (1 followed by 309 zeros is): such
// numbers are parsed (numberOutOfRange), shorter ones never need to be.
const bigNumberBytes = 300

// strSpecial marks the bytes str cannot skip over: the closing quote, the
// escape, control characters (invalid unescaped) and bytes above 0x7f
// (noted for the UTF-8 check).
var strSpecial = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	for c := 0x80; c < 0x100; c++ {
		t[c] = true
	}
	return t
}()

func (s *jsonScanner) skipSpace() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value skips one value starting at s.i (no leading space).
func (s *jsonScanner) value() bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(nil)
	case c == '[':
		return s.array()
	case c == '"':
		return s.str()
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return false
}

// object skips the object at s.i; if fields is not nil it records the
// values of its event fields.
func (s *jsonScanner) object(fields *eventFields) bool {
	if empty, ok := s.enter('}'); empty || !ok {
		return ok
	}
	for {
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return false
		}
		keyStart := s.i
		if !s.str() {
			return false
		}
		key := s.b[keyStart:s.i]
		s.skipSpace()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.skipSpace()
		valueStart := s.i
		if !s.value() {
			return false
		}
		if fields != nil {
			if slot := fields.slot(key); slot != nil {
				*slot = s.b[valueStart:s.i:s.i]
			}
		}
		if more, ok := s.afterMember('}'); !more || !ok {
			return ok
		}
	}
}

func (s *jsonScanner) array() bool {
	if empty, ok := s.enter(']'); empty || !ok {
		return ok
	}
	for {
		if !s.value() {
			return false
		}
		if more, ok := s.afterMember(']'); !more || !ok {
			return ok
		}
	}
}

// enter opens the object or array at s.i: ok is false past the nesting
// limit, and empty true when it closes at once (with closer).
func (s *jsonScanner) enter(closer byte) (empty, ok bool) {
	if s.depth++; s.depth > maxJSONDepth {
		return false, false
	}
	s.maxDepth = max(s.maxDepth, s.depth)
	s.i++ // '{' or '['
	s.skipSpace()
	if s.i < len(s.b) && s.b[s.i] == closer {
		s.i++
		s.depth--
		return true, true
	}
	return false, true
}

// afterMember reads what follows a member of an object or array: a comma
// (more members follow) or closer (the container ends).
func (s *jsonScanner) afterMember(closer byte) (more, ok bool) {
	s.skipSpace()
	if s.i >= len(s.b) {
		return false, false
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		s.skipSpace()
		return true, true
	case closer:
		s.i++
		s.depth--
		return false, true
	}
	return false, false
}

// str skips a string: control characters must be escaped, escapes must be
// one of \" \\ \/ \b \f \n \r \t \uXXXX; other bytes (even invalid UTF-8)
// are accepted, as encoding/json does.
func (s *jsonScanner) str() bool {
	b, i := s.b, s.i+1 // past '"'
	for i < len(b) {
		i = skipPlain(b, i)
		if i >= len(b) {
			break
		}
		c := b[i]
		if !strSpecial[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			s.i = i + 1
			return true
		case c == '\\':
			i++
			if i >= len(b) {
				s.i = i
				return false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				s.uEscape = true
				i++
				if i+4 > len(b) {
					s.i = i
					return false
				}
				for _, h := range b[i : i+4] {
					if !isHex(h) {
						s.i = i
						return false
					}
				}
				i += 4
			default:
				s.i = i
				return false
			}
		case c < 0x20:
			s.i = i
			return false
		default: // above 0x7f
			s.nonASCII = true
			i++
		}
	}
	s.i = i
	return false
}

// Eight bytes at a time: every byte of a word is 0x01 or 0x80 times
// these (SWAR, as in "Bit Twiddling Hacks", haszero/hasless).
const (
	swarOnes  = 0x0101010101010101
	swarHighs = 0x8080808080808080
)

// skipPlain returns the index of the first byte at or after i that str
// must look at (strSpecial), or a place in the last 7 bytes of b from
// which str's byte loop finds it: it steps over plain bytes a word at a
// time. In each word it flags bytes below 0x20, from 0x80, '"' and '\';
// the subtraction's borrows only flag bytes above a flagged one, so the
// lowest flag is exact.
func skipPlain(b []byte, i int) int {
	for i+8 <= len(b) {
		w := binary.LittleEndian.Uint64(b[i:])
		quote := w ^ (swarOnes * '"')
		backslash := w ^ (swarOnes * '\\')
		special := (w-swarOnes*0x20)&^w | w | (quote-swarOnes)&^quote | (backslash-swarOnes)&^backslash
		if special &= swarHighs; special != 0 {
			return i + bits.TrailingZeros64(special)/8
		}
		i += 8
	}
	return i
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// number skips -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScanner) number() bool {
	start := s.i
	ok := s.numberToken()
	if s.i-start > bigNumberBytes {
		s.bigNumber = true
	}
	return ok
}

func (s *jsonScanner) numberToken() bool {
	if s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i >= len(s.b):
		return false
	case s.b[s.i] == '0':
		s.i++
	case s.b[s.i] >= '1' && s.b[s.i] <= '9':
		s.digits()
	default:
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.bigNumber = true
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return false
		}
	}
	return true
}

func (s *jsonScanner) digits() int {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}

func (s *jsonScanner) literal(word string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}

// jsonString decodes raw, a JSON value, as a string; ok is false if raw is
// not a string. Strings without escapes in valid UTF-8 (nearly all) are
// taken as they are; the rest go through encoding/json, which also
// replaces invalid UTF-8 the way the rest of Go's JSON handling does.
func jsonString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	if inner := raw[1 : len(raw)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}
