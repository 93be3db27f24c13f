package sstable

import (
	"encoding/binary"
	"math"

	"github.com/eventide/eventide/storage/internal/base"
)

// Primitive encodings shared by every structure of the format:
//
//	uvarint   unsigned LEB128 (encoding/binary.AppendUvarint)
//	varint    zigzag LEB128 (encoding/binary.AppendVarint)
//	bytes     uvarint length, then the bytes
//	ldt       a local deletion time as a uvarint u:
//	          0 = base.NoDeletionTime (math.MaxInt64),
//	          1 = "none" (math.MinInt64),
//	          otherwise zigzag(v)+2
//
// The ldt encoding exists because the two sentinels are by far the most
// common values and would otherwise take 10 bytes each.

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendLDT(dst []byte, v int64) []byte {
	switch v {
	case math.MaxInt64:
		return append(dst, 0)
	case math.MinInt64:
		return append(dst, 1)
	}
	return binary.AppendUvarint(dst, zigzag(v)+2)
}

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// cursor decodes a byte slice front to back. The first failure sticks: later
// reads return zero values, so a decoder can read a whole structure and
// check err once. Every length is checked against what remains, so no
// length field can cause an allocation or a slice beyond the input.
type cursor struct {
	b   []byte
	err error
}

// fail records a corruption error describing what could not be decoded.
func (c *cursor) fail(what, detail string, args ...any) {
	if c.err == nil {
		c.err = base.CorruptionErrorf("cannot decode "+what+": "+detail, args...)
	}
	c.b = nil
}

func (c *cursor) uvarint(what string) uint64 {
	if c.err != nil {
		return 0
	}
	v, n := binary.Uvarint(c.b)
	if n <= 0 {
		c.fail(what, "bad uvarint in %d remaining bytes", len(c.b))
		return 0
	}
	c.b = c.b[n:]
	return v
}

func (c *cursor) varint(what string) int64 {
	if c.err != nil {
		return 0
	}
	v, n := binary.Varint(c.b)
	if n <= 0 {
		c.fail(what, "bad varint in %d remaining bytes", len(c.b))
		return 0
	}
	c.b = c.b[n:]
	return v
}

// length reads a uvarint that counts something needing at least minBytes
// bytes each of the remaining input, and rejects it if the input cannot
// hold that many.
func (c *cursor) length(what string, minBytes int) int {
	v := c.uvarint(what)
	if c.err != nil {
		return 0
	}
	if v > uint64(len(c.b)/minBytes) {
		c.fail(what, "got %d, but only %d bytes remain", v, len(c.b))
		return 0
	}
	return int(v)
}

func (c *cursor) byte1(what string) byte {
	if c.err != nil {
		return 0
	}
	if len(c.b) == 0 {
		c.fail(what, "got end of input, want 1 byte")
		return 0
	}
	v := c.b[0]
	c.b = c.b[1:]
	return v
}

// take returns the next n bytes, capacity-limited so an append by a caller
// can never overwrite what follows.
func (c *cursor) take(what string, n int) []byte {
	if c.err != nil {
		return nil
	}
	if n < 0 || n > len(c.b) {
		c.fail(what, "got length %d, but only %d bytes remain", n, len(c.b))
		return nil
	}
	v := c.b[:n:n]
	c.b = c.b[n:]
	return v
}

func (c *cursor) bytes(what string) []byte { return c.take(what, c.length(what, 1)) }

func (c *cursor) ldt(what string) int64 {
	u := c.uvarint(what)
	switch u {
	case 0:
		return math.MaxInt64
	case 1:
		return math.MinInt64
	}
	return unzigzag(u - 2)
}

func (c *cursor) fixed32(what string) uint32 {
	b := c.take(what, 4)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

func (c *cursor) fixed64(what string) uint64 {
	b := c.take(what, 8)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}

// done fails unless the whole input was consumed.
func (c *cursor) done(what string) {
	if c.err == nil && len(c.b) != 0 {
		c.fail(what, "got %d trailing bytes, want none", len(c.b))
	}
}
