package bucket

// TimeUUID layout (RFC 4122 version 1, as github.com/google/uuid stores it):
//
//	bytes 0..3   time_low              low 32 bits of the timestamp
//	bytes 4..5   time_mid              next 16 bits
//	bytes 6..7   time_hi_and_version   version nibble (1), then the top 12 bits
//	byte  8      clock_seq_hi_and_reserved  variant bits 10xxxxxx, clock seq high
//	byte  9      clock_seq_low
//	bytes 10..15 node
//
// The timestamp counts 100 ns ticks since 1582-10-15T00:00:00Z in 60 bits.
//
// Order-preserving encoding (16 bytes, identical to Cassandra's byte-comparable
// form of TimeUUIDType):
//
//	bytes 0..7   big-endian uint64: version<<60 | timestamp
//	bytes 8..15  bytes 8..15 of the UUID, each XOR 0x80
//
// The XOR turns Cassandra's signed byte comparison of clock sequence and node
// into an unsigned one, so bytes.Compare of two encodings equals
// CompareTimeUUID. The encoding is a bijection on all 2^128 UUIDs: the version
// nibble is moved, not dropped, and decoding restores the exact input.

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
)

const (
	// uuidEpochUnixSeconds is 1582-10-15T00:00:00Z, the Gregorian reform and
	// tick zero of version 1 UUIDs. It is a whole number of milliseconds, so
	// millisecond boundaries are multiples of ticksPerMilli in tick space.
	uuidEpochUnixSeconds = -12219292800
	ticksPerSecond       = 10_000_000 // one tick is 100 ns
	ticksPerMilli        = 10_000
	nanosPerTick         = 100
	maxTicks             = 1<<60 - 1
	maxUUIDUnixSeconds   = uuidEpochUnixSeconds + maxTicks/ticksPerSecond

	timeUUIDVersion    = 1
	encodedTimeUUIDLen = 16

	// signFlip8 flips the top bit of each of eight bytes: signed byte order
	// becomes unsigned byte order.
	signFlip8 = 0x8080808080808080

	// Cassandra's minTimeuuid/maxTimeuuid clock-sequence-and-node bytes: eight
	// times -128 and eight times +127, the extremes of a signed byte compare.
	minClockSeqAndNode = 0x8080808080808080
	maxClockSeqAndNode = 0x7f7f7f7f7f7f7f7f
)

// NewTimeUUID returns the version 1 UUID with timestamp t (truncated to 100 ns)
// and clock sequence and node clockSeqAndNode (UUID bytes 8..15), with the two
// RFC 4122 variant bits of byte 8 forced to 10. Equal inputs give equal UUIDs:
// uniqueness is the caller's choice of clockSeqAndNode (random, or a hash of the
// event's identity for replay-stable ids). It fails with ErrTimeOutOfRange for
// times before 1582-10-15 or after the 60-bit range (year 5236); a zero
// time.Time (year 1) is such a time.
func NewTimeUUID(t time.Time, clockSeqAndNode [8]byte) (uuid.UUID, error) {
	ticks, err := ticksOf(t)
	if err != nil {
		return uuid.UUID{}, err
	}
	clockSeqAndNode[0] = clockSeqAndNode[0]&0x3f | 0x80
	return makeTimeUUID(ticks, binary.BigEndian.Uint64(clockSeqAndNode[:])), nil
}

// NewRandomTimeUUID is NewTimeUUID with clock sequence and node read from rand
// (pass crypto/rand.Reader, or a seeded source in tests). As RFC 4122 asks of a
// random node, the multicast bit (lowest bit of byte 10) is set, so the id can
// never equal one built from a real IEEE 802 address.
func NewRandomTimeUUID(t time.Time, rand io.Reader) (uuid.UUID, error) {
	var b [8]byte
	if _, err := io.ReadFull(rand, b[:]); err != nil {
		return uuid.UUID{}, fmt.Errorf("cannot read random clock sequence and node: %w", err)
	}
	b[2] |= 0x01
	return NewTimeUUID(t, b)
}

// TimeOf returns the timestamp of a version 1 UUID in UTC, at its 100 ns
// precision. It fails with ErrNotTimeUUID for any other version.
func TimeOf(u uuid.UUID) (time.Time, error) {
	if v := u.Version(); v != timeUUIDVersion {
		return time.Time{}, fmt.Errorf("cannot read the time of %s: %w: version %d", u, ErrNotTimeUUID, v)
	}
	ticks := timestampOf(u)
	return time.Unix(uuidEpochUnixSeconds+int64(ticks/ticksPerSecond), int64(ticks%ticksPerSecond)*nanosPerTick).UTC(), nil
}

// CompareTimeUUID orders TimeUUIDs exactly as Cassandra's TimeUUIDType: by the
// 60-bit timestamp as an unsigned number, then by bytes 8..15 (clock sequence
// and node) compared lexicographically as signed bytes (int8), so 0x80 sorts
// before 0x7f. It returns -1, 0 or +1. Cassandra rejects UUIDs of other
// versions; here they sort by version nibble first and then by the same two
// fields, which keeps the order total and equal to the order of
// EncodeTimeUUID's bytes for every input.
func CompareTimeUUID(a, b uuid.UUID) int {
	if c := compareUint64(msbKey(a), msbKey(b)); c != 0 {
		return c
	}
	return compareUint64(lsbKey(a), lsbKey(b))
}

// EncodeTimeUUID appends the 16-byte order-preserving encoding of u to dst.
// bytes.Compare of two encodings equals CompareTimeUUID of the UUIDs.
func EncodeTimeUUID(dst []byte, u uuid.UUID) []byte {
	dst = binary.BigEndian.AppendUint64(dst, msbKey(u))
	return binary.BigEndian.AppendUint64(dst, lsbKey(u))
}

