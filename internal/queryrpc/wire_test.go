package queryrpc

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/eventide/eventide/reader"
	"github.com/eventide/eventide/storage"
)

func sampleRequests() []*sliceRequest {
	return []*sliceRequest{
		{Query: storage.SliceQuery{Table: "events", Partition: []byte("23112610|click")}},
		{Query: storage.SliceQuery{Table: "events", Partition: []byte("23112610|click|3"), Reverse: true, Limit: 51, MaxTombstones: 100000,
			Start: storage.Bound{Key: []byte{1, 2, 3}, Inclusive: true}, End: storage.Bound{Key: []byte{}}},
			Deadline: time.UnixMicro(1795000000123456), ByteBudget: 4096},
		{Query: storage.SliceQuery{Table: "t", Partition: []byte("p"), End: storage.Bound{Key: []byte{9}, Inclusive: true}}},
	}
}

func sampleReplies() []*sliceReply {
	return []*sliceReply{
		{},
		{More: true, Stats: storage.ReadStats{Rows: 2, LiveCells: 3, TombstonesScanned: 4, MemtablesRead: 1, SSTablesRead: 2, SSTablesSkipped: 3,
			SSTablesSkippedByBloom: 1, SSTablesSkippedExpired: 1, BlocksRead: 5, BlocksSkipped: 6},
			Rows: []storage.Row{
				{Clustering: []byte{0x80, 1}, Cells: []storage.Cell{
					{Column: []byte("data"), Value: []byte(`{"a":1}`), WriteTimeMicros: 1795000000000000, ExpiresAt: 1795600000, TTLSeconds: 604800},
					{Column: []byte("user"), Value: []byte{}, WriteTimeMicros: -5},
				}},
				{Clustering: []byte{}, Cells: []storage.Cell{{Column: []byte("count"), Value: []byte{}, Counter: true, CounterValue: -42}}},
			}},
	}
}

func TestSliceRequestRoundTrip(t *testing.T) {
	for i, want := range sampleRequests() {
		got, err := decodeSliceRequest(appendSliceRequest(nil, want))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if !got.Deadline.Equal(want.Deadline) {
			t.Errorf("request %d: deadline %v, want %v", i, got.Deadline, want.Deadline)
		}
		got.Deadline = want.Deadline
		if !reflect.DeepEqual(got, want) {
			t.Errorf("request %d: got %+v, want %+v", i, got, want)
		}
	}
}

func TestSliceReplyRoundTrip(t *testing.T) {
	for i, want := range sampleReplies() {
		got, err := decodeSliceReply(appendSliceReply(nil, want))
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if len(want.Rows) == 0 {
			want.Rows = []storage.Row{}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("reply %d: got %+v, want %+v", i, got, want)
		}
	}
}

func TestFreshnessAndHealthRoundTrip(t *testing.T) {
	want := &NodeFreshness{Writer: &ConsumerPosition{AppliedSeq: 7, AppliedTime: time.Unix(1795000000, 5).UTC(), Pending: 3, PendingKnown: true},
		Fanout: &ConsumerPosition{AppliedSeq: 1}, Shards: 8, Owned: []int{0, 3, 7}}
	got, err := decodeFreshnessReply(appendFreshnessReply(nil, want))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("freshness: got %+v, %v; want %+v", got, err, want)
	}
	notReady, err := decodeHealthReply(appendHealthReply(nil, nil))
	if err != nil || notReady != nil {
		t.Errorf("ready health: %v, %v", notReady, err)
	}
	notReady, err = decodeHealthReply(appendHealthReply(nil, errors.New("storage is closed")))
	if err != nil || notReady == nil || notReady.Error() != "storage is closed" {
		t.Errorf("not-ready health: %v, %v", notReady, err)
	}
}

