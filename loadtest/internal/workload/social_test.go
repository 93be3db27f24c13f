package workload

import (
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/google/uuid"
)

func testSocialConfig(seed uint64) SocialConfig {
	c := DefaultSocialConfig()
	c.Seed, c.Run = seed, "abc123"
	c.Users, c.Threshold, c.BigAuthors, c.PushTop = 3000, 1000, 3, 500
	c.PostRate, c.FollowRate, c.UnfollowRate, c.DeleteRate = 60, 20, 15, 5
	c.ProbeEvery = 10
	return c
}

func socialOps(t *testing.T, cfg SocialConfig, n int) (*SocialGen, []SocialOp) {
	t.Helper()
	g, err := NewSocialGen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ops := make([]SocialOp, n)
	for i := range ops {
		ops[i] = g.Next(int64(i))
	}
	return g, ops
}

func setupEdges(g *SocialGen) []uint64 {
	var out []uint64
	g.SetupFollows(func(u, a int32) { out = append(out, edgeKey(u, a)) })
	return out
}

func TestSocialDeterministicBySeed(t *testing.T) {
	ga, a := socialOps(t, testSocialConfig(7), 20000)
	gb, b := socialOps(t, testSocialConfig(7), 20000)
	if !reflect.DeepEqual(a, b) || !reflect.DeepEqual(setupEdges(ga), setupEdges(gb)) || !reflect.DeepEqual(ga.ProbeAuthors(), gb.ProbeAuthors()) {
		t.Fatal("two generators with seed 7 differ")
	}
	for i := range a {
		if string(a[i].Body(nil, "abc123", t0, 200, uuid.UUID{})) != string(b[i].Body(nil, "abc123", t0, 200, uuid.UUID{})) {
			t.Fatalf("op %d: bodies differ", i)
		}
	}
	gc, c := socialOps(t, testSocialConfig(8), 20000)
	if reflect.DeepEqual(a, c) || reflect.DeepEqual(setupEdges(ga), setupEdges(gc)) {
		t.Fatal("seeds 7 and 8 give the same graph and operations")
	}
}

// The initial graph has the Zipf follower counts of the configuration:
// the big authors above the fan-out threshold (pulled), everyone else
// at or below it, falling as 1/rank^s; followers are distinct users and
// never the author.
func TestSocialGraphDistribution(t *testing.T) {
	cfg := testSocialConfig(11)
	g, err := NewSocialGen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for r := range cfg.Users {
		fs := g.Followers(int32(r))
		total += len(fs)
		if !slices.IsSorted(fs) || len(slices.Compact(slices.Clone(fs))) != len(fs) {
			t.Fatalf("author %d: followers not distinct and sorted", r)
		}
		if slices.Contains(fs, int32(r)) {
			t.Fatalf("author %d follows itself", r)
		}
		switch {
		case r < cfg.BigAuthors:
			if len(fs) <= cfg.Threshold {
				t.Errorf("big author %d has %d followers, want more than the threshold %d", r, len(fs), cfg.Threshold)
			}
		case len(fs) > cfg.Threshold:
			t.Errorf("pushed author %d has %d followers, more than the threshold", r, len(fs))
		}
	}
	if n := len(g.Followers(0)); n != cfg.Users-1 {
		t.Errorf("the biggest author has %d followers, want everyone else (%d)", n, cfg.Users-1)
	}
	if total != g.Edges() || total != len(setupEdges(g)) {
		t.Errorf("edges %d, setup follows %d, sum of followers %d", g.Edges(), len(setupEdges(g)), total)
	}
	// Zipf with s = 1: rank k of the pushed authors has PushTop/k.
	for _, k := range []int{1, 2, 5, 10, 100} {
		r := cfg.BigAuthors + k - 1
		if got, want := len(g.Followers(int32(r))), cfg.PushTop/k; got != want {
			t.Errorf("pushed author of rank %d: %d followers, want %d", k, got, want)
		}
	}
	if n := len(g.Followers(int32(cfg.Users - 1))); n != 0 {
		t.Errorf("the last author has %d followers; the Zipf tail should have none", n)
	}
	// Followers are spread over the users, not bunched at low numbers.
	var sum float64
	for _, f := range g.Followers(int32(cfg.BigAuthors)) {
		sum += float64(f)
	}
	within(t, "mean follower number / users", sum/float64(len(g.Followers(int32(cfg.BigAuthors))))/float64(cfg.Users), 0.5, 0.05)

	// Probe authors: every big author (pulled), then pushed ones of ranks
	// 1, 10, 100 (500, 50 and 5 followers), each with its lag sample.
	var got []int32
	for _, pa := range g.ProbeAuthors() {
		got = append(got, pa.Author)
		if pa.Pull != (int(pa.Author) < cfg.BigAuthors) || pa.Followers != len(g.Followers(pa.Author)) || len(pa.Sample) != min(pa.Followers, cfg.LagSample) {
			t.Errorf("probe author %+v", pa)
		}
	}
	if want := []int32{0, 1, 2, 3, 12, 102}; !reflect.DeepEqual(got, want) {
		t.Errorf("probe authors %v, want %v", got, want)
	}
}

