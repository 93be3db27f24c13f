package fanout

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventide/eventide/bucket"
)

var (
	modelSeed = flag.Uint64("model.seed", 0, "seed of TestModelRandomized (0: a new one per run, logged)")
	modelOps  = flag.Int("model.ops", 400, "steps per TestModelRandomized run")
	modelRuns = flag.Int("model.runs", 4, "runs of TestModelRandomized when no seed is given")
)

// fanoutModel applies the events one by one in stream order, with every
// fan-out done at once: the brute-force truth a drained store must equal.
type fanoutModel struct {
	threshold int64
	backfill  int
	follows   map[[2]string]bool // user, author
	followers map[string]int64
	large     map[string]bool
	posts     map[string][]modelPost // author -> posts in stream order
	pushed    map[string]map[uuid.UUID]string
}

type modelPost struct {
	id      uuid.UUID
	deleted bool
}

func newFanoutModel(o Options) *fanoutModel {
	return &fanoutModel{threshold: o.LargeThreshold, backfill: o.Backfill, follows: map[[2]string]bool{},
		followers: map[string]int64{}, large: map[string]bool{}, posts: map[string][]modelPost{}, pushed: map[string]map[uuid.UUID]string{}}
}

func (m *fanoutModel) push(user, author string, id uuid.UUID) {
	if m.pushed[user] == nil {
		m.pushed[user] = map[uuid.UUID]string{}
	}
	m.pushed[user][id] = author
}

func (m *fanoutModel) apply(msg Message) {
	e := msg.Event
	switch e.Type {
	case "follow":
		if e.User == "" || e.Author == "" || e.User == e.Author || m.follows[[2]string{e.User, e.Author}] {
			return
		}
		m.follows[[2]string{e.User, e.Author}] = true
		m.followers[e.Author]++
		if m.followers[e.Author] > m.threshold {
			m.large[e.Author] = true
		}
		if m.large[e.Author] {
			return
		}
		ps := m.posts[e.Author]
		n := 0
		for i := len(ps) - 1; i >= 0 && n < m.backfill; i-- {
			if !ps[i].deleted {
				m.push(e.User, e.Author, ps[i].id)
				n++
			}
		}
	case "unfollow":
		if !m.follows[[2]string{e.User, e.Author}] {
			return
		}
		delete(m.follows, [2]string{e.User, e.Author})
		m.followers[e.Author]--
		for id, a := range m.pushed[e.User] {
			if a == e.Author {
				delete(m.pushed[e.User], id)
			}
		}
	case "post":
		m.posts[e.Author] = append(m.posts[e.Author], modelPost{id: e.ID})
		if m.large[e.Author] {
			return
		}
		for k := range m.follows {
			if k[1] == e.Author {
				m.push(k[0], e.Author, e.ID)
			}
		}
	case "post_delete":
		id, reason := parsePostID(e.Data)
		if reason != "" {
			return
		}
		ps := m.posts[e.Author]
		for i := range ps {
			if ps[i].id == id && !ps[i].deleted {
				ps[i].deleted = true
				for _, tl := range m.pushed {
					delete(tl, id)
				}
			}
		}
	}
}

// timeline is what a read of user must return once the fan-out drained.
func (m *fanoutModel) timeline(user string) []uuid.UUID {
	set := map[uuid.UUID]bool{}
	for id := range m.pushed[user] {
		set[id] = true
	}
	for k := range m.follows {
		if k[0] == user && m.large[k[1]] {
			for _, p := range m.posts[k[1]] {
				if !p.deleted {
					set[p.id] = true
				}
			}
		}
	}
	out := make([]uuid.UUID, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	slices.SortFunc(out, func(a, b uuid.UUID) int { return -bucket.CompareTimeUUID(a, b) })
	return out
}

// TestModelRandomized applies random follows, unfollows, posts, deletes
// and bad input to a store and to fanoutModel, working the fan-out's
// chunks in random order between the messages, and keeping up to three
// chunks in flight (read and built before later messages, applied after
// them), and reopening the store now and then. While chunks are pending every read must be a subset of
// the model, in order (never a deleted post nor an unfollowed author's);
// once they are drained, every read must equal it (in runs with a tiny
// cap that trims, only be such a subset: trims remove old rows, and
// TestTrimOneRangeTombstone checks what they keep). Replay a failure with
// -model.seed.
func TestModelRandomized(t *testing.T) {
	seeds := []uint64{*modelSeed}
	if *modelSeed == 0 {
		seeds = nil
		for i := 0; i < *modelRuns; i++ {
			seeds = append(seeds, uint64(time.Now().UnixNano())+uint64(i))
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Logf("seed %d (replay: go test ./fanout -run TestModelRandomized -model.seed=%d)", seed, seed)
			runModel(t, seed, *modelOps)
		})
	}
}