func TestDecodersRefuseMalformed(t *testing.T) {
	req := appendSliceRequest(nil, sampleRequests()[1])
	reply := appendSliceReply(nil, sampleReplies()[1])
	for _, tc := range []struct {
		name string
		dec  func([]byte) error
		b    []byte
	}{
		{"request empty", decReq, nil},
		{"request version 2", decReq, append([]byte{2}, req[1:]...)},
		{"request truncated", decReq, req[:len(req)-1]},
		{"request trailing", decReq, append(append([]byte{}, req...), 0)},
		{"request inclusive without key", decReq, []byte{sliceRequestV1, 0, 0, 1, 't', 1, 'p', flagStartInclusive, 0, 0}},
		{"reply empty", decReply, nil},
		{"reply version 9", decReply, append([]byte{9}, reply[1:]...)},
		{"reply truncated", decReply, reply[:len(reply)-3]},
		{"reply huge row count", decReply, append(appendReplyHeader(nil, false, storage.ReadStats{}), 0xff, 0xff, 0xff, 0x7f)},
		{"freshness empty", decFresh, nil},
		{"freshness zero shards", decFresh, []byte{freshnessReplyV1, 0, 0, 0}},
		{"health bad ready", decHealth, []byte{healthReplyV1, 2, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.dec(tc.b); !errors.Is(err, ErrBadMessage) {
				t.Errorf("got %v, want an error wrapping ErrBadMessage", err)
			}
		})
	}
}

func decReq(b []byte) error   { _, err := decodeSliceRequest(b); return err }
func decReply(b []byte) error { _, err := decodeSliceReply(b); return err }
func decFresh(b []byte) error { _, err := decodeFreshnessReply(b); return err }
func decHealth(b []byte) error {
	_, err := decodeHealthReply(b)
	return err
}

func FuzzDecodeSliceRequest(f *testing.F) {
	for _, r := range sampleRequests() {
		f.Add(appendSliceRequest(nil, r))
	}
	f.Add([]byte{sliceRequestV1, 0, 0, 1, 't', 1, 'p', flagStartInclusive})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeSliceRequest(b)
		if err != nil {
			if !errors.Is(err, ErrBadMessage) {
				t.Fatalf("error %v does not wrap ErrBadMessage", err)
			}
			return
		}
		// What decodes re-encodes to the same bytes, except a deadline
		// and budget that were not canonical varints (never produced).
		again, err := decodeSliceRequest(appendSliceRequest(nil, r))
		if err != nil {
			t.Fatalf("re-encoded request does not decode: %v", err)
		}
		if !reflect.DeepEqual(again.Query, r.Query) {
			t.Fatalf("round trip changed the query: %+v -> %+v", r.Query, again.Query)
		}
	})
}

func FuzzDecodeSliceReply(f *testing.F) {
	for _, r := range sampleReplies() {
		f.Add(appendSliceReply(nil, r))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeSliceReply(b)
		if err != nil {
			if !errors.Is(err, ErrBadMessage) {
				t.Fatalf("error %v does not wrap ErrBadMessage", err)
			}
			return
		}
		again, err := decodeSliceReply(appendSliceReply(nil, r))
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("round trip: %+v -> %+v, %v", r, again, err)
		}
	})
}

func FuzzDecodeFreshnessReply(f *testing.F) {
	f.Add(appendFreshnessReply(nil, &NodeFreshness{Writer: &ConsumerPosition{AppliedSeq: 9, PendingKnown: true, Pending: 2}, Shards: 4, Owned: []int{1, 2}}))
	f.Add(appendFreshnessReply(nil, &NodeFreshness{Shards: 1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeFreshnessReply(b)
		if err != nil {
			if !errors.Is(err, ErrBadMessage) {
				t.Fatalf("error %v does not wrap ErrBadMessage", err)
			}
			return
		}
		if _, err := decodeFreshnessReply(appendFreshnessReply(nil, r)); err != nil {
			t.Fatalf("re-encoded reply does not decode: %v", err)
		}
	})
}

func FuzzDecodeHealthReply(f *testing.F) {
	f.Add(appendHealthReply(nil, nil))
	f.Add(appendHealthReply(nil, errors.New("writer: not connected")))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := decodeHealthReply(b); err != nil && !errors.Is(err, ErrBadMessage) {
			t.Fatalf("error %v does not wrap ErrBadMessage", err)
		}
	})
}

