package memtable

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"

	"github.com/eventide/eventide/storage/internal/base"
)

func live(ck, col string, ts int64, v string) *base.Cell {
	return &base.Cell{Clustering: []byte(ck), Column: []byte(col), Kind: base.KindLive, Timestamp: ts, LocalDeletionTime: base.NoDeletionTime, Value: []byte(v)}
}

func collect(it *Iter) []string {
	var out []string
	for it.Next() {
		c := it.Cell()
		out = append(out, fmt.Sprintf("%s/%s=%s", c.Clustering, c.Column, c.Value))
	}
	return out
}

func TestIterBounds(t *testing.T) {
	m := New()
	for _, ck := range []string{"a", "b", "c", "d"} {
		for _, col := range []string{"x", "y"} {
			m.ApplyCell(1, []byte("p"), live(ck, col, 1, ck+col))
		}
	}
	// Neighbouring partitions and tables must never leak in.
	m.ApplyCell(1, []byte("o"), live("a", "x", 1, "other"))
	m.ApplyCell(1, []byte("p\x00"), live("a", "x", 1, "other"))
	m.ApplyCell(2, []byte("p"), live("a", "x", 1, "other"))
	b := func(k string, inc bool) base.Bound { return base.Bound{Key: []byte(k), Inclusive: inc} }
	cases := []struct {
		name       string
		start, end base.Bound
		reverse    bool
		want       []string
	}{
		{"all", base.Unbounded, base.Unbounded, false, []string{"a/x=ax", "a/y=ay", "b/x=bx", "b/y=by", "c/x=cx", "c/y=cy", "d/x=dx", "d/y=dy"}},
		{"all reverse", base.Unbounded, base.Unbounded, true, []string{"d/y=dy", "d/x=dx", "c/y=cy", "c/x=cx", "b/y=by", "b/x=bx", "a/y=ay", "a/x=ax"}},
		{"[b, c]", b("b", true), b("c", true), false, []string{"b/x=bx", "b/y=by", "c/x=cx", "c/y=cy"}},
		{"(b, c]", b("b", false), b("c", true), false, []string{"c/x=cx", "c/y=cy"}},
		{"[b, c)", b("b", true), b("c", false), false, []string{"b/x=bx", "b/y=by"}},
		{"[b, c] reverse", b("b", true), b("c", true), true, []string{"c/y=cy", "c/x=cx", "b/y=by", "b/x=bx"}},
		{"(b, c) reverse", b("b", false), b("c", false), true, nil},
		{"[b, d) reverse", b("b", true), b("d", false), true, []string{"c/y=cy", "c/x=cx", "b/y=by", "b/x=bx"}},
		{"between keys", b("bb", true), b("cc", true), false, []string{"c/x=cx", "c/y=cy"}},
		{"empty range", b("c", true), b("b", true), false, nil},
	}
	for _, tc := range cases {
		got := collect(m.NewIter(1, []byte("p"), tc.start, tc.end, tc.reverse))
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestApplyReconciles(t *testing.T) {
	m := New()
	m.ApplyCell(1, []byte("p"), live("a", "x", 5, "new"))
	m.ApplyCell(1, []byte("p"), live("a", "x", 3, "old"))
	m.ApplyCell(1, []byte("p"), live("a", "x", 5, "mew")) // tie, smaller value
	got := collect(m.NewIter(1, []byte("p"), base.Unbounded, base.Unbounded, false))
	if fmt.Sprint(got) != "[a/x=new]" {
		t.Fatalf("got %v", got)
	}
	if m.Cells() != 1 {
		t.Fatalf("Cells = %d, want 1", m.Cells())
	}
	if m.MinTimestamp() != 3 || m.MaxTimestamp() != 5 {
		t.Fatalf("timestamps [%d, %d], want [3, 5]", m.MinTimestamp(), m.MaxTimestamp())
	}
}

func TestTableIterAndDeletionPartitions(t *testing.T) {
	m := New()
	m.ApplyCell(1, []byte("b"), live("a", "x", 1, "v"))
	m.ApplyPartitionDeletion(1, []byte("a"), base.DeletionTime{MarkedForDeleteAt: 2, LocalDeletionTime: 3})
	m.ApplyRangeTombstone(1, []byte("b"), base.RangeTombstone{Start: base.Unbounded, End: base.Unbounded, Deletion: base.DeletionTime{MarkedForDeleteAt: 2}})
	m.ApplyCell(2, []byte("c"), live("a", "x", 1, "v"))
	m.ApplyCell(1, []byte("b"), live("a", "w", 1, "v"))
	m.ApplyCell(1, []byte("a2"), live("z", "x", 1, "v"))
	if got := fmt.Sprintf("%q", m.DeletionPartitions(1)); got != `["a" "b"]` {
		t.Fatalf("DeletionPartitions(1) = %s", got)
	}
	for table, want := range map[uint32]string{1: "[a2:z/x b:a/w b:a/x]", 2: "[c:a/x]", 3: "[]"} {
		var got []string
		for it := m.NewTableIter(table); it.Next(); {
			got = append(got, fmt.Sprintf("%s:%s/%s", it.Partition(), it.Cell().Clustering, it.Cell().Column))
		}
		if fmt.Sprint(got) != want {
			t.Errorf("table %d: TableIter gives %v, want %s", table, got, want)
		}
	}
	if got := fmt.Sprint(m.Tables()); got != "[1 2]" {
		t.Fatalf("Tables = %s", got)
	}
	if d := m.Deletions(1, []byte("b")); d == nil || len(d.Ranges) != 1 {
		t.Fatalf("Deletions(b) = %+v", d)
	}
	if !m.HasPartition(1, []byte("a")) || m.HasPartition(1, []byte("z")) {
		t.Fatal("HasPartition wrong")
	}
}

// TestRandomAgainstSortedMap checks iteration in both directions with
// random bounds against a sorted slice, with a concurrent reader running
// while the writer inserts (run with -race).
func TestRandomAgainstSortedMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	m := New()
	ref := map[string]string{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, reverse := range []bool{false, true} {
				prev := []byte(nil)
				it := m.NewIter(1, []byte("p"), base.Unbounded, base.Unbounded, reverse)
				for it.Next() {
					k := append(bytes.Clone(it.Cell().Clustering), it.Cell().Column...)
					if prev != nil && (bytes.Compare(prev, k) >= 0) != reverse {
						t.Errorf("concurrent reader (reverse=%v) saw %q after %q", reverse, k, prev)
						return
					}
					prev = k
				}
			}
		}
	}()
	for i := 0; i < 5000; i++ {
		ck := fmt.Sprintf("%03d", rng.IntN(500))
		v := fmt.Sprint(i)
		m.ApplyCell(1, []byte("p"), live(ck, "c", int64(i), v))
		ref[ck] = v
	}
	close(stop)
	wg.Wait()
	keys := make([]string, 0, len(ref))
	for k := range ref {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for trial := 0; trial < 200; trial++ {
		lo, hi := fmt.Sprintf("%03d", rng.IntN(520)), fmt.Sprintf("%03d", rng.IntN(520))
		start := base.Bound{Key: []byte(lo), Inclusive: rng.IntN(2) == 0}
		end := base.Bound{Key: []byte(hi), Inclusive: rng.IntN(2) == 0}
		reverse := rng.IntN(2) == 0
		var want []string
		for _, k := range keys {
			if base.InRange([]byte(k), start, end) {
				want = append(want, k+"/c="+ref[k])
			}
		}
		if reverse {
			for i, j := 0, len(want)-1; i < j; i, j = i+1, j-1 {
				want[i], want[j] = want[j], want[i]
			}
		}
		got := collect(m.NewIter(1, []byte("p"), start, end, reverse))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("range %v..%v reverse=%v: got %v, want %v", start, end, reverse, got, want)
		}
	}
}

