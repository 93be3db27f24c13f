package reader

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

// TestCountsAgainstBruteForce adds counts at random minutes over three
// hours and checks every window and step against a direct sum.
func TestCountsAgainstBruteForce(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	clock := &fixedClock{now: now}
	db := openStore(t, clock)
	rng := rand.New(rand.NewPCG(1, 2))
	perMinute := map[time.Time]int64{}
	var b storage.Batch
	for range 2000 {
		at := now.Add(-time.Duration(rng.Int64N(int64(3 * time.Hour))))
		if err := catalog.AddCount(&b, "click", at, 1); err != nil {
			t.Fatal(err)
		}
		perMinute[at.Truncate(time.Minute)]++
		if err := catalog.AddCount(&b, "view", at, 5); err != nil { // another type must not leak in
			t.Fatal(err)
		}
	}
	mustApply(t, db, &b)
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	r, err := New(db, Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	// The same queries with the hours sliced in parallel (as cmd/query
	// does) answer the same.
	parallel, err := New(db, Options{Now: clock.Now, ParallelHours: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		r := r
		if i%2 == 1 {
			r = parallel
		}
		step := []time.Duration{time.Minute, 5 * time.Minute, time.Hour}[rng.IntN(3)]
		from := now.Add(-time.Duration(rng.Int64N(int64(4 * time.Hour))))
		to := from.Add(time.Duration(1 + rng.Int64N(int64(3*time.Hour))))
		points, err := r.Counts(context.Background(), CountQuery{Type: "click", From: from, To: to, Step: step})
		if err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
		start := from.Truncate(step)
		for j, p := range points {
			if want := start.Add(time.Duration(j) * step); !p.Time.Equal(want) {
				t.Fatalf("query %d point %d at %s, want %s", i, j, p.Time, want)
			}
			var want int64
			for m := p.Time; m.Before(p.Time.Add(step)) && m.Before(to); m = m.Add(time.Minute) {
				want += perMinute[m]
			}
			if p.Count != want {
				t.Fatalf("query %d (%s..%s step %s) point %s: count %d, want %d", i, from, to, step, p.Time, p.Count, want)
			}
		}
		if last := points[len(points)-1].Time; !last.Before(to) || last.Add(step).Before(to) {
			t.Fatalf("query %d: last point %s does not cover to %s", i, last, to)
		}
	}
	bad := []struct {
		q    CountQuery
		want string
	}{
		{CountQuery{Type: "click", From: now, To: now.Add(-time.Hour)}, "is not before to"},
		{CountQuery{Type: "click", From: now.Add(-time.Hour), To: now, Step: 30 * time.Second}, "not a whole number of minutes"},
		{CountQuery{Type: "click", From: now.Add(-60 * 24 * time.Hour), To: now, Step: time.Hour}, "hour buckets, more than the limit of 744"},
		{CountQuery{Type: "click", From: now.Add(-30 * 24 * time.Hour), To: now}, fmt.Sprintf("more than %d", MaxCountPoints)},
		{CountQuery{Type: "no way", From: now.Add(-time.Hour), To: now}, "parameter type"},
	}
	for _, tt := range bad {
		_, err := r.Counts(context.Background(), tt.q)
		if !errors.Is(err, ErrInvalidQuery) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: got %v, want ErrInvalidQuery containing %q", tt.q, err, tt.want)
		}
	}
}

// TestSlicePagingAgainstBruteForce pages random slices of a two-column
// clustering (ASC then DESC) with random page sizes and bounds, and checks
// the pages concatenate to the brute-force answer.
func TestSlicePagingAgainstBruteForce(t *testing.T) {
	clock := &fixedClock{now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	db := openStore(t, clock)
	cat, err := catalog.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	tbl := schema.Table{Name: "readings", PartitionKey: []schema.Column{{Name: "sensor", Type: bucket.TypeText}},
		Clustering: bucket.ClusteringLayout{{Name: "day", Type: bucket.TypeInt}, {Name: "seq", Type: bucket.TypeBigint, Order: bucket.Desc}},
		Columns:    []schema.Column{{Name: "v", Type: bucket.TypeDouble}}}
	if err := cat.Create(tbl); err != nil {
		t.Fatal(err)
	}
	type key struct {
		day int32
		seq int64
	}
	var rows []key
	var b storage.Batch
	for day := int32(0); day < 20; day++ {
		for seq := int64(0); seq < 30; seq++ {
			if (day+int32(seq))%5 == 0 {
				continue
			}
			rows = append(rows, key{day, seq})
			if err := catalog.Insert(&b, &tbl, schema.Values{"sensor": "s1", "day": day, "seq": seq, "v": float64(seq)}, schema.WriteOptions{TimestampMicros: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	mustApply(t, db, &b)
	// Clustering order: day ascending, then seq descending.
	slices.SortFunc(rows, func(a, b key) int {
		if a.day != b.day {
			return int(a.day - b.day)
		}
		return int(b.seq - a.seq)
	})
	r, err := New(db, Options{Catalog: cat, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 200 {
		q := SliceQuery{Table: "readings", Partition: []any{"s1"}, Reverse: rng.IntN(2) == 0}
		match := func(k key) bool { return true }
		switch rng.IntN(3) {
		case 1: // a range of days
			lo, hi := int32(rng.IntN(20)), int32(rng.IntN(20))
			loInc, hiInc := rng.IntN(2) == 0, rng.IntN(2) == 0
			q.Lower, q.Upper = &ValueBound{Value: lo, Inclusive: loInc}, &ValueBound{Value: hi, Inclusive: hiInc}
			match = func(k key) bool {
				return (k.day > lo || loInc && k.day == lo) && (k.day < hi || hiInc && k.day == hi)
			}
		case 2: // one day, a range of seq (a DESC column)
			day, lo := int32(rng.IntN(20)), int64(rng.IntN(30))
			inc := rng.IntN(2) == 0
			q.Equal = []any{day}
			q.Lower = &ValueBound{Value: lo, Inclusive: inc}
			match = func(k key) bool { return k.day == day && (k.seq > lo || inc && k.seq == lo) }
		}
		var want []string
		for _, k := range rows {
			if match(k) {
				want = append(want, fmt.Sprint(k.day, k.seq))
			}
		}
		if q.Reverse {
			slices.Reverse(want)
		}
		var got []string
		for pages := 0; ; pages++ {
			q.Limit = 1 + rng.IntN(40)
			page, err := r.Slice(context.Background(), q)
			if err != nil {
				t.Fatalf("query %d page %d: %v", i, pages, err)
			}
			for _, row := range page.Rows {
				got = append(got, fmt.Sprint(row.Key[0], row.Key[1]))
			}
			if page.NextPage == "" {
				break
			}
			q.PageToken = page.NextPage
		}
		if !slices.Equal(got, want) {
			t.Fatalf("query %d %+v:\n got %v\nwant %v", i, q, got, want)
		}
	}
}

func TestSliceBadQueries(t *testing.T) {
	clock := &fixedClock{now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	db := openStore(t, clock)
	cat, err := catalog.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	tbl := schema.Table{Name: "authors", PartitionKey: []schema.Column{{Name: "name", Type: bucket.TypeText}},
		Clustering: bucket.ClusteringLayout{{Name: "year", Type: bucket.TypeInt, Order: bucket.Desc}, {Name: "title", Type: bucket.TypeText}}}
	if err := cat.Create(tbl); err != nil {
		t.Fatal(err)
	}
	r, err := New(db, Options{Catalog: cat, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ok := SliceQuery{Table: "authors", Partition: []any{"Tom Clancy"}}
	otherPartition := encodeToken(tokenKindSlice, fingerprint("slice", "authors", "Umberto Eco", "false"), nil)
	tests := []struct {
		name   string
		modify func(q *SliceQuery)
		want   string
	}{
		{"unknown table", func(q *SliceQuery) { q.Table = "books" }, `unknown table "books"`},
		{"missing partition key", func(q *SliceQuery) { q.Partition = nil }, "partition key has 1 columns (name), got 0 values"},
		{"wrong partition type", func(q *SliceQuery) { q.Partition = []any{int32(1)} }, "table authors column name: want text"},
		{"wrong clustering type", func(q *SliceQuery) { q.Equal = []any{"1993"} }, `"year" (int DESC)`},
		{"too many equalities", func(q *SliceQuery) { q.Equal = []any{int32(1), "a", "b"} }, "has 2 clustering columns, the query restricts 3"},
		{"range after full key", func(q *SliceQuery) {
			q.Equal = []any{int32(1), "a"}
			q.Lower = &ValueBound{Value: "b"}
		}, "a range needs a clustering column after the 2"},
		{"bad bound type", func(q *SliceQuery) { q.Lower = &ValueBound{Value: 1993} }, "want int32, got int"},
		{"token of another partition", func(q *SliceQuery) { q.PageToken = otherPartition }, "was issued for a different query"},
		{"events token", func(q *SliceQuery) { q.PageToken = encodeToken(tokenKindEvents, 1, nil) }, "not a token for this kind of query"},
		{"token with a bad key", func(q *SliceQuery) {
			q.PageToken = encodeToken(tokenKindSlice, fingerprint("slice", "authors", "Tom Clancy", "false"), []byte{1})
		}, "does not hold a key of table authors"},
		{"limit", func(q *SliceQuery) { q.Limit = -5 }, "limit -5 is outside"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := ok
			tt.modify(&q)
			_, err := r.Slice(context.Background(), q)
			if !errors.Is(err, ErrInvalidQuery) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want ErrInvalidQuery containing %q", err, tt.want)
			}
		})
	}
	noCatalog, _ := New(db, Options{Now: clock.Now})
	if _, err := noCatalog.Slice(context.Background(), ok); !errors.Is(err, ErrInvalidQuery) {
		t.Fatalf("reader without a catalog: %v", err)
	}
}
