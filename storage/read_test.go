package storage

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestSliceOpensLaterSSTablesOnlyWhenReached writes one partition as two
// SSTables, the way TimeWindow leaves an hour that straddles two files,
// and checks that a slice positions (and so reads a block of) the second
// file only when its rows can be among those returned.
func TestSliceOpensLaterSSTablesOnlyWhenReached(t *testing.T) {
	key := func(i int) []byte { return fmt.Appendf(nil, "k%03d", i) }
	tests := []struct {
		name             string
		first, second    [2]int // clustering key ranges [lo, hi] of the two files
		q                SliceQuery
		wantRows         string
		wantRead, wantSk int // SSTables read and skipped
	}{
		{
			name:  "limit met by the first file",
			first: [2]int{0, 9}, second: [2]int{10, 19},
			q:        SliceQuery{Limit: 3},
			wantRows: "k000 k001 k002", wantRead: 1, wantSk: 1,
		},
		{
			name:  "limit met by the file written second",
			first: [2]int{10, 19}, second: [2]int{0, 9},
			q:        SliceQuery{Limit: 3},
			wantRows: "k000 k001 k002", wantRead: 1, wantSk: 1,
		},
		{
			name:  "reverse, limit met by the last file",
			first: [2]int{0, 9}, second: [2]int{10, 19},
			q:        SliceQuery{Limit: 2, Reverse: true},
			wantRows: "k019 k018", wantRead: 1, wantSk: 1,
		},
		{
			name:  "limit crosses into the second file",
			first: [2]int{0, 9}, second: [2]int{10, 19},
			q:        SliceQuery{Limit: 11},
			wantRows: "k000 k001 k002 k003 k004 k005 k006 k007 k008 k009 k010", wantRead: 2,
		},
		{
			// The limit is met at k009, but the merge must look at the
			// next row to know k009 ended: that row is k010.
			name:  "lookahead reaches the second file",
			first: [2]int{0, 9}, second: [2]int{10, 19},
			q:        SliceQuery{Limit: 10},
			wantRows: "k000 k001 k002 k003 k004 k005 k006 k007 k008 k009", wantRead: 2,
		},
		{
			name:  "overlapping files are both read",
			first: [2]int{0, 9}, second: [2]int{1, 19},
			q:        SliceQuery{Limit: 2},
			wantRows: "k000 k001", wantRead: 2,
		},
		{
			name:  "bounds start inside the second file",
			first: [2]int{0, 9}, second: [2]int{10, 19},
			q:        SliceQuery{Start: Bound{Key: key(12), Inclusive: true}, Limit: 2},
			wantRows: "k012 k013", wantRead: 1, wantSk: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
			db := openTestDB(t, clock, TableDef{Name: "t"})
			for _, r := range [][2]int{tc.first, tc.second} {
				apply(t, db, func(b *Batch) {
					for i := r[0]; i <= r[1]; i++ {
						b.Put("t", []byte("p"), key(i), []byte("c"), []byte("v"), int64(100+i))
					}
				})
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			q := tc.q
			q.Table, q.Partition = "t", []byte("p")
			rows, stats := readAll(t, db, q)
			var got []string
			for _, r := range rows {
				got = append(got, string(r.Clustering))
			}
			if g := strings.Join(got, " "); g != tc.wantRows {
				t.Errorf("rows: got %q, want %q", g, tc.wantRows)
			}
			if stats.SSTablesRead != tc.wantRead || stats.SSTablesSkipped != tc.wantSk || stats.BlocksRead != tc.wantRead {
				t.Errorf("got %s, %d SSTables skipped; want %d read (one block each), %d skipped", stats, stats.SSTablesSkipped, tc.wantRead, tc.wantSk)
			}
		})
	}
}
