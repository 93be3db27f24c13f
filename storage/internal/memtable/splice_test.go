package memtable

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/eventide/eventide/storage/internal/base"
)

// checkSkiplist verifies the list's structure: at every level the nodes
// are in strictly increasing key order, every node at a level is also at
// the level below, every node is at each level below its height, and
// level 0's back links point at each node's predecessor.
func checkSkiplist(t *testing.T, s *skiplist) {
	t.Helper()
	height := int(s.height.Load())
	tall := make([]int, height+1) // tall[l]: nodes of height > l
	for x := s.first(); x != 0; x = s.next(x, 0) {
		for l := range int(s.node(x)[nodeTableHeight] >> 32) {
			tall[l]++
		}
	}
	var below map[uint64]bool
	for level := 0; level < height; level++ {
		here := map[uint64]bool{}
		var prevKey *key
		prev := s.head
		for x := s.next(s.head, level); x != 0; x = s.next(x, level) {
			k := s.key(x)
			if prevKey != nil && compareKeys(prevKey, &k) >= 0 {
				t.Fatalf("level %d: %q/%q/%q after %q/%q/%q", level, k.partition, k.clustering, k.column, prevKey.partition, prevKey.clustering, prevKey.column)
			}
			if level == 0 {
				if p := s.node(x)[nodePrev]; p != prev {
					t.Fatalf("node %q/%q: back link %d, want %d", k.partition, k.clustering, p, prev)
				}
			} else if !below[x] {
				t.Fatalf("level %d holds a node missing from level %d", level, level-1)
			}
			here[x] = true
			prevKey, prev = &k, x
		}
		below = here
		if len(here) != tall[level] {
			t.Fatalf("level %d links %d nodes, %d are that tall", level, len(here), tall[level])
		}
	}
}

// TestSpliceInserts: inserts placed from a partition's remembered splice
// (each new key of a partition right before the one inserted last, as
// TimeUUID DESC clustering keys arrive) keep the list ordered, hold the
// same cells as a sorted map, and are most inserts of that pattern;
// other patterns (ascending, random, overwrites, more partitions than
// splice slots, several tables) fall back to the full search and stay
// correct.
func TestSpliceInserts(t *testing.T) {
	for _, tc := range []struct {
		name       string
		partitions int
		order      func(rng *rand.Rand, i int) uint64
		minHits    float64 // share of inserts placed from a splice
	}{
		{"descending", 20, func(_ *rand.Rand, i int) uint64 { return ^uint64(i) }, 0.9},
		{"descending, more partitions than slots", 300, func(_ *rand.Rand, i int) uint64 { return ^uint64(i) }, 0},
		{"ascending", 20, func(_ *rand.Rand, i int) uint64 { return uint64(i) }, 0},
		{"random with overwrites", 20, func(rng *rand.Rand, _ int) uint64 { return rng.Uint64N(3000) }, 0},
		{"roughly descending", 20, func(rng *rand.Rand, i int) uint64 { return ^uint64(i + rng.IntN(50)) }, 0},
		// loadtest/peers' event times: consecutive events of a partition
		// 20 inserts apart, each time jittered by about a gap either way,
		// so many an event is older than its partition's newest.
		{"descending with jitter", 20, func(rng *rand.Rand, i int) uint64 { return ^uint64(i*100 + rng.IntN(4800)) }, 0.95},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, uint64(tc.partitions)))
			m := New()
			ref := map[string]string{}
			const n = 20000
			for i := range n {
				table := uint32(1 + rng.IntN(2))
				pk := fmt.Appendf(nil, "26112410|type%03d", rng.IntN(tc.partitions))
				ck := binary.BigEndian.AppendUint64(nil, tc.order(rng, i))
				v := fmt.Sprint(i)
				c := base.Cell{Clustering: ck, Column: []byte("data"), Kind: base.KindLive, Timestamp: int64(i), LocalDeletionTime: base.NoDeletionTime, Value: []byte(v)}
				m.ApplyCell(table, pk, &c)
				ref[fmt.Sprintf("%d|%s|%x", table, pk, ck)] = v
			}
			checkAgainstModel(t, m, ref, func(k key) string { return fmt.Sprintf("%d|%s|%x", k.table, k.partition, k.clustering) })
			if hits := float64(m.list.spliceHits) / float64(len(ref)); hits < tc.minHits {
				t.Fatalf("%.0f%% of inserts placed from a splice, want at least %.0f%%", 100*hits, 100*tc.minHits)
			}
			t.Logf("%d cells, %.0f%% placed from a splice", len(ref), 100*float64(m.list.spliceHits)/float64(len(ref)))
		})
	}
}

// TestSpliceSearchesTheNewNodesLevels: an insert placed from a splice
// searches only the levels the new node is linked into (1.33 on average
// with a branching factor of 4), not every level of the list (about 9 at
// 200,000 cells), and the splice stays valid for the next one.
func TestSpliceSearchesTheNewNodesLevels(t *testing.T) {
	m := New()
	const n, partitions = 200_000, 20
	for i := range n {
		pk := fmt.Appendf(nil, "26112410|type%03d", i%partitions)
		ck := binary.BigEndian.AppendUint64(nil, ^uint64(i))
		c := base.Cell{Clustering: ck, Column: []byte("data"), Kind: base.KindLive, Timestamp: int64(i), LocalDeletionTime: base.NoDeletionTime, Value: []byte("v")}
		m.ApplyCell(1, pk, &c)
	}
	checkSkiplist(t, m.list)
	s := m.list
	if s.spliceHits < n*9/10 {
		t.Fatalf("%d of %d inserts placed from a splice", s.spliceHits, n)
	}
	perInsert := float64(s.spliceUpperCompares) / float64(s.spliceHits)
	t.Logf("list height %d, %.2f key comparisons above level 0 per insert", s.height.Load(), perInsert)
	if perInsert > 1 {
		t.Fatalf("%.2f key comparisons above level 0 per insert placed from a splice, want at most 1 (the levels of the new node above 0: 0.33 on average)", perInsert)
	}
}

