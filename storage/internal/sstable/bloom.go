package sstable

import (
	"math"

	"github.com/cespare/xxhash/v2"
	"github.com/eventide/eventide/storage/internal/base"
)

// The bloom filter answers "may this SSTable hold partition key k?" with no
// false negatives. Each key is hashed once with xxhash64; the k probe
// positions come from double hashing (Kirsch and Mitzenmacher): h, h+d,
// h+2d, ... modulo the number of bits, with d the hash rotated by 31 bits.
//
// Encoding (layout in writer.go): one byte k, then the bit array, bit i at
// byte i/8, bit i%8. The number of bits is 8 * (len - 1), a multiple of 64.

const (
	defaultBloomBitsPerKey = 10
	maxBloomBitsPerKey     = 64
	maxBloomProbes         = 30
	minBloomBits           = 64
)

type bloomFilter struct {
	k    uint32
	bits []byte
}

// bloomProbes is the k that minimises the false-positive rate for a given
// bits-per-key: bitsPerKey * ln 2.
func bloomProbes(bitsPerKey int) int {
	k := int(math.Round(float64(bitsPerKey) * math.Ln2))
	return min(max(k, 1), maxBloomProbes)
}

// appendBloomFilter appends a filter holding the given key hashes.
func appendBloomFilter(dst []byte, hashes []uint64, bitsPerKey int) []byte {
	nbits := max(len(hashes)*bitsPerKey, minBloomBits)
	nbits = (nbits + 63) / 64 * 64
	k := bloomProbes(bitsPerKey)
	dst = append(dst, byte(k))
	start := len(dst)
	dst = append(dst, make([]byte, nbits/8)...)
	bits := dst[start:]
	for _, h := range hashes {
		delta := h>>33 | h<<31
		for i := 0; i < k; i++ {
			pos := h % uint64(nbits)
			bits[pos/8] |= 1 << (pos % 8)
			h += delta
		}
	}
	return dst
}

// decodeBloomFilter decodes a whole bloom filter block. The bits alias src.
func decodeBloomFilter(src []byte) (bloomFilter, []byte, error) {
	if len(src) < 1+minBloomBits/8 || (len(src)-1)%8 != 0 {
		return bloomFilter{}, nil, base.CorruptionErrorf("cannot decode bloom filter: got %d bytes, want 1 + a positive multiple of 8", len(src))
	}
	k := uint32(src[0])
	if k == 0 || k > maxBloomProbes {
		return bloomFilter{}, nil, base.CorruptionErrorf("cannot decode bloom filter: got %d probes, want 1..%d", k, maxBloomProbes)
	}
	return bloomFilter{k: k, bits: src[1:]}, nil, nil
}

func bloomHash(key []byte) uint64 { return xxhash.Sum64(key) }

func (f *bloomFilter) mayContain(h uint64) bool {
	nbits := uint64(len(f.bits)) * 8
	delta := h>>33 | h<<31
	for i := uint32(0); i < f.k; i++ {
		pos := h % nbits
		if f.bits[pos/8]&(1<<(pos%8)) == 0 {
			return false
		}
		h += delta
	}
	return true
}
