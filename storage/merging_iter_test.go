package storage

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortLazy: sortLazy leaves lazy sources in the order a stable sort
// by first key gives, in both directions, for lists in order, exactly
// backwards, backwards but for one pair, with equal keys, and at random.
// Sources with equal keys are told apart by their key's backing array.
func TestSortLazy(t *testing.T) {
	key := func(k int) []byte { return []byte(fmt.Sprintf("k%04d", k)) }
	rng := rand.New(rand.NewPCG(17, 25))
	lists := map[string][]int{
		"empty":               {},
		"one":                 {5},
		"ascending":           {1, 2, 3, 4, 5, 6, 7, 8},
		"descending":          {28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1},
		"descending with tie": {9, 8, 7, 7, 6, 5},
		"descending but one":  {9, 8, 6, 7, 5, 4},
		"all equal":           {3, 3, 3, 3},
	}
	for i := range 20 {
		l := make([]int, rng.IntN(40))
		for j := range l {
			l[j] = rng.IntN(10)
		}
		lists[fmt.Sprintf("random %d", i)] = l
	}
	for name, keys := range lists {
		for _, reverse := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/reverse=%v", name, reverse), func(t *testing.T) {
				got := make([]lazySource, len(keys))
				for i, k := range keys {
					got[i] = lazySource{first: key(k)}
				}
				want := slices.Clone(got)
				slices.SortStableFunc(want, func(a, b lazySource) int {
					if reverse {
						return bytes.Compare(b.first, a.first)
					}
					return bytes.Compare(a.first, b.first)
				})
				sortLazy(got, reverse)
				for i := range want {
					if &got[i].first[0] != &want[i].first[0] {
						t.Fatalf("position %d holds %s (source %p), want %s (source %p)", i, got[i].first, &got[i].first[0], want[i].first, &want[i].first[0])
					}
				}
			})
		}
	}
}