func runModel(t *testing.T, seed uint64, ops int) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	o := DefaultOptions()
	o.LargeThreshold = int64(2 + rng.IntN(4))
	o.ChunkSize = 1 + rng.IntN(3)
	o.Shards = 1 + rng.IntN(3)
	o.Backfill = 1 + rng.IntN(4)
	o.PartsPerShard = 1 + rng.IntN(2)
	// A third of the runs trim: a timeline is then a prefix-ordered subset
	// of the model (trims only remove old rows), not equal to it.
	trims := rng.IntN(3) == 0
	if trims {
		o.TimelineCap = 2 + rng.IntN(4)
		o.TrimEvery = 1 + rng.IntN(3)
	}
	t.Logf("threshold %d, chunk %d, shards %d, parts per shard %d, backfill %d, trims %v (cap %d, every %d)", o.LargeThreshold, o.ChunkSize, o.Shards, o.PartsPerShard, o.Backfill, trims, o.TimelineCap, o.TrimEvery)
	e := newEnv(t, o)
	m := newFanoutModel(o)
	users := []string{"u0", "u1", "u2", "u3", "u4", "u5", "u6", "u7"}
	pick := func() string { return users[rng.IntN(len(users))] }
	var postIDs []struct {
		author string
		label  string
	}
	// Chunks in flight: read and built, applied only after later
	// messages (as a worker's chunk may be). Lost at a reopen, as in a
	// crash.
	var inflight []*preparedChunk
	usedInflight := false
	applyInflight := func(i int) {
		pc := inflight[i]
		inflight = append(inflight[:i], inflight[i+1:]...)
		if _, err := e.f.applyChunk(context.Background(), pc); err != nil {
			t.Fatal(err)
		}
	}
	// Messages are applied in batches of 1 to 4 (Prepare reads what the
	// earlier messages of its batch wrote through its batch state).
	var batch []Message
	flush := func() {
		if len(batch) > 0 {
			e.apply(batch...)
			batch = nil
		}
	}
	check := func(drained bool) {
		t.Helper()
		flush()
		for _, u := range users {
			posts, _ := e.timeline(u, 1+rng.IntN(5))
			got := make([]uuid.UUID, len(posts))
			for i, p := range posts {
				got[i] = p.ID
			}
			want := m.timeline(u)
			if drained && !trims {
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d: drained timeline of %s:\n got  %v\n want %v", seed, u, labels(e, got), labels(e, want))
				}
				// Storage converged too: the stored copies are exactly
				// the pushed ones, none left hidden by the read filter
				// (unless a chunk in flight landed after the cleanup
				// that would have removed it: then the filter hides it).
				stored := e.rawTimelineIDs(u)
				var pushed []uuid.UUID
				for id := range m.pushed[u] {
					pushed = append(pushed, id)
				}
				slices.SortFunc(pushed, func(a, b uuid.UUID) int { return -bucket.CompareTimeUUID(a, b) })
				if usedInflight {
					stored = slices.DeleteFunc(stored, func(id uuid.UUID) bool { return m.pushed[u][id] == "" })
				}
				if !slices.Equal(stored, pushed) {
					t.Fatalf("seed %d: drained timeline partition of %s stores\n %v\n want the pushed copies\n %v", seed, u, labels(e, stored), labels(e, pushed))
				}
				continue
			}
			// A subsequence of want.
			j := 0
			for _, id := range got {
				for j < len(want) && want[j] != id {
					j++
				}
				if j == len(want) {
					t.Fatalf("seed %d: timeline of %s while fan-out lags shows %s, which the model does not have in that place:\n got  %v\n want %v",
						seed, u, e.label(id), labels(e, got), labels(e, want))
				}
				j++
			}
		}
	}
	for step := 0; step < ops; step++ {
		var msg Message
		r := rng.IntN(100)
		switch {
		case r < 30:
			msg = e.follow(pick(), pick())
		case r < 40:
			msg = e.unfollow(pick(), pick())
		case r < 65:
			a := pick()
			l := fmt.Sprintf("%s.p%d", a, step)
			msg = e.post(a, l, l)
			postIDs = append(postIDs, struct{ author, label string }{a, l})
		case r < 72 && len(postIDs) > 0:
			p := postIDs[rng.IntN(len(postIDs))]
			a := p.author
			if rng.IntN(10) == 0 {
				a = pick() // maybe the wrong author: an unknown post
			}
			msg = e.del(a, p.label)
		case r < 80:
			flush()
			if len(inflight) > 0 && rng.IntN(2) == 0 {
				applyInflight(rng.IntN(len(inflight)))
				continue
			}
			refs, err := e.f.PendingChunks(context.Background(), 50)
			if err != nil {
				t.Fatal(err)
			}
			refs = slices.DeleteFunc(refs, func(r ChunkRef) bool {
				return slices.ContainsFunc(inflight, func(pc *preparedChunk) bool { return pc.ref == r })
			})
			if len(refs) == 0 || len(inflight) == 3 {
				continue
			}
			pc, err := e.f.prepareChunk(context.Background(), refs[rng.IntN(len(refs))])
			if err != nil {
				t.Fatal(err)
			}
			inflight = append(inflight, pc)
			usedInflight = true
			continue
		case r < 90:
			flush()
			// Work a few chunks, in random order.
			for n := rng.IntN(4); n >= 0; n-- {
				refs, err := e.f.PendingChunks(context.Background(), 50)
				if err != nil {
					t.Fatal(err)
				}
				if len(refs) == 0 {
					break
				}
				r := refs[rng.IntN(len(refs))]
				if slices.ContainsFunc(inflight, func(pc *preparedChunk) bool { return pc.ref == r }) {
					continue // a worker never runs two chunks of one part at once
				}
				if _, err := e.f.WorkChunk(context.Background(), r); err != nil {
					t.Fatal(err)
				}
			}
			continue
		case r < 97:
			check(false)
			continue
		default:
			flush()
			inflight = nil
			e.reopen()
			continue
		}
		batch = append(batch, msg)
		m.apply(msg)
		if rng.IntN(3) == 0 || len(batch) == 4 {
			flush()
		}
	}
	check(false)
	for len(inflight) > 0 {
		applyInflight(0)
	}
	e.work()
	check(true)
}

func labels(e *env, ids []uuid.UUID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = e.label(id)
	}
	return out
}