// The operations come in the configured proportions; each edge is touched
// at most once (a follow of a pair that did not follow, an unfollow of an
// initial edge outside the lag samples); deletes name an earlier non-probe
// post of its author, scheduled at least DeleteMinAge before; probe posts
// go round the probe authors.
func TestSocialOperations(t *testing.T) {
	cfg := testSocialConfig(5)
	g0, err := NewSocialGen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	initial := map[uint64]bool{}
	for _, k := range setupEdges(g0) {
		initial[k] = true
	}
	reserved := map[uint64]bool{}
	for _, pa := range g0.ProbeAuthors() {
		for _, f := range pa.Sample {
			reserved[edgeKey(f, pa.Author)] = true
		}
	}
	const n = 50000
	g, ops := socialOps(t, cfg, n)
	kinds := map[string]int{}
	touched := map[uint64]bool{}
	posts := map[int64]SocialOp{}
	deleted := map[int64]bool{}
	var probes int64
	minGap := int64(cfg.DeleteMinAge.Seconds() * cfg.Rate())
	for i, op := range ops {
		kinds[op.Kind]++
		k := edgeKey(op.User, op.Author)
		switch op.Kind {
		case SocialFollow, SocialUnfollow:
			if touched[k] || op.User == op.Author {
				t.Fatalf("op %d: %s of edge %d->%d touched before", i, op.Kind, op.User, op.Author)
			}
			touched[k] = true
			if op.Kind == SocialFollow && initial[k] {
				t.Fatalf("op %d: follow of an existing edge", i)
			}
			if op.Kind == SocialUnfollow && (!initial[k] || reserved[k]) {
				t.Fatalf("op %d: unfollow of edge %d->%d: initial %v, in a lag sample %v", i, op.User, op.Author, initial[k], reserved[k])
			}
			if g.Following(op.User, op.Author) != (op.Kind == SocialFollow) {
				t.Fatalf("op %d: the generator's graph does not show the %s", i, op.Kind)
			}
		case SocialPost:
			posts[op.Post] = op
			if op.Subject != "events.post" {
				t.Fatalf("post subject %s", op.Subject)
			}
			if op.Probe >= 0 {
				if op.Probe != probes || op.Post%cfg.ProbeEvery != 0 {
					t.Fatalf("op %d: probe %d of post %d", i, op.Probe, op.Post)
				}
				pa := g.ProbeAuthors()[probes%int64(len(g.ProbeAuthors()))]
				if op.Author != pa.Author || op.Pull != pa.Pull {
					t.Fatalf("probe %d by %d, want %d", op.Probe, op.Author, pa.Author)
				}
				probes++
			}
		case SocialDelete:
			p, ok := posts[op.Post]
			if !ok || p.Probe >= 0 || p.Author != op.Author || p.Seq != op.PostSeq || deleted[op.Post] || op.Seq-p.Seq < minGap {
				t.Fatalf("op %d deletes post %d (%+v, deleted before %v)", i, op.Post, p, deleted[op.Post])
			}
			deleted[op.Post] = true
		}
	}
	within(t, "post share", float64(kinds[SocialPost])/n, 0.6, 0.002)
	within(t, "follow share", float64(kinds[SocialFollow])/n, 0.2, 0.002)
	within(t, "unfollow share", float64(kinds[SocialUnfollow])/n, 0.15, 0.002)
	within(t, "delete share", float64(kinds[SocialDelete])/n, 0.05, 0.002)

	// Posters are Zipf with s = 0.5 by rank: user 0 posts about 2^0.5
	// times as often as user 1.
	byAuthor := map[int32]int{}
	for _, op := range ops {
		if op.Kind == SocialPost && op.Probe < 0 {
			byAuthor[op.Author]++
		}
	}
	within(t, "posts of user 0 over user 1", float64(byAuthor[0])/float64(byAuthor[1]), math.Sqrt2, 0.35)
}

