package base

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// bruteDeletion is the strongest deletion of ranges covering ck, by
// checking every range.
func bruteDeletion(ranges []RangeTombstone, ck []byte) DeletionTime {
	d := LiveDeletion
	for i := range ranges {
		if ranges[i].Covers(ck) {
			d = d.Max(ranges[i].Deletion)
		}
	}
	return d
}

// TestFragmentRangesRandomized compares fragments and both cursor
// directions with the brute-force answer for every key of a small key
// space, over random mixes of rows, ranges and open ends.
// bruteReached counts the fragments a scan in the given direction has
// reached at ck: those that begin at or before ck in scan order.
func bruteReached(frags []RangeTombstone, ck []byte, reverse bool) int {
	n := 0
	for i := range frags {
		if !reverse && AfterStart(ck, frags[i].Start) || reverse && BeforeEnd(ck, frags[i].End) {
			n++
		}
	}
	return n
}

func TestFragmentRangesRandomized(t *testing.T) {
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 1))
	key := func(i int) []byte { return []byte{byte('a' + i/3), byte('0' + i%3)} }
	const keys = 30
	bound := func() Bound {
		if rng.IntN(8) == 0 {
			return Unbounded
		}
		return Bound{Key: key(rng.IntN(keys)), Inclusive: rng.IntN(2) == 0}
	}
	for round := 0; round < 2000; round++ {
		n := rng.IntN(12)
		var ranges []RangeTombstone
		for i := 0; i < n; i++ {
			rt := RangeTombstone{Deletion: DeletionTime{MarkedForDeleteAt: int64(rng.IntN(5)), LocalDeletionTime: int64(rng.IntN(3))}}
			if rng.IntN(2) == 0 {
				k := key(rng.IntN(keys))
				rt.Start, rt.End = Bound{Key: k, Inclusive: true}, Bound{Key: k, Inclusive: true}
			} else {
				rt.Start, rt.End = bound(), bound()
			}
			ranges = append(ranges, rt)
		}
		frags := FragmentRanges(ranges)
		if !IsFragmented(frags) {
			t.Fatalf("seed %d round %d: result is not fragmented: %v", seed, round, frags)
		}
		// Every key, and keys between the keys (a trailing 0 byte sorts
		// just after a key, "x" past its row prefix), in both directions.
		var probes [][]byte
		probes = append(probes, []byte{})
		for i := 0; i < keys; i++ {
			probes = append(probes, key(i), append(key(i), 0))
		}
		probes = append(probes, []byte("zz"))
		fwd := NewRangeCursor(frags, false)
		for _, ck := range probes {
			if got, want := fwd.Deletion(ck), bruteDeletion(ranges, ck); got != want {
				t.Fatalf("seed %d round %d: forward at %q: got %+v, want %+v\nranges %v\nfrags %v", seed, round, ck, got, want, ranges, frags)
			}
			if got, want := fwd.Reached(), bruteReached(frags, ck, false); got != want {
				t.Fatalf("seed %d round %d: forward at %q: reached %d fragments, want %d\nfrags %v", seed, round, ck, got, want, frags)
			}
		}
		rev := NewRangeCursor(frags, true)
		for i := len(probes) - 1; i >= 0; i-- {
			if got, want := rev.Deletion(probes[i]), bruteDeletion(ranges, probes[i]); got != want {
				t.Fatalf("seed %d round %d: reverse at %q: got %+v, want %+v\nranges %v\nfrags %v", seed, round, probes[i], got, want, ranges, frags)
			}
			if got, want := rev.Reached(), bruteReached(frags, probes[i], true); got != want {
				t.Fatalf("seed %d round %d: reverse at %q: reached %d fragments, want %d\nfrags %v", seed, round, probes[i], got, want, frags)
			}
		}
		// The run overlapping a random slice is exactly the fragments
		// that overlap it.
		qs, qe := bound(), bound()
		run := OverlappingFragments(frags, qs, qe)
		var want []RangeTombstone
		for i := range frags {
			if frags[i].Overlaps(qs, qe) {
				want = append(want, frags[i])
			}
		}
		if fmt.Sprint(run) != fmt.Sprint(want) {
			t.Fatalf("seed %d round %d: overlapping %v..%v: got %v, want %v", seed, round, qs, qe, run, want)
		}
		// A cursor that starts mid-way (a bounded slice) and skips keys.
		start := rng.IntN(len(probes))
		skip := NewRangeCursor(frags, false)
		for i := start; i < len(probes); i += 1 + rng.IntN(6) {
			if got, want := skip.Deletion(probes[i]), bruteDeletion(ranges, probes[i]); got != want {
				t.Fatalf("seed %d round %d: skipping forward at %q: got %+v, want %+v", seed, round, probes[i], got, want)
			}
		}
	}
}

func TestFragmentRangesJoinsAndSplits(t *testing.T) {
	k := func(s string) []byte { return []byte(s) }
	d := func(ts int64) DeletionTime { return DeletionTime{MarkedForDeleteAt: ts, LocalDeletionTime: 1} }
	ranges := []RangeTombstone{
		{Start: Bound{k("c"), true}, End: Bound{k("f"), true}, Deletion: d(5)},
		{Start: Bound{k("a"), true}, End: Bound{k("d"), false}, Deletion: d(9)},
		{Start: Bound{k("e"), true}, End: Bound{k("e"), true}, Deletion: d(5)}, // inside an equal deletion: joins
	}
	got := fmt.Sprint(FragmentRanges(ranges))
	want := fmt.Sprint([]RangeTombstone{
		{Start: Bound{k("a"), true}, End: Bound{k("d"), false}, Deletion: d(9)},
		{Start: Bound{k("d"), true}, End: Bound{k("f"), true}, Deletion: d(5)},
	})
	if got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	if n := len(FragmentRanges(nil)); n != 0 {
		t.Fatalf("got %d fragments of nothing", n)
	}
}
