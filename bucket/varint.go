package bucket

// Ordered integer encoding, used for varint columns and for decimal exponents:
//
//	0x80                                   zero
//	0x80+n, magnitude                      positive, magnitude of n = 1..126 bytes
//	0xff, n (uint32 big-endian), magnitude positive, n >= 127
//	bitwise complement of the form of |x|  negative
//
// magnitude is |x| big-endian with no leading zero byte. Among positives a
// longer magnitude is a larger number and has a larger header, and equal
// lengths compare by magnitude, so bytes.Compare is numeric order; the
// complement reverses it for negatives, whose headers 0x00..0x7e all sort below
// zero while positive headers 0x81..0xff sort above. The header fixes the
// length, so the encoding is prefix-free. Decoders accept only this canonical
// form: no leading zero magnitude byte, no long header for n <= 126, and no
// "negative zero" header 0x7f.

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"slices"
)

const (
	intZeroHeader = 0x80
	intShortMax   = 0x7e // longest magnitude with a one-byte header
	intLongHeader = 0xff
)

func appendOrderedBigInt(dst []byte, x *big.Int) ([]byte, error) {
	if x.Sign() == 0 {
		return append(dst, intZeroHeader), nil
	}
	n := (x.BitLen() + 7) / 8
	if uint64(n) > math.MaxUint32 {
		return dst, fmt.Errorf("%w: varint magnitude of %d bytes exceeds the 2^32-1 byte limit", ErrInvalidClusteringValue, n)
	}
	start := len(dst)
	dst = appendIntHeader(dst, n)
	dst = slices.Grow(dst, n)[:len(dst)+n]
	x.FillBytes(dst[len(dst)-n:]) // FillBytes writes |x|
	if x.Sign() < 0 {
		complement(dst[start:])
	}
	return dst, nil
}

func appendOrderedInt64(dst []byte, v int64) []byte {
	if v == 0 {
		return append(dst, intZeroHeader)
	}
	mag := uint64(v)
	if v < 0 {
		mag = -mag // two's complement: also right for math.MinInt64
	}
	n := (bits.Len64(mag) + 7) / 8
	start := len(dst)
	dst = appendIntHeader(dst, n)
	for i := n - 1; i >= 0; i-- {
		dst = append(dst, byte(mag>>(8*i)))
	}
	if v < 0 {
		complement(dst[start:])
	}
	return dst
}

func appendIntHeader(dst []byte, n int) []byte {
	if n <= intShortMax {
		return append(dst, byte(intZeroHeader+n))
	}
	return binary.BigEndian.AppendUint32(append(dst, intLongHeader), uint32(n))
}

// readIntHeader reads an ordered integer's header. It returns the sign, the
// magnitude length and the mask to read the magnitude with.
func (r *keyReader) readIntHeader(mask byte) (sign, n int, magMask byte, err error) {
	h, err := r.readByte(mask)
	if err != nil {
		return 0, 0, 0, err
	}
	if h == intZeroHeader {
		return 0, 0, mask, nil
	}
	sign, magMask = 1, mask
	if h < intZeroHeader {
		sign, magMask, h = -1, ^mask, ^h
	}
	switch {
	case h == intZeroHeader:
		return 0, 0, 0, fmt.Errorf("%w: integer header 0x7f (negative zero) at offset %d", ErrCorruptKey, r.off-1)
	case h != intLongHeader:
		return sign, int(h - intZeroHeader), magMask, nil
	}
	var b [4]byte
	if err := r.readFixed(b[:], magMask); err != nil {
		return 0, 0, 0, err
	}
	long := binary.BigEndian.Uint32(b[:])
	if long <= intShortMax {
		return 0, 0, 0, fmt.Errorf("%w: long integer header for a %d-byte magnitude at offset %d, which has a short header", ErrCorruptKey, long, r.off-5)
	}
	if uint64(long) > uint64(len(r.src)-r.off) {
		return 0, 0, 0, r.truncated(int(min(long, math.MaxInt32)))
	}
	return sign, int(long), magMask, nil
}

func (r *keyReader) readOrderedBigInt(mask byte) (*big.Int, error) {
	sign, n, magMask, err := r.readIntHeader(mask)
	if err != nil {
		return nil, err
	}
	if sign == 0 {
		return new(big.Int), nil
	}
	mag := make([]byte, n)
	if err := r.readFixed(mag, magMask); err != nil {
		return nil, err
	}
	if mag[0] == 0 {
		return nil, fmt.Errorf("%w: integer magnitude has a leading zero byte at offset %d", ErrCorruptKey, r.off-n)
	}
	x := new(big.Int).SetBytes(mag)
	if sign < 0 {
		x.Neg(x)
	}
	return x, nil
}

func (r *keyReader) readOrderedInt64(mask byte) (int64, error) {
	sign, n, magMask, err := r.readIntHeader(mask)
	if err != nil || sign == 0 {
		return 0, err
	}
	if n > 8 {
		return 0, fmt.Errorf("%w: %d-byte integer at offset %d does not fit in 64 bits", ErrCorruptKey, n, r.off)
	}
	var b [8]byte
	if err := r.readFixed(b[8-n:], magMask); err != nil {
		return 0, err
	}
	if b[8-n] == 0 {
		return 0, fmt.Errorf("%w: integer magnitude has a leading zero byte at offset %d", ErrCorruptKey, r.off-n)
	}
	mag := binary.BigEndian.Uint64(b[:])
	if sign > 0 {
		if mag > math.MaxInt64 {
			return 0, fmt.Errorf("%w: integer at offset %d does not fit in int64", ErrCorruptKey, r.off-n)
		}
		return int64(mag), nil
	}
	if mag > 1<<63 {
		return 0, fmt.Errorf("%w: integer at offset %d does not fit in int64", ErrCorruptKey, r.off-n)
	}
	return -int64(mag), nil
}
