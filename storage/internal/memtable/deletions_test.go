package memtable

import (
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/eventide/eventide/storage/internal/base"
)

func rowTombstone(i int, ts int64) base.RangeTombstone {
	k := binary.BigEndian.AppendUint64(nil, uint64(i))
	return base.RangeTombstone{Start: base.Bound{Key: k, Inclusive: true}, End: base.Bound{Key: k, Inclusive: true},
		Deletion: base.DeletionTime{MarkedForDeleteAt: ts, LocalDeletionTime: 1}}
}

// TestRangeTombstonesAppend checks that adding a row tombstone to a
// partition that holds many does not copy them: applying 2,000 more to a
// partition of 20,000 allocates about what the 2,000 weigh. (Copying the
// list on each insert, as the memtable once did, allocated ~2,000 x
// 20,000 x 72 bytes, about 2.9 GB, and made DeleteRow quadratic.)
func TestRangeTombstonesAppend(t *testing.T) {
	m := New()
	pk := []byte("p")
	for i := 0; i < 20_000; i++ {
		m.ApplyRangeTombstone(1, pk, rowTombstone(i, 1))
	}
	if d := m.Deletions(1, pk); d == nil || len(d.Ranges) != 20_000 {
		t.Fatalf("got %v fragments", d)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 20_000; i < 22_000; i++ {
		m.ApplyRangeTombstone(1, pk, rowTombstone(i, 1))
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Fatalf("2,000 row tombstones allocated %d bytes", got)
	}
}

// TestDeletionsView checks what readers get: fragments of everything
// applied, a view that does not change under a reader's feet, and the
// partition deletion.
func TestDeletionsView(t *testing.T) {
	m := New()
	pk := []byte("p")
	m.ApplyRangeTombstone(1, pk, rowTombstone(5, 10))
	m.ApplyRangeTombstone(1, pk, rowTombstone(1, 10))
	first := m.Deletions(1, pk)
	if !base.IsFragmented(first.Ranges) || len(first.Ranges) != 2 || !first.Partition.IsLive() {
		t.Fatalf("got %+v", first)
	}
	if again := m.Deletions(1, pk); again != first {
		t.Fatal("an unchanged partition built a new view")
	}
	wide := base.RangeTombstone{Start: base.Bound{Key: binary.BigEndian.AppendUint64(nil, 0), Inclusive: true}, End: base.Unbounded,
		Deletion: base.DeletionTime{MarkedForDeleteAt: 20, LocalDeletionTime: 1}}
	m.ApplyRangeTombstone(1, pk, wide)
	m.ApplyPartitionDeletion(1, pk, base.DeletionTime{MarkedForDeleteAt: 3, LocalDeletionTime: 1})
	if len(first.Ranges) != 2 || first.Ranges[0].Deletion.MarkedForDeleteAt != 10 {
		t.Fatalf("an older view changed: %+v", first)
	}
	next := m.Deletions(1, pk)
	if len(next.Ranges) != 1 || next.Ranges[0].Deletion.MarkedForDeleteAt != 20 || next.Partition.MarkedForDeleteAt != 3 {
		t.Fatalf("got %+v, want one fragment at 20 and the partition deletion at 3", next)
	}
	if m.Deletions(1, []byte("q")) != nil || !m.HasPartition(1, pk) {
		t.Fatal("partitions mixed up")
	}
}

// TestDeletionsConcurrentReaders runs readers against the writer: each
// view a reader gets is fragmented, never shrinks, and stays as it was
// while the writer goes on (run it with -race).
func TestDeletionsConcurrentReaders(t *testing.T) {
	m := New()
	pk := []byte("p")
	const n = 5000
	done := make(chan struct{})
	errs := make(chan string, 4)
	for r := 0; r < 3; r++ {
		go func() {
			last := 0
			for {
				select {
				case <-done:
					errs <- ""
					return
				default:
				}
				d := m.Deletions(1, pk)
				if d == nil {
					continue
				}
				got := len(d.Ranges)
				snapshot := d.Ranges[got-1].Deletion
				if !base.IsFragmented(d.Ranges) || got < last {
					errs <- "a view is not fragmented or shrank"
					return
				}
				last = got
				if d.Ranges[got-1].Deletion != snapshot || len(d.Ranges) != got {
					errs <- "a view changed under its reader"
					return
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		m.ApplyRangeTombstone(1, pk, rowTombstone(i, int64(i)))
	}
	close(done)
	for r := 0; r < 3; r++ {
		if e := <-errs; e != "" {
			t.Fatal(e)
		}
	}
	if d := m.Deletions(1, pk); len(d.Ranges) != n {
		t.Fatalf("%d fragments, want %d", len(d.Ranges), n)
	}
}