// Bodies are the events the fan-out reads (docs/events.md): posts with
// their own version 1 id at the intended time, follows with user and
// author, deletes naming the post id.
func TestSocialBodies(t *testing.T) {
	_, ops := socialOps(t, testSocialConfig(9), 2000)
	at := t0.Add(123456789 * time.Nanosecond)
	seenIDs := map[uuid.UUID]bool{}
	for _, op := range ops {
		var m map[string]any
		del := uuid.MustParse("353c91a0-e705-11f0-9234-0123456789ab")
		b := op.Body(nil, "abc123", at, 200, del)
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s body %s: %v", op.Kind, b, err)
		}
		switch op.Kind {
		case SocialPost:
			id := op.PostID(at)
			if m["id"] != id.String() || m["author"] != UserName("abc123", op.Author) || id.Version() != 1 || seenIDs[id] {
				t.Fatalf("post body %s (id %s)", b, id)
			}
			seenIDs[id] = true
			if tm, err := bucket.TimeOf(id); err != nil || !tm.Equal(at.Truncate(100*time.Nanosecond)) {
				t.Fatalf("post id time %v, want %v", tm, at)
			}
			if op.Probe < 0 && len(b) != 200 {
				t.Fatalf("post body of %d bytes, want 200", len(b))
			}
		case SocialFollow, SocialUnfollow:
			if m["user"] != UserName("abc123", op.User) || m["author"] != UserName("abc123", op.Author) || m["time"] != float64(at.UnixMilli()) {
				t.Fatalf("%s body %s", op.Kind, b)
			}
		case SocialDelete:
			if m["author"] != UserName("abc123", op.Author) || m["data"].(map[string]any)["post_id"] != del.String() {
				t.Fatalf("delete body %s", b)
			}
		}
	}
}

func TestSocialConfigErrors(t *testing.T) {
	for name, mut := range map[string]func(*SocialConfig){
		"too few users for big authors": func(c *SocialConfig) { c.Users = c.Threshold + 2 },
		"push top above threshold":      func(c *SocialConfig) { c.PushTop = c.Threshold + 1 },
		"no rates":                      func(c *SocialConfig) { c.PostRate, c.FollowRate, c.UnfollowRate, c.DeleteRate = 0, 0, 0, 0 },
		"bad post type":                 func(c *SocialConfig) { c.PostType = "Post!" },
		"bad run":                       func(c *SocialConfig) { c.Run = "A" },
	} {
		c := testSocialConfig(1)
		mut(&c)
		if _, err := NewSocialGen(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c := testSocialConfig(1)
	c.BigAuthors, c.Users, c.Threshold, c.PushTop = 0, 10, 100, 5
	if _, err := NewSocialGen(c); err != nil {
		t.Errorf("no big authors and few users: %v", err)
	}
}
