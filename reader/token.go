package reader

// Page token format. A token is the unpadded base64url encoding of
//
//	version:u8 (=1) kind:u8 fingerprint:u64 (big-endian) last:bytes
//
// kind is 1 for event queries and 2 for generic slices. fingerprint is
// xxhash64 of what the token is only valid for (event type and order, or
// table, partition and order), so a token pasted into another query is
// refused instead of silently skipping rows. last is the key of the last
// row returned: a TimeUUID (16 bytes) for events, the encoded clustering
// key for slices. The next page resumes strictly after it.

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"

	"github.com/cespare/xxhash/v2"
)

const (
	tokenVersion     = 1
	tokenKindEvents  = 1
	tokenKindSlice   = 2
	tokenHeaderBytes = 10
	maxTokenLen      = 4096
)

func fingerprint(parts ...string) uint64 {
	d := xxhash.New()
	for _, p := range parts {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(p)))
		d.Write(n[:])
		d.WriteString(p)
	}
	return d.Sum64()
}

func encodeToken(kind byte, fp uint64, last []byte) string {
	b := make([]byte, 0, tokenHeaderBytes+len(last))
	b = append(b, tokenVersion, kind)
	b = binary.BigEndian.AppendUint64(b, fp)
	b = append(b, last...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeToken(token string, kind byte, fp uint64) ([]byte, error) {
	if len(token) > maxTokenLen {
		return nil, fmt.Errorf("%w: page token is %d bytes long; pass the next_page value of the previous page unchanged", ErrInvalidQuery, len(token))
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) < tokenHeaderBytes {
		return nil, fmt.Errorf("%w: page token %.40q is not a token this server issued; pass the next_page value of the previous page unchanged", ErrInvalidQuery, token)
	}
	if b[0] != tokenVersion || b[1] != kind {
		return nil, fmt.Errorf("%w: page token %.40q is not a token for this kind of query; pass the next_page value of the previous page unchanged", ErrInvalidQuery, token)
	}
	if binary.BigEndian.Uint64(b[2:]) != fp {
		return nil, fmt.Errorf("%w: page token %.40q was issued for a different query (type, table, partition or order differ); repeat the parameters of the first page", ErrInvalidQuery, token)
	}
	return b[tokenHeaderBytes:], nil
}
