package reader

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// FuzzDecodeToken checks the page-token decoder never panics, refuses
// anything it did not issue for this query with ErrInvalidQuery, and
// round-trips what encodeToken issues.
func FuzzDecodeToken(f *testing.F) {
	fpEvents := fingerprint("events", "click", "desc")
	fpSlice := fingerprint("slice", "readings", "s1", "false")
	f.Add(encodeToken(tokenKindEvents, fpEvents, bytes.Repeat([]byte{0x11}, 16)), []byte{0x11})
	f.Add(encodeToken(tokenKindSlice, fpSlice, []byte("key")), []byte("key"))
	f.Add(encodeToken(tokenKindSlice, fpSlice, nil), []byte{})
	f.Add("", []byte{})
	f.Add("AQ", []byte{1})
	f.Add("not base64!", []byte{})
	f.Add("AQGa5DSfYbIHmZjKwADmXBHxgAAAAAAAAAg", []byte{})
	f.Add("AgGa5DSfYbIHmZjKwADmXBHxgAAAAAAAAAg=", []byte{})
	f.Add(strings.Repeat("A", maxTokenLen+1), []byte{})
	f.Fuzz(func(t *testing.T, token string, last []byte) {
		for _, k := range []struct {
			kind byte
			fp   uint64
		}{{tokenKindEvents, fpEvents}, {tokenKindSlice, fpSlice}} {
			got, err := decodeToken(token, k.kind, k.fp)
			if err != nil {
				if !errors.Is(err, ErrInvalidQuery) {
					t.Fatalf("decodeToken(%q): %v does not wrap ErrInvalidQuery", token, err)
				}
			} else if again, err := decodeToken(encodeToken(k.kind, k.fp, got), k.kind, k.fp); err != nil || !bytes.Equal(again, got) {
				t.Fatalf("decodeToken(%q) = %x, which does not round-trip: %x, %v", token, got, again, err)
			}
			issued := encodeToken(k.kind, k.fp, last)
			got, err = decodeToken(issued, k.kind, k.fp)
			if len(issued) > maxTokenLen {
				if !errors.Is(err, ErrInvalidQuery) {
					t.Fatalf("a token of %d bytes: got %v, want ErrInvalidQuery", len(issued), err)
				}
				continue
			}
			if err != nil || !bytes.Equal(got, last) {
				t.Fatalf("round trip of %x: got %x, %v", last, got, err)
			}
			other := tokenKindSlice + tokenKindEvents - k.kind
			if _, err := decodeToken(issued, other, k.fp); !errors.Is(err, ErrInvalidQuery) {
				t.Fatalf("a token of kind %d accepted as kind %d: %v", k.kind, other, err)
			}
			if _, err := decodeToken(issued, k.kind, k.fp+1); !errors.Is(err, ErrInvalidQuery) {
				t.Fatalf("a token accepted for another query: %v", err)
			}
		}
	})
}
