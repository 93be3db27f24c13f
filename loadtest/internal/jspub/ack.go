package jspub

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// A JetStream publish is answered on its reply subject by one JSON
// object (nats-server's JSPubAckResponse):
//
//	ack:   {"stream":"EVENTS","seq":123}                    plus optional "domain", "duplicate", ...
//	error: {"error":{"code":503,"err_code":10039,"description":"..."}}   possibly with "stream"
//
// As nats.go's jetstream.PublishMsg decides: a reply whose "error" member
// is present and not null is an error, whatever else it holds; otherwise
// it is an ack only if "stream" is a non-empty string; anything else,
// including JSON that does not decode into that shape, is an invalid ack.

// AckError is a JetStream API error answered to a publish.
type AckError struct {
	Code        int    `json:"code"`
	ErrCode     uint16 `json:"err_code"`
	Description string `json:"description"`
}

func (e *AckError) Error() string {
	return fmt.Sprintf("jetstream publish error %d (err_code %d): %s", e.Code, e.ErrCode, e.Description)
}

// ErrInvalidAck is returned for a reply that is neither an ack nor an
// error (ParseAck).
var ErrInvalidAck = errors.New("invalid JetStream publish ack")

// pubAckResponse is the reply's shape for encoding/json, the reference
// ParseAck's fast path must agree with.
type pubAckResponse struct {
	Error  *AckError `json:"error"`
	Stream string    `json:"stream"`
	Seq    uint64    `json:"seq"`
}

// parseAckJSON decodes a reply with encoding/json.
func parseAckJSON(b []byte) (seq uint64, err error) {
	var r pubAckResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrInvalidAck, err)
	}
	if r.Error != nil {
		return 0, r.Error
	}
	if r.Stream == "" {
		return 0, fmt.Errorf("%w: no stream", ErrInvalidAck)
	}
	return r.Seq, nil
}

// ParseAck reads a publish reply: the stream sequence of an ack, an
// *AckError for a JetStream error, or an error wrapping ErrInvalidAck.
// The common ack (lower-case keys, no escapes in keys, an integer "seq")
// is read by a byte scan that allocates nothing; every other reply,
// errors included, is decoded with encoding/json, so both paths give the
// same answer (FuzzParseAck checks it).
func ParseAck(b []byte) (seq uint64, err error) {
	if seq, ok := scanAck(b); ok {
		return seq, nil
	}
	return parseAckJSON(b)
}

// scanAck is ParseAck's fast path: ok only for a well-formed object whose
// "stream" is a non-empty string, whose "seq" (if any) is a plain
// unsigned integer, and that has no "error" member. It answers !ok for
// anything it does not fully understand.
func scanAck(b []byte) (seq uint64, ok bool) {
	s := scanner{b: b}
	s.ws()
	if !s.eat('{') {
		return 0, false
	}
	var stream bool
	s.ws()
	if s.eat('}') {
		return 0, false // no stream
	}
	for {
		s.ws()
		key, keyOK := s.rawString()
		if !keyOK || bytes.IndexByte(key, '\\') >= 0 {
			return 0, false
		}
		s.ws()
		if !s.eat(':') {
			return 0, false
		}
		s.ws()
		switch string(key) {
		case "stream":
			v, vOK := s.rawString()
			if !vOK {
				return 0, false
			}
			stream = len(v) > 0 // an escape decodes to at least one byte
		case "seq":
			n, nOK := s.uint()
			if !nOK {
				return 0, false
			}
			seq = n
		default:
			// encoding/json matches keys case-insensitively: leave such
			// keys, and the error member, to it.
			k := string(key)
			if strings.EqualFold(k, "error") || strings.EqualFold(k, "stream") || strings.EqualFold(k, "seq") {
				return 0, false
			}
			if !s.value(0) {
				return 0, false
			}
		}
		s.ws()
		if s.eat('}') {
			break
		}
		if !s.eat(',') {
			return 0, false
		}
	}
	s.ws()
	if s.i != len(s.b) || !stream {
		return 0, false
	}
	return seq, true
}

// scanner reads JSON strictly; each method reports false on anything it
// does not accept, leaving the decision to encoding/json.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// rawString reads a string and returns its bytes between the quotes,
// escapes undecoded (but checked).
func (s *scanner) rawString() ([]byte, bool) {
	if !s.eat('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], true
		case c < 0x20:
			return nil, false
		case c == '\\':
			s.i++
			if s.i >= len(s.b) {
				return nil, false
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				if s.i+5 > len(s.b) {
					return nil, false
				}
				for _, h := range s.b[s.i+1 : s.i+5] {
					if !isHex(h) {
						return nil, false
					}
				}
				s.i += 5
			default:
				return nil, false
			}
		default:
			s.i++
		}
	}
	return nil, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// uint reads an unsigned integer without a leading zero, fraction or
// exponent, that fits in a uint64.
func (s *scanner) uint() (uint64, bool) {
	start := s.i
	var n uint64
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		d := uint64(s.b[s.i] - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false // overflows
		}
		n = n*10 + d
		s.i++
	}
	digits := s.i - start
	if digits == 0 || digits > 1 && s.b[start] == '0' {
		return 0, false
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	return n, true
}

// maxDepth bounds the nesting value skips; deeper replies go to
// encoding/json.
const maxDepth = 32

// value skips one JSON value.
func (s *scanner) value(depth int) bool {
	if s.i >= len(s.b) || depth > maxDepth {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, ok := s.rawString()
		return ok
	case c == '{':
		s.i++
		s.ws()
		if s.eat('}') {
			return true
		}
		for {
			s.ws()
			if _, ok := s.rawString(); !ok {
				return false
			}
			s.ws()
			if !s.eat(':') {
				return false
			}
			s.ws()
			if !s.value(depth + 1) {
				return false
			}
			s.ws()
			if s.eat('}') {
				return true
			}
			if !s.eat(',') {
				return false
			}
		}
	case c == '[':
		s.i++
		s.ws()
		if s.eat(']') {
			return true
		}
		for {
			s.ws()
			if !s.value(depth + 1) {
				return false
			}
			s.ws()
			if s.eat(']') {
				return true
			}
			if !s.eat(',') {
				return false
			}
		}
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	}
	return false
}

func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// number skips a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	s.eat('-')
	digits := func() int {
		start := s.i
		for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
			s.i++
		}
		return s.i - start
	}
	if s.eat('0') {
		// no more integer digits
	} else if digits() == 0 {
		return false
	}
	if s.eat('.') && digits() == 0 {
		return false
	}
	if s.eat('e') || s.eat('E') {
		if !s.eat('+') {
			s.eat('-')
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}