// TestApplyCellAllocatesNothingPerCell checks the arena: cells go into
// large slabs, so inserting one allocates nothing on average and the
// garbage collector has no per-entry objects to scan. (The pointer
// skiplist allocated a node, its links and a key buffer per cell, and
// the GC scanning them was ~19% of ingest CPU.)
func TestApplyCellAllocatesNothingPerCell(t *testing.T) {
	m := New()
	pk := []byte("partition")
	c := live("", "v", 1, "some value of a few bytes")
	i := 0
	ck := make([]byte, 8)
	allocs := testing.AllocsPerRun(20_000, func() {
		i++
		ck[0], ck[1], ck[2] = byte(i>>16), byte(i>>8), byte(i)
		c.Clustering = ck
		m.ApplyCell(1, pk, c)
	})
	if allocs > 0.05 {
		t.Fatalf("ApplyCell allocates %.2f objects per cell, want ~0", allocs)
	}
}

// TestOverwriteSize checks the size estimate under overwrites: a write
// that loses to the held cell adds nothing, one that wins adds its record.
func TestOverwriteSize(t *testing.T) {
	m := New()
	if !m.Empty() {
		t.Fatal("a new memtable is not Empty")
	}
	m.ApplyCell(1, []byte("p"), live("a", "x", 5, "v5"))
	size := m.SizeBytes()
	if m.Empty() {
		t.Fatal("Empty after a write")
	}
	m.ApplyCell(1, []byte("p"), live("a", "x", 4, "v4"))
	m.ApplyCell(1, []byte("p"), live("a", "x", 5, "v5"))
	if m.SizeBytes() != size {
		t.Fatalf("losing writes grew the memtable from %d to %d bytes", size, m.SizeBytes())
	}
	// Winning writes append records, which the estimate must see.
	value := string(make([]byte, 100))
	for ts := int64(6); ts < 10_006; ts++ {
		m.ApplyCell(1, []byte("p"), live("a", "x", ts, value))
	}
	m.ApplyCell(1, []byte("p"), live("a", "x", 10_006, "v6"))
	if grown := m.SizeBytes() - size; grown < 10_000*100 {
		t.Fatalf("10,000 winning writes of 100 bytes grew the estimate by %d bytes", grown)
	}
	if got := collect(m.NewIter(1, []byte("p"), base.Unbounded, base.Unbounded, false)); fmt.Sprint(got) != "[a/x=v6]" || m.Cells() != 1 {
		t.Fatalf("got %v", got)
	}
}
