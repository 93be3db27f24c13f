package base

import (
	"bytes"
	"testing"
)

func TestReconcile(t *testing.T) {
	live := func(ts int64, v string) Cell {
		return Cell{Kind: KindLive, Timestamp: ts, LocalDeletionTime: NoDeletionTime, Value: []byte(v)}
	}
	expiring := func(ts, ldt int64, v string) Cell {
		return Cell{Kind: KindExpiring, Timestamp: ts, TTL: 10, LocalDeletionTime: ldt, Value: []byte(v)}
	}
	tomb := func(ts, ldt int64) Cell { return Cell{Kind: KindTombstone, Timestamp: ts, LocalDeletionTime: ldt} }
	counter := func(ts, v int64) Cell {
		return Cell{Kind: KindCounter, Timestamp: ts, LocalDeletionTime: NoDeletionTime, Value: EncodeCounter(v)}
	}
	cases := []struct {
		name string
		a, b Cell
		want Cell
	}{
		{"higher timestamp wins", live(2, "a"), live(1, "z"), live(2, "a")},
		{"higher timestamp beats tombstone", live(2, "a"), tomb(1, 100), live(2, "a")},
		{"tombstone with higher timestamp wins", live(1, "a"), tomb(2, 100), tomb(2, 100)},
		{"tie: tombstone beats live", live(5, "zzz"), tomb(5, 1), tomb(5, 1)},
		{"tie: expiring beats live", live(5, "zzz"), expiring(5, 100, "a"), expiring(5, 100, "a")},
		{"tie: tombstone beats expiring", expiring(5, 1000, "a"), tomb(5, 1), tomb(5, 1)},
		{"tie: later expiry wins between expiring", expiring(5, 100, "z"), expiring(5, 200, "a"), expiring(5, 200, "a")},
		{"tie: later deletion time wins between tombstones", tomb(5, 100), tomb(5, 200), tomb(5, 200)},
		{"tie: same expiry, greater value wins", expiring(5, 100, "a"), expiring(5, 100, "b"), expiring(5, 100, "b")},
		{"tie: greater value wins between live", live(5, "abc"), live(5, "abd"), live(5, "abd")},
		{"tie: longer value wins on shared prefix", live(5, "ab"), live(5, "abc"), live(5, "abc")},
		{"counters add", counter(3, 5), counter(7, -2), counter(7, 3)},
		{"tombstone beats older counter", counter(3, 5), tomb(4, 9), tomb(4, 9)},
		{"tie: tombstone beats counter", counter(4, 5), tomb(4, 9), tomb(4, 9)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, order := range [][2]Cell{{tc.a, tc.b}, {tc.b, tc.a}} {
				got := Reconcile(order[0], order[1])
				if got.Kind != tc.want.Kind || got.Timestamp != tc.want.Timestamp || got.LocalDeletionTime != tc.want.LocalDeletionTime || !bytes.Equal(got.Value, tc.want.Value) {
					t.Fatalf("Reconcile(%+v, %+v) = %+v, want %+v", order[0], order[1], got, tc.want)
				}
			}
		})
	}
}

func TestDeletionShadowing(t *testing.T) {
	d := DeletionTime{MarkedForDeleteAt: 10, LocalDeletionTime: 5}
	for _, tc := range []struct {
		ts   int64
		want bool
	}{{9, true}, {10, true}, {11, false}} {
		if got := d.Deletes(tc.ts); got != tc.want {
			t.Errorf("deletion at 10 Deletes(%d) = %v, want %v", tc.ts, got, tc.want)
		}
	}
	if LiveDeletion.Deletes(-1 << 62) {
		t.Error("the live deletion deleted something")
	}
}

func TestRangeTombstoneCovers(t *testing.T) {
	k := func(s string) []byte { return []byte(s) }
	cases := []struct {
		name       string
		start, end Bound
		ck         string
		want       bool
	}{
		{"inside", Bound{k("b"), true}, Bound{k("d"), true}, "c", true},
		{"inclusive start", Bound{k("b"), true}, Bound{k("d"), true}, "b", true},
		{"exclusive start", Bound{k("b"), false}, Bound{k("d"), true}, "b", false},
		{"inclusive end", Bound{k("b"), true}, Bound{k("d"), true}, "d", true},
		{"exclusive end", Bound{k("b"), true}, Bound{k("d"), false}, "d", false},
		{"before", Bound{k("b"), true}, Bound{k("d"), true}, "a", false},
		{"after", Bound{k("b"), true}, Bound{k("d"), true}, "e", false},
		{"unbounded start", Unbounded, Bound{k("d"), true}, "", true},
		{"unbounded end", Bound{k("b"), true}, Unbounded, "zzz", true},
		{"row", Bound{k("b"), true}, Bound{k("b"), true}, "b", true},
		{"row prefix is another row", Bound{k("b"), true}, Bound{k("b"), true}, "ba", false},
	}
	for _, tc := range cases {
		rt := RangeTombstone{Start: tc.start, End: tc.end}
		if got := rt.Covers(k(tc.ck)); got != tc.want {
			t.Errorf("%s: Covers(%q) = %v, want %v", tc.name, tc.ck, got, tc.want)
		}
	}
}
