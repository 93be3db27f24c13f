package fanout

import (
	"math"
	"testing"

	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

// FuzzParsePostID: any data either yields a version 1 id or a skip reason;
// never both, never a panic.
func FuzzParsePostID(f *testing.F) {
	for _, s := range []string{
		`{"post_id":"353c91a0-e705-11f0-9234-0123456789ab"}`,
		`{"post_id":"9a3e2f7c-1d2b-4c5e-8f6a-0b1c2d3e4f50"}`,
		`{"post_id":""}`, `{"post_id":null}`, `{"post_id":7}`, `{}`, `[]`, `not json`, ``,
		`{"post_id":"urn:uuid:353c91a0-e705-11f0-9234-0123456789ab"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		id, reason := parsePostID(data)
		switch {
		case reason == "" && id.Version() != 1:
			t.Fatalf("accepted %s, not a version 1 UUID", id)
		case reason != "" && reason != SkipMissingPostID && reason != SkipInvalidPostID:
			t.Fatalf("unknown reason %q", reason)
		}
	})
}

// FuzzDecodeJob: any row of _fanout_jobs either decodes into a job a
// worker can run or is an error; never a panic.
func FuzzDecodeJob(f *testing.F) {
	id := [16]byte{0x35, 0x3c, 0x91, 0xa0, 0xe7, 0x05, 0x11, 0xf0, 0x92, 0x34, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab}
	f.Add(catalog.JobKey(1<<16, 0), catalog.TextValue("post"), catalog.TextValue("a"), catalog.TimeUUIDValue(id), catalog.BigintValue(3), catalog.TextValue("f1"), int32(1))
	f.Add(catalog.JobKey(5<<16, 2), catalog.TextValue("delete"), catalog.TextValue("a"), catalog.TimeUUIDValue(id), catalog.BigintValue(0), []byte{}, int32(3))
	f.Add([]byte{1, 2}, []byte("x"), []byte{}, []byte{3}, []byte{6, 0}, []byte{3, 0xff}, int32(-1))
	f.Fuzz(func(t *testing.T, key, kind, author, postID, followers, cursor []byte, shards int32) {
		row := storage.Row{Clustering: key, Cells: []storage.Cell{
			{Column: []byte(catalog.ColKind), Value: kind},
			{Column: []byte(catalog.ColAuthor), Value: author},
			{Column: []byte(catalog.ColPostID), Value: postID},
			{Column: []byte(catalog.ColFollowers), Value: followers},
			{Column: []byte(catalog.ColCursor), Value: cursor},
			{Column: []byte(catalog.ColShards), Value: catalog.IntValue(shards)},
		}}
		j, err := decodeJob(&row)
		if err != nil {
			return
		}
		if j.author == "" || j.postID.Version() != 1 || (j.kind != catalog.JobKindPost && j.kind != catalog.JobKindDelete) ||
			j.Shard < 0 || j.Shard >= j.shards {
			t.Fatalf("decoded an unusable job %+v", j)
		}
	})
}

// FuzzSinceNewer: comparing a stored since with a job timestamp as stored
// agrees with decoding it, for every bigint and for any bytes.
func FuzzSinceNewer(f *testing.F) {
	for _, v := range [][2]int64{{0, 0}, {1, 0}, {0, 1}, {-1, 1}, {1 << 56, 1<<56 + 1}, {math.MaxInt64, math.MinInt64}, {math.MinInt64, -1}} {
		f.Add(v[0], v[1], []byte(nil))
	}
	f.Add(int64(5), int64(7), []byte{})
	f.Add(int64(5), int64(7), catalog.TextValue("not a bigint"))
	f.Add(int64(5), int64(7), catalog.IntValue(9))
	f.Fuzz(func(t *testing.T, since, job int64, raw []byte) {
		jobStored := catalog.BigintValue(job)
		newer, err := sinceNewer(catalog.BigintValue(since), jobStored, job)
		if err != nil || newer != (since > job) {
			t.Fatalf("since %d, job %d: newer %v, %v; want %v", since, job, newer, err, since > job)
		}
		if raw == nil {
			return
		}
		newer, err = sinceNewer(raw, jobStored, job)
		want, werr := catalog.DecodeBigint(raw)
		if (err != nil) != (werr != nil) || err == nil && newer != (want > job) {
			t.Fatalf("raw %x, job %d: newer %v, %v; decoded %d, %v", raw, job, newer, err, want, werr)
		}
	})
}