// TestRowInserts: the cells of a row applied one after the other, in any
// column order (a writer's event: data, user, author), are placed from
// the last inserts' paths (findInRow) and the list holds the same cells,
// in order, as a sorted map, against the general search: rows in
// random, DESC and ascending order, over few or many partitions and two
// tables, with overwrites of whole rows and of single cells in between.
func TestRowInserts(t *testing.T) {
	columns := []string{"data", "user", "author", "a", "zz"}
	for _, tc := range []struct {
		name       string
		partitions int
		order      func(rng *rand.Rand, i int) uint64
	}{
		{"descending with jitter", 20, func(rng *rand.Rand, i int) uint64 { return ^uint64(i*100 + rng.IntN(4800)) }},
		{"ascending", 5, func(_ *rand.Rand, i int) uint64 { return uint64(i) }},
		{"random with overwrites", 3, func(rng *rand.Rand, _ int) uint64 { return rng.Uint64N(500) }},
		{"many partitions", 300, func(rng *rand.Rand, _ int) uint64 { return rng.Uint64() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seed := uint64(len(tc.name))
			rng := rand.New(rand.NewPCG(7, seed))
			m := New()
			ref := map[string]string{}
			laterNew := 0 // new keys not first of their row
			for i := range 6000 {
				table := uint32(1 + rng.IntN(2))
				pk := fmt.Appendf(nil, "26112410|type%03d", rng.IntN(tc.partitions))
				ck := binary.BigEndian.AppendUint64(nil, tc.order(rng, i))
				cols := columns[:1+rng.IntN(len(columns))]
				for n, j := range rng.Perm(len(cols)) {
					v := fmt.Sprint(i, j)
					c := base.Cell{Clustering: ck, Column: []byte(cols[j]), Kind: base.KindLive, Timestamp: int64(i), LocalDeletionTime: base.NoDeletionTime, Value: []byte(v)}
					m.ApplyCell(table, pk, &c)
					id := fmt.Sprintf("%d|%s|%x|%s", table, pk, ck, cols[j])
					if _, ok := ref[id]; !ok && n > 0 {
						laterNew++
					}
					ref[id] = v
				}
				if rng.IntN(10) == 0 {
					// A cell of another row in between.
					other := binary.BigEndian.AppendUint64(nil, tc.order(rng, rng.IntN(i+1)))
					v := fmt.Sprint(i, "other")
					c := base.Cell{Clustering: other, Column: []byte("data"), Kind: base.KindLive, Timestamp: int64(i), LocalDeletionTime: base.NoDeletionTime, Value: []byte(v)}
					m.ApplyCell(table, pk, &c)
					ref[fmt.Sprintf("%d|%s|%x|%s", table, pk, other, "data")] = v
				}
			}
			checkAgainstModel(t, m, ref, func(k key) string {
				return fmt.Sprintf("%d|%s|%x|%s", k.table, k.partition, k.clustering, k.column)
			})
			// A new key after a row's first cell is placed from a finger
			// (most: not always next to an overwritten one).
			if m.list.fingerHits < laterNew*8/10 {
				t.Fatalf("%d of %d new keys after their row's first cell placed from a finger, want 80%%", m.list.fingerHits, laterNew)
			}
			t.Logf("%d keys, %d of the %d new ones after their row's first cell placed from a finger", len(ref), m.list.fingerHits, laterNew)
		})
	}
}

// TestSpliceSlotsSpread: partition keys that differ only in a few bytes
// (a writer's: the hour and the event type at the end) spread over the
// splice slots by both of their slots as random keys would (about 640
// distinct of 1,024 for 1,000 keys); a mix whose low bits ignore some
// input bytes put 20 event types in one first slot.
func TestSpliceSlotsSpread(t *testing.T) {
	first, second := map[int]bool{}, map[int]bool{}
	for hour := range 50 {
		for typ := range 20 {
			pk := fmt.Appendf(nil, "%02d1126%02d|type%02d", hour%28+1, hour%24, typ)
			a, b := spliceSlots(uint32(1+typ%2), pk)
			first[a], second[b] = true, true
		}
	}
	if len(first) < 550 || len(second) < 550 {
		t.Fatalf("1,000 partitions took %d first and %d second slots of %d, want about 640", len(first), len(second), spliceSlotCount)
	}
}

// checkAgainstModel checks m's skiplist (its links, then its keys in order
// and each one's value) against ref, the values by key as id names them.
func checkAgainstModel(t *testing.T, m *Memtable, ref map[string]string, id func(key) string) {
	t.Helper()
	checkSkiplist(t, m.list)
	want := make([]string, 0, len(ref))
	for k := range ref {
		want = append(want, k)
	}
	sort.Strings(want)
	var got []string
	for x := m.list.first(); x != 0; x = m.list.next(x, 0) {
		key := id(m.list.key(x))
		var c base.Cell
		m.list.cell(x, &c)
		if ref[key] != string(c.Value) {
			t.Fatalf("%s holds %q, want %q", key, c.Value, ref[key])
		}
		got = append(got, key)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the list holds %d keys, the map %d, or in another order", len(got), len(want))
	}
}