// DecodeTimeUUID decodes the encoding EncodeTimeUUID put at the start of src,
// returning the exact original UUID and the bytes after it. It fails with
// ErrCorruptKey when src is shorter than 16 bytes; every 16 bytes decode.
func DecodeTimeUUID(src []byte) (u uuid.UUID, tail []byte, err error) {
	if len(src) < encodedTimeUUIDLen {
		return uuid.UUID{}, src, fmt.Errorf("cannot decode TimeUUID: %w: have %d bytes, want %d", ErrCorruptKey, len(src), encodedTimeUUIDLen)
	}
	hi := binary.BigEndian.Uint64(src)
	lo := binary.BigEndian.Uint64(src[8:]) ^ signFlip8
	ticks := hi & maxTicks
	binary.BigEndian.PutUint32(u[0:], uint32(ticks))
	binary.BigEndian.PutUint16(u[4:], uint16(ticks>>32))
	binary.BigEndian.PutUint16(u[6:], uint16(ticks>>48)|uint16(hi>>60)<<12)
	binary.BigEndian.PutUint64(u[8:], lo)
	return u, src[encodedTimeUUIDLen:], nil
}

// MinTimeUUID returns Cassandra's minTimeuuid for the millisecond holding t:
// the first 100 ns tick of that millisecond with clock sequence and node
// 0x8080808080808080 (eight times -128). Under CompareTimeUUID it is <= every
// version 1 UUID whose timestamp lies in that millisecond and > every UUID of
// an earlier millisecond, so "id >= MinTimeUUID(from)" is an inclusive lower
// time bound. Use it only as a bound: it identifies no event.
func MinTimeUUID(t time.Time) (uuid.UUID, error) {
	ticks, err := ticksOf(t)
	if err != nil {
		return uuid.UUID{}, err
	}
	return makeTimeUUID(ticks-ticks%ticksPerMilli, minClockSeqAndNode), nil
}

// MaxTimeUUID returns Cassandra's maxTimeuuid for the millisecond holding t:
// the last 100 ns tick of that millisecond (first tick + 9999, as Cassandra's
// UUIDGen.maxTimeUUID computes fromUnixTimestamp(ms+1)-1) with clock sequence
// and node 0x7f7f7f7f7f7f7f7f (eight times +127). Under CompareTimeUUID it is
// >= every version 1 UUID whose timestamp lies in that millisecond.
//
// Variant caveat (shared with Cassandra): byte 8 is 0x7f, whose top bits 01 are
// not the RFC 4122 variant (10), so uuid.UUID.Variant reports it as reserved.
// MinTimeUUID's 0x80 happens to carry the RFC variant. Both are correct bounds
// because Cassandra's comparator ignores variant bits and real RFC 4122 ids have
// byte 8 in 0x80..0xbf, inside [-128, +127] as signed bytes.
func MaxTimeUUID(t time.Time) (uuid.UUID, error) {
	ticks, err := ticksOf(t)
	if err != nil {
		return uuid.UUID{}, err
	}
	last := ticks - ticks%ticksPerMilli + ticksPerMilli - 1
	if last > maxTicks {
		return uuid.UUID{}, fmt.Errorf("cannot make the last TimeUUID of the millisecond of %s: %w", t.UTC().Format(time.RFC3339Nano), ErrTimeOutOfRange)
	}
	return makeTimeUUID(last, maxClockSeqAndNode), nil
}

// ticksOf converts t to 100 ns ticks since the UUID epoch, rounding down.
func ticksOf(t time.Time) (uint64, error) {
	sec := t.Unix()
	if sec < uuidEpochUnixSeconds || sec > maxUUIDUnixSeconds {
		return 0, fmt.Errorf("cannot make a TimeUUID for %s: %w (1582-10-15T00:00:00Z up to 60 bits of 100 ns ticks)", t.UTC().Format(time.RFC3339Nano), ErrTimeOutOfRange)
	}
	ticks := uint64(sec-uuidEpochUnixSeconds)*ticksPerSecond + uint64(t.Nanosecond()/nanosPerTick)
	if ticks > maxTicks {
		return 0, fmt.Errorf("cannot make a TimeUUID for %s: %w (1582-10-15T00:00:00Z up to 60 bits of 100 ns ticks)", t.UTC().Format(time.RFC3339Nano), ErrTimeOutOfRange)
	}
	return ticks, nil
}

func makeTimeUUID(ticks, clockSeqAndNode uint64) uuid.UUID {
	var u uuid.UUID
	binary.BigEndian.PutUint32(u[0:], uint32(ticks))
	binary.BigEndian.PutUint16(u[4:], uint16(ticks>>32))
	binary.BigEndian.PutUint16(u[6:], uint16(ticks>>48)&0x0fff|timeUUIDVersion<<12)
	binary.BigEndian.PutUint64(u[8:], clockSeqAndNode)
	return u
}

// timestampOf returns the 60-bit timestamp field, whatever the version.
func timestampOf(u uuid.UUID) uint64 {
	return uint64(binary.BigEndian.Uint16(u[6:])&0x0fff)<<48 |
		uint64(binary.BigEndian.Uint16(u[4:]))<<32 |
		uint64(binary.BigEndian.Uint32(u[0:]))
}

// msbKey is the first half of the encoding: version on top, then timestamp.
func msbKey(u uuid.UUID) uint64 {
	return uint64(u[6]>>4)<<60 | timestampOf(u)
}

// lsbKey is the second half: clock sequence and node with each byte's sign
// bit flipped.
func lsbKey(u uuid.UUID) uint64 {
	return binary.BigEndian.Uint64(u[8:]) ^ signFlip8
}

func compareUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
