package reader

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestTombstoneBudgetAcrossPartitions spreads a query's tombstones over
// many partitions (hour buckets and sub-partitions for events, hour
// buckets for counts; memtable and several SSTables of one partition for a
// generic slice, which reads one partition) so that no partition alone
// passes the budget. The query must pass with FailTombstones equal to the
// total and fail with one less, whatever the split.
func TestTombstoneBudgetAcrossPartitions(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC)
	deleteAt := now.UnixMicro()
	types := &schema.EventTypes{Types: map[string]schema.TypeSettings{"hot": {SubPartitions: 4}}}
	tests := []struct {
		name  string
		fill  func(t *testing.T, db *storage.DB) (total int)
		query func(r *Reader) (*Trace, error)
	}{
		{
			name: "events over 8 hours of 4 sub-partitions",
			fill: func(t *testing.T, db *storage.DB) int {
				var b storage.Batch
				n := 0
				for h := range 8 {
					for i := range 40 {
						at := now.Add(-time.Duration(h)*time.Hour - time.Duration(i+1)*time.Second)
						id, _ := bucket.NewTimeUUID(at, [8]byte{4, byte(i), byte(h)})
						pk, _ := bucket.PartitionKeyFor(id, "hot", 4)
						b.DeleteRow(schema.EventsTable, []byte(pk.String()), schema.EventClusteringKey(id), deleteAt)
						n++
					}
					if h%3 == 0 {
						mustApply(t, db, &b)
						b.Reset()
						if err := db.Flush(); err != nil {
							t.Fatal(err)
						}
					}
				}
				mustApply(t, db, &b)
				return n
			},
			query: func(r *Reader) (*Trace, error) {
				page, err := r.Events(context.Background(), EventQuery{Type: "hot", From: now.Add(-9 * time.Hour), To: now, Trace: true})
				if err != nil {
					return nil, err
				}
				return page.Trace, nil
			},
		},
		{
			name: "counts over 10 hours",
			fill: func(t *testing.T, db *storage.DB) int {
				var b storage.Batch
				n := 0
				for h := range 10 {
					for m := range 30 {
						minute := now.Truncate(time.Hour).Add(-time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
						p, err := schema.CountsPartition("click", minute)
						if err != nil {
							t.Fatal(err)
						}
						ck, err := schema.CountsClustering.Encode(nil, minute)
						if err != nil {
							t.Fatal(err)
						}
						b.DeleteRow(schema.CountsTable, p, ck, deleteAt)
						n++
					}
				}
				mustApply(t, db, &b)
				return n
			},
			query: func(r *Reader) (*Trace, error) {
				_, trace, err := r.CountsTrace(context.Background(), CountQuery{Type: "click", From: now.Add(-10 * time.Hour), To: now, Step: time.Hour})
				return trace, err
			},
		},
		{
			name: "slice over a memtable and 4 SSTables",
			fill: func(t *testing.T, db *storage.DB) int {
				tbl, err := sliceBudgetCatalog(t, db).Table("readings")
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for f := range 5 {
					var b storage.Batch
					for i := range 50 {
						if err := catalog.DeleteRow(&b, tbl, schema.Values{"sensor": "s1", "seq": int64(f*1000 + i)}, deleteAt); err != nil {
							t.Fatal(err)
						}
						n++
					}
					mustApply(t, db, &b)
					if f < 4 {
						if err := db.Flush(); err != nil {
							t.Fatal(err)
						}
					}
				}
				return n
			},
			query: func(r *Reader) (*Trace, error) {
				page, err := r.Slice(context.Background(), SliceQuery{Table: "readings", Partition: []any{"s1"}, Trace: true})
				if err != nil {
					return nil, err
				}
				return page.Trace, nil
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fixedClock{now: now}
			db := openStore(t, clock)
			cat := sliceBudgetCatalog(t, db)
			total := tc.fill(t, db)
			// ParallelHours 4: counts slice their hours in parallel (as
			// through cmd/query), each with the whole budget, and still
			// fail exactly when the total passes it.
			for _, run := range []struct{ fail, parallel int }{{total, 0}, {total - 1, 0}, {total / 3, 0}, {total, 4}, {total - 1, 4}, {total / 3, 4}} {
				fail := run.fail
				r, err := New(db, Options{Now: clock.Now, Types: types, Catalog: cat, FailTombstones: fail, ParallelHours: run.parallel})
				if err != nil {
					t.Fatal(err)
				}
				trace, err := tc.query(r)
				switch {
				case fail >= total && err != nil:
					t.Fatalf("FailTombstones %d, %d tombstones: %v", fail, total, err)
				case fail >= total && trace.Tombstones != total:
					t.Fatalf("trace counts %d tombstones, want %d", trace.Tombstones, total)
				case fail < total && !errors.Is(err, ErrTooManyTombstones):
					t.Fatalf("FailTombstones %d, %d tombstones: got %v, want ErrTooManyTombstones", fail, total, err)
				}
			}
		})
	}
}

// sliceBudgetCatalog opens the catalog of db with the table "readings"
// (sensor text, seq bigint).
func sliceBudgetCatalog(t *testing.T, db *storage.DB) *catalog.Catalog {
	t.Helper()
	cat, err := catalog.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat.Table("readings"); err == nil {
		return cat
	}
	tbl := schema.Table{Name: "readings", PartitionKey: []schema.Column{{Name: "sensor", Type: bucket.TypeText}},
		Clustering: bucket.ClusteringLayout{{Name: "seq", Type: bucket.TypeBigint}},
		Columns:    []schema.Column{{Name: "v", Type: bucket.TypeDouble}}}
	if err := cat.Create(tbl); err != nil {
		t.Fatal(err)
	}
	return cat
}

// TestQueriesStopWhenContextDone checks every kind of query returns an
// error wrapping its context's error once the context is done.
func TestQueriesStopWhenContextDone(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC)
	clock := &fixedClock{now: now}
	db := openStore(t, clock)
	r, err := New(db, Options{Now: clock.Now, Catalog: sliceBudgetCatalog(t, db)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(-time.Hour))
	defer cancel()
	_, errEvents := r.Events(ctx, EventQuery{Type: "click", From: now.Add(-time.Hour), To: now})
	_, errCounts := r.Counts(ctx, CountQuery{Type: "click", From: now.Add(-time.Hour), To: now})
	_, errSlice := r.Slice(ctx, SliceQuery{Table: "readings", Partition: []any{"s1"}})
	for name, err := range map[string]error{"events": errEvents, "counts": errCounts, "slice": errSlice} {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: got %v, want context.DeadlineExceeded", name, err)
		}
		if got := testutil.ToFloat64(r.metrics.queries.WithLabelValues(name, "canceled")); got != 1 {
			t.Errorf("%s: %v queries counted as canceled, want 1", name, got)
		}
	}
}
