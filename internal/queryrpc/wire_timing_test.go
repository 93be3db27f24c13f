package queryrpc

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/eventide/eventide/storage"
)

// latestReply is a slice reply as a latest-50 query of the events table
// gets it: 51 rows of a data cell and a user cell.
func latestReply() *sliceReply {
	r := &sliceReply{Stats: storage.ReadStats{Rows: 51, LiveCells: 102, MemtablesRead: 1}}
	for i := range 51 {
		r.Rows = append(r.Rows, storage.Row{Clustering: bytes.Repeat([]byte{byte(i)}, 16), Cells: []storage.Cell{
			{Column: []byte("data"), Value: []byte(fmt.Sprintf(`{"seq":%d,"run":"0afa7538","payload":"aGVsbG8gd29ybGQgaGVsbG8gd29ybGQ=","ok":true}`, i)),
				WriteTimeMicros: 1795000000000000 + int64(i), ExpiresAt: 1795600000, TTLSeconds: 604800},
			{Column: []byte("user"), Value: []byte("user-12345"), WriteTimeMicros: 1795000000000000 + int64(i), ExpiresAt: 1795600000, TTLSeconds: 604800},
		}})
	}
	return r
}

// BenchmarkDecodeSliceReply decodes the reply of a latest-50 slice, what
// cmd/query does once per such HTTP request.
func BenchmarkDecodeSliceReply(b *testing.B) {
	msg := appendSliceReply(nil, latestReply())
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeSliceReply(msg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeSliceRequest decodes a latest-50 slice request, what a
// storage node does once per slice.
func BenchmarkDecodeSliceRequest(b *testing.B) {
	msg := appendSliceRequest(nil, sampleRequests()[1])
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeSliceRequest(msg); err != nil {
			b.Fatal(err)
		}
	}
}