func FuzzDecodeStatsReply(f *testing.F) {
	f.Add([]byte(`{"version":1,"node":"a","shards":4,"owned":[0,1],"storage":{"Tables":[{"Name":"events"}],"Batches":3},"writer":{"AppliedSeq":9}}`))
	f.Add([]byte(`{"version":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeStatsReply(b)
		if err != nil {
			if !errors.Is(err, ErrBadMessage) {
				t.Fatalf("error %v does not wrap ErrBadMessage", err)
			}
			return
		}
		if st.Shards < 1 || len(st.Owned) > st.Shards {
			t.Fatalf("accepted %d owned of %d shards", len(st.Owned), st.Shards)
		}
	})
}

// TestSliceReplyRowsDoNotShareCapacity: the decoded rows' cells share one
// slab, so an append to one row's cells (the scattered merge appends)
// must not overwrite the next row's.
func TestSliceReplyRowsDoNotShareCapacity(t *testing.T) {
	got, err := decodeSliceReply(appendSliceReply(nil, latestReply()))
	if err != nil {
		t.Fatal(err)
	}
	want := latestReply()
	_ = append(got.Rows[0].Cells, storage.Cell{Column: []byte("extra")})
	if !reflect.DeepEqual(got.Rows[1], want.Rows[1]) {
		t.Fatalf("row 1 changed by an append to row 0: %+v", got.Rows[1])
	}
}

func sampleWalkRequests() []*walkRequest {
	return []*walkRequest{
		{Walk: reader.Walk{Table: "events", Groups: [][][]byte{{[]byte("24112602|click")}}}},
		{Walk: reader.Walk{Table: "events", Reverse: true, Limit: 51, MaxTombstones: 100000,
			Start: storage.Bound{Key: []byte{1, 2}, Inclusive: true}, End: storage.Bound{Key: []byte{}},
			Groups: [][][]byte{{[]byte("24112602|hot|0"), []byte("24112602|hot|1")}, {[]byte("24112601|hot|0")}}},
			Deadline: time.UnixMicro(1795000000123456), ByteBudget: 300},
	}
}

func TestWalkRoundTrip(t *testing.T) {
	for i, want := range sampleWalkRequests() {
		got, err := decodeWalkRequest(appendWalkRequest(nil, want))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if !got.Deadline.Equal(want.Deadline) {
			t.Errorf("request %d: deadline %v, want %v", i, got.Deadline, want.Deadline)
		}
		got.Deadline = want.Deadline
		if !reflect.DeepEqual(got, want) {
			t.Errorf("request %d: got %+v, want %+v", i, got, want)
		}
	}
	rows := latestReply().Rows
	msg := appendWalkReplyHeader(nil, true, &reader.Trace{Rows: 3, LiveCells: 6, Tombstones: 2, Partitions: 5, Blocks: 1})
	msg = appendUvarint(msg, 3)
	for i, g := range []int{0, 0, 2} {
		msg = appendWalkRow(msg, g, &rows[i])
	}
	got, err := decodeWalkReply(msg, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !got.More || !reflect.DeepEqual(got.Groups, []int{0, 0, 2}) || !reflect.DeepEqual(got.Rows, rows[:3]) ||
		got.trace() != (reader.Trace{Rows: 3, LiveCells: 6, Tombstones: 2, Partitions: 5, Blocks: 1}) {
		t.Errorf("walk reply: got %+v", got)
	}
	if _, err := decodeWalkReply(msg, 2); !errors.Is(err, ErrBadMessage) {
		t.Errorf("a row of group 2 in a walk of 2 groups: err %v, want ErrBadMessage", err)
	}
}

func FuzzDecodeWalkRequest(f *testing.F) {
	for _, r := range sampleWalkRequests() {
		f.Add(appendWalkRequest(nil, r))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeWalkRequest(b)
		if err != nil {
			if !errors.Is(err, ErrBadMessage) {
				t.Fatalf("error %v does not wrap ErrBadMessage", err)
			}
			return
		}
		again, err := decodeWalkRequest(appendWalkRequest(nil, r))
		if err != nil {
			t.Fatalf("round trip: %v", err)
		}
		again.Deadline, r.Deadline = time.Time{}, time.Time{}
		if !reflect.DeepEqual(again, r) {
			t.Fatalf("round trip changed the walk: %+v -> %+v", r, again)
		}
	})
}

func FuzzDecodeWalkReply(f *testing.F) {
	rows := latestReply().Rows
	msg := appendWalkReplyHeader(nil, false, &reader.Trace{Rows: 2, Partitions: 1})
	msg = appendUvarint(msg, 2)
	msg = appendWalkRow(msg, 0, &rows[0])
	msg = appendWalkRow(msg, 1, &rows[1])
	f.Add(msg, 2)
	f.Add(appendUvarint(appendWalkReplyHeader(nil, true, &reader.Trace{}), 0), 1)
	f.Fuzz(func(t *testing.T, b []byte, groups int) {
		r, err := decodeWalkReply(b, groups)
		if err != nil {
			if !errors.Is(err, ErrBadMessage) {
				t.Fatalf("error %v does not wrap ErrBadMessage", err)
			}
			return
		}
		if len(r.Groups) != len(r.Rows) {
			t.Fatalf("%d groups for %d rows", len(r.Groups), len(r.Rows))
		}
		for i, g := range r.Groups {
			if g < 0 || g >= groups || i > 0 && g < r.Groups[i-1] {
				t.Fatalf("row %d: group %d of %d, after %v", i, g, groups, r.Groups[:i])
			}
		}
		// Decoded into a reply that held another one (the client
		// recycles them), the same message decodes the same.
		reused := &walkReply{}
		if err := decodeWalkReplyInto(seedWalkReply, 2, reused); err != nil {
			t.Fatal(err)
		}
		if err := decodeWalkReplyInto(b, groups, reused); err != nil {
			t.Fatalf("decoded fresh, failed reused: %v", err)
		}
		if !sameWalkReply(r, reused) {
			t.Fatalf("decoded reused %+v, fresh %+v", reused, r)
		}
	})
}

// seedWalkReply is a walk reply of two rows in groups 0 and 1.
var seedWalkReply = func() []byte {
	rows := latestReply().Rows
	msg := appendWalkReplyHeader(nil, true, &reader.Trace{Rows: 2, Partitions: 1, Tombstones: 3})
	msg = appendUvarint(msg, 2)
	msg = appendWalkRow(msg, 0, &rows[0])
	return appendWalkRow(msg, 1, &rows[1])
}()

// sameWalkReply compares what a walk reply says, not the room its slices
// have.
func sameWalkReply(a, b *walkReply) bool {
	if a.More != b.More || a.Stats != b.Stats || a.Partitions != b.Partitions || !slices.Equal(a.Groups, b.Groups) || len(a.Rows) != len(b.Rows) {
		return false
	}
	for i := range a.Rows {
		x, y := a.Rows[i], b.Rows[i]
		if !bytes.Equal(x.Clustering, y.Clustering) || len(x.Cells) != len(y.Cells) {
			return false
		}
		for j := range x.Cells {
			cx, cy := x.Cells[j], y.Cells[j]
			if !bytes.Equal(cx.Column, cy.Column) || !bytes.Equal(cx.Value, cy.Value) || cx.WriteTimeMicros != cy.WriteTimeMicros ||
				cx.ExpiresAt != cy.ExpiresAt || cx.TTLSeconds != cy.TTLSeconds || cx.Counter != cy.Counter || cx.CounterValue != cy.CounterValue {
				return false
			}
		}
	}
	return true
}
