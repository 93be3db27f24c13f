package queryrpc

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/eventide/eventide/reader"
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

// BenchmarkDecodeWalkReply decodes the walk reply of a latest-50 query
// (one group), fresh and into a recycled reply as Client.WalkGroups does.
func BenchmarkDecodeWalkReply(b *testing.B) {
	rows := latestReply().Rows
	msg := appendWalkReplyHeader(nil, false, &reader.Trace{Rows: len(rows), Partitions: 1})
	msg = appendUvarint(msg, len(rows))
	for i := range rows {
		msg = appendWalkRow(msg, 0, &rows[i])
	}
	b.Run("fresh", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeWalkReply(msg, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("recycled", func(b *testing.B) {
		var p walkReplies
		b.SetBytes(int64(len(msg)))
		b.ReportAllocs()
		for b.Loop() {
			r := p.get()
			if err := decodeWalkReplyInto(msg, 1, r); err != nil {
				b.Fatal(err)
			}
			p.put(r)
		}
	})
}

// TestDecodeWalkReplyRecycledSlab: decoding replies whose rows differ in
// cell count (events with and without a user) into one recycled reply
// allocates nothing once it has seen them: the reply keeps room for the
// cells of the last one. It kept only the slab that ran out last, sized
// for the rows left, and allocated again on every reply.
func TestDecodeWalkReplyRecycledSlab(t *testing.T) {
	msg := func(firstCells int) []byte {
		rows := latestReply().Rows
		rows[0].Cells = rows[0].Cells[:firstCells]
		b := appendWalkReplyHeader(nil, false, &reader.Trace{Rows: len(rows), Partitions: 1})
		b = appendUvarint(b, len(rows))
		for i := range rows {
			b = appendWalkRow(b, 0, &rows[i])
		}
		return b
	}
	a, b := msg(1), msg(2) // the first row without its user cell, then with
	r := &walkReply{}
	decode := func() {
		for _, m := range [][]byte{a, b, a} {
			if err := decodeWalkReplyInto(m, 1, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	decode()
	if n := testing.AllocsPerRun(20, decode); n != 0 {
		t.Errorf("%v allocations per three decodes into a recycled reply; want 0", n)
	}
	if got := len(r.Rows); got != 51 || len(r.Rows[0].Cells) != 1 || len(r.Rows[50].Cells) != 2 {
		t.Errorf("decoded %d rows, first with %d cells", got, len(r.Rows[0].Cells))
	}
}
