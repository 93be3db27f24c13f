package workload

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/google/uuid"
)

// The social graph workload (SocialGen): users with Zipf follower counts,
// a few of them above the server's fan-out threshold (pulled at read time,
// the rest pushed), the follows that build that graph (the setup), then an
// open-loop mix of posts, follows, unfollows and post deletes, as the
// fan-out worker reads them (docs/events.md, "Fan-out events").
//
// Users are numbered 0..Users-1 and named "lt-<run>-u<n>"; user n is the
// author of rank n: users 0..BigAuthors-1 are the big authors, then the
// push authors by falling follower count. The generator keeps the graph
// (one map entry per edge, one slice entry per initial follower), so the
// harness can say at the end who must have which post.
//
// To keep that judgement exact whatever order concurrent publishes reach
// the stream in, the run's operations never touch one edge twice: a follow
// picks a pair that does not follow and was not touched, an unfollow an
// edge of the initial graph that was not touched (and is not in a lag
// sample), and a delete a post published at least DeleteMinAge of
// schedule before it.

// Social operation kinds, and their event types (docs/events.md).
const (
	SocialPost     = "post"
	SocialFollow   = "follow"
	SocialUnfollow = "unfollow"
	SocialDelete   = "post_delete"
)

// SocialKinds lists the operation kinds, in a fixed order.
var SocialKinds = []string{SocialPost, SocialFollow, SocialUnfollow, SocialDelete}

// SocialConfig shapes the social graph and its operations.
type SocialConfig struct {
	Seed uint64
	// Run names the users: "lt-<run>-u<n>".
	Run string
	// Users is the number of users; every user may post and follow.
	Users int
	// Threshold is the server's fan-out threshold (--fanout-threshold of
	// cmd/ingest): an author with more followers is pulled at read time.
	Threshold int
	// BigAuthors get more than Threshold followers: author r (r <
	// BigAuthors) has Threshold + 1 + (Users-2-Threshold)/(r+1)^FollowZipfS.
	BigAuthors int
	// PushTop is the follower count of the most followed pushed author;
	// push author r (r >= BigAuthors) has PushTop/(r-BigAuthors+1)^FollowZipfS
	// (rounded down: the long tail has none). At most Threshold and
	// Users-1.
	PushTop     int
	FollowZipfS float64
	// PostZipfS weighs who posts by rank, 1/(rank+1)^PostZipfS: 0 makes
	// every user as likely to post, more makes the followed post more.
	PostZipfS float64
	// PostType is the posts' event type (a --post-types of the server).
	PostType string
	// PostSize is the body length of a post that is not a probe.
	PostSize int
	// Rates of each kind, per second: the operations interleave in these
	// proportions exactly (smooth weighted round robin).
	PostRate, FollowRate, UnfollowRate, DeleteRate float64
	// ProbeEvery makes every ProbeEvery-th post a probe post, by one of
	// the probe authors in turn; 0 makes none.
	ProbeEvery int64
	// ProbeAuthors is how many pushed authors write probe posts (besides
	// every big author): those of ranks BigAuthors + 10^j - 1, j = 0, 1,
	// ..., with at least one follower, so their follower counts spread
	// over orders of magnitude.
	ProbeAuthors int
	// LagSample is how many followers of each probe author are timed
	// (their edges are never unfollowed).
	LagSample int
	// DeleteMinAge is how long before a delete its post was scheduled, at
	// least; RecentPosts how many recent posts deletes choose from.
	DeleteMinAge time.Duration
	RecentPosts  int
}

// DefaultSocialConfig returns the defaults the command starts from.
func DefaultSocialConfig() SocialConfig {
	return SocialConfig{
		Users: 20_000, Threshold: 10_000, BigAuthors: 3, FollowZipfS: 1,
		PostZipfS: 0.5, PostType: "post", PostSize: 200,
		PostRate: 100, FollowRate: 5, UnfollowRate: 5, DeleteRate: 2,
		ProbeAuthors: 4, LagSample: 10, DeleteMinAge: time.Second, RecentPosts: 4096,
	}
}

// Validate says what is wrong with c.
func (c *SocialConfig) Validate() error {
	var errs []error
	if !runPattern.MatchString(c.Run) {
		errs = append(errs, fmt.Errorf("run id %q: must be 1 to 16 of a-z 0-9", c.Run))
	}
	if c.Users < 2 || c.Users > 10_000_000 {
		errs = append(errs, fmt.Errorf("users %d: must be 2 to 10000000", c.Users))
	}
	if c.Threshold < 0 {
		errs = append(errs, fmt.Errorf("fan-out threshold %d: must not be negative", c.Threshold))
	}
	if c.BigAuthors < 0 || c.BigAuthors > 100 {
		errs = append(errs, fmt.Errorf("big authors %d: must be 0 to 100", c.BigAuthors))
	} else if c.BigAuthors > 0 && c.Users < c.Threshold+2+c.BigAuthors {
		errs = append(errs, fmt.Errorf("users %d: big authors need more than the fan-out threshold (%d) followers, so at least %d users", c.Users, c.Threshold, c.Threshold+2+c.BigAuthors))
	}
	if c.PushTop < 0 || c.PushTop > c.Threshold || c.PushTop > c.Users-1 {
		errs = append(errs, fmt.Errorf("followers of the top pushed author %d: must be 0 to the fan-out threshold (%d) and to users-1", c.PushTop, c.Threshold))
	}
	if !(c.FollowZipfS > 0) || c.FollowZipfS > 10 {
		errs = append(errs, fmt.Errorf("follower Zipf exponent %v: must be more than 0, at most 10", c.FollowZipfS))
	}
	if !(c.PostZipfS >= 0) || c.PostZipfS > 10 {
		errs = append(errs, fmt.Errorf("poster Zipf exponent %v: must be 0 to 10", c.PostZipfS))
	}
	if !typeNamePattern.MatchString(c.PostType) {
		errs = append(errs, fmt.Errorf("post type %q: must be 1 to 32 of a-z 0-9 _", c.PostType))
	}
	if c.PostSize < MinPayload || c.PostSize > 60<<10 {
		errs = append(errs, fmt.Errorf("post size %d: must be %d to 61440", c.PostSize, MinPayload))
	}
	total := 0.0
	for _, r := range []struct {
		name string
		v    float64
	}{{"post", c.PostRate}, {"follow", c.FollowRate}, {"unfollow", c.UnfollowRate}, {"delete", c.DeleteRate}} {
		if !(r.v >= 0) || math.IsInf(r.v, 0) {
			errs = append(errs, fmt.Errorf("%s rate %v: must be a number >= 0", r.name, r.v))
		}
		total += r.v
	}
	if !(total > 0) {
		errs = append(errs, errors.New("social rates: at least one must be positive"))
	}
	if c.ProbeEvery < 0 {
		errs = append(errs, fmt.Errorf("probe every %d: must not be negative", c.ProbeEvery))
	}
	if c.ProbeAuthors < 0 || c.ProbeAuthors > 10 {
		errs = append(errs, fmt.Errorf("probe authors %d: must be 0 to 10", c.ProbeAuthors))
	}
	if c.LagSample < 1 || c.LagSample > 1000 {
		errs = append(errs, fmt.Errorf("lag sample %d: must be 1 to 1000", c.LagSample))
	}
	if c.DeleteMinAge < 0 || c.RecentPosts < 1 {
		errs = append(errs, fmt.Errorf("delete min age %s and recent posts %d: need >= 0 and >= 1", c.DeleteMinAge, c.RecentPosts))
	}
	return errors.Join(errs...)
}

// Rate is the total operations per second of the configured mix.
func (c *SocialConfig) Rate() float64 {
	return c.PostRate + c.FollowRate + c.UnfollowRate + c.DeleteRate
}

// UserName is user n's name in run: "lt-<run>-u<n>".
func UserName(run string, n int32) string {
	return "lt-" + run + "-u" + strconv.Itoa(int(n))
}

// FollowerCount is author r's follower count in the initial graph.
func (c *SocialConfig) FollowerCount(r int) int {
	if r < c.BigAuthors {
		return c.Threshold + 1 + int(float64(c.Users-2-c.Threshold)/math.Pow(float64(r+1), c.FollowZipfS))
	}
	return int(float64(c.PushTop) / math.Pow(float64(r-c.BigAuthors+1), c.FollowZipfS))
}

// SocialOp is one generated operation, before its intended start gives
// it a time.
type SocialOp struct {
	Seq     int64
	Kind    string // SocialPost, SocialFollow, SocialUnfollow or SocialDelete
	Subject string
	// User is the follower of a follow or unfollow.
	User int32
	// Author is the followed (follow, unfollow), the poster (post) or the
	// deleted post's author (delete).
	Author int32
	// Post numbers posts 0, 1, 2, ...; a delete's Post is the deleted
	// post's number.
	Post int64
	// Probe numbers probe posts 0, 1, 2, ...; -1 for any other operation.
	Probe int64
	// Pull says a probe post's author is a big (pulled) one.
	Pull bool
	// PostSeq is, for a delete, the Seq of the post it deletes.
	PostSeq int64

	node [8]byte // clock sequence and node of a post's id
	fill byte
}

// ProbeAuthor is an author whose posts are timed into its followers'
// timelines.
type ProbeAuthor struct {
	Author    int32
	Followers int  // in the initial graph
	Pull      bool // a big author: merged at read time
	// Sample are the followers timed for the lag (never unfollowed).
	Sample []int32
}

// SocialGen makes the graph and the operations; not safe for concurrent
// use (the arrival scheduler calls Next from one goroutine).
type SocialGen struct {
	cfg SocialConfig
	rng *rand.Rand

	followers [][]int32 // initial followers of each author, sorted; nil when none
	edges     int
	following map[uint64]struct{} // the graph as the generator's operations left it
	touched   map[uint64]struct{} // edges a run operation followed or unfollowed
	reserved  map[uint64]struct{} // lag-sample edges, never unfollowed
	// unfollowable are initial edges not yet unfollowed nor reserved.
	unfollowable []uint64

	probeAuthors []ProbeAuthor
	posters      picker
	followed     picker

	// Smooth weighted round robin over the kinds.
	kinds   []string
	weights []float64
	current []float64

	posts, probes int64
	recent        []recentPost
	nodeBase      uint64
}

type recentPost struct {
	seq, post int64
	author    int32
}

func edgeKey(user, author int32) uint64 { return uint64(uint32(user))<<32 | uint64(uint32(author)) }

// NewSocialGen validates cfg and builds the initial graph.
func NewSocialGen(cfg SocialConfig) (*SocialGen, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid social workload: %w", err)
	}
	g := &SocialGen{
		cfg: cfg, rng: newRand(cfg.Seed, 3),
		followers: make([][]int32, cfg.Users),
		following: map[uint64]struct{}{}, touched: map[uint64]struct{}{}, reserved: map[uint64]struct{}{},
		nodeBase: splitmix(cfg.Seed ^ 0x5ec1a1),
	}
	for r := range cfg.Users {
		n := cfg.FollowerCount(r)
		if n <= 0 {
			continue
		}
		g.followers[r] = sampleFollowers(newRand(cfg.Seed, 1000+uint64(r)), cfg.Users, int32(r), n)
		g.edges += n
		for _, f := range g.followers[r] {
			g.following[edgeKey(f, int32(r))] = struct{}{}
		}
	}
	for r := range cfg.BigAuthors {
		g.addProbeAuthor(int32(r), true)
	}
	for j, step := 0, 1; j < cfg.ProbeAuthors; j, step = j+1, step*10 {
		r := cfg.BigAuthors + step - 1
		if r >= cfg.Users || len(g.followers[r]) == 0 {
			break
		}
		g.addProbeAuthor(int32(r), false)
	}
	for r, fs := range g.followers {
		for _, f := range fs {
			if k := edgeKey(f, int32(r)); !contains(g.reserved, k) {
				g.unfollowable = append(g.unfollowable, k)
			}
		}
	}
	g.posters = newPicker(ZipfWeights(cfg.Users, cfg.PostZipfS))
	g.followed = newPicker(ZipfWeights(cfg.Users, cfg.FollowZipfS))
	for _, k := range []struct {
		name string
		rate float64
	}{{SocialPost, cfg.PostRate}, {SocialFollow, cfg.FollowRate}, {SocialUnfollow, cfg.UnfollowRate}, {SocialDelete, cfg.DeleteRate}} {
		if k.rate > 0 {
			g.kinds = append(g.kinds, k.name)
			g.weights = append(g.weights, k.rate)
		}
	}
	g.current = make([]float64, len(g.kinds))
	return g, nil
}

func contains(m map[uint64]struct{}, k uint64) bool { _, ok := m[k]; return ok }

func (g *SocialGen) addProbeAuthor(a int32, pull bool) {
	fs := g.followers[a]
	sample := slices.Clone(fs[:min(len(fs), g.cfg.LagSample)])
	for _, f := range sample {
		g.reserved[edgeKey(f, a)] = struct{}{}
	}
	g.probeAuthors = append(g.probeAuthors, ProbeAuthor{Author: a, Followers: len(fs), Pull: pull, Sample: sample})
}

// sampleFollowers draws n distinct users of [0, users) other than author
// (Floyd's algorithm), sorted.
func sampleFollowers(rng *rand.Rand, users int, author int32, n int) []int32 {
	m := users - 1 // candidates: every user but the author
	n = min(n, m)
	chosen := make(map[int32]struct{}, n)
	out := make([]int32, 0, n)
	for j := m - n; j < m; j++ {
		t := int32(rng.IntN(j + 1))
		if _, ok := chosen[t]; ok {
			t = int32(j)
		}
		chosen[t] = struct{}{}
		u := t
		if u >= author {
			u++
		}
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

// Config returns the configuration the generator was made with.
func (g *SocialGen) Config() SocialConfig { return g.cfg }

// Edges is the number of follows in the initial graph.
func (g *SocialGen) Edges() int { return g.edges }

// Followers returns author's followers in the initial graph, sorted; do
// not modify.
func (g *SocialGen) Followers(author int32) []int32 { return g.followers[author] }

// ProbeAuthors returns the authors of probe posts: the big authors, then
// the pushed ones.
func (g *SocialGen) ProbeAuthors() []ProbeAuthor { return g.probeAuthors }

// SetupFollows calls fn with every follow of the initial graph, author by
// author: the setup phase publishes them before the load.
func (g *SocialGen) SetupFollows(fn func(user, author int32)) {
	for a, fs := range g.followers {
		for _, f := range fs {
			fn(f, int32(a))
		}
	}
}

// Following says whether user follows author in the graph as the
// generator's operations so far leave it (whether or not they were
// published).
func (g *SocialGen) Following(user, author int32) bool {
	return contains(g.following, edgeKey(user, author))
}

// Next returns operation seq. Call it with seq 0, 1, 2, ... in order.
func (g *SocialGen) Next(seq int64) SocialOp {
	best := 0
	total := 0.0
	for i, w := range g.weights {
		g.current[i] += w
		total += w
		if g.current[i] > g.current[best] {
			best = i
		}
	}
	g.current[best] -= total
	op := SocialOp{Seq: seq, Kind: g.kinds[best], Probe: -1}
	switch op.Kind {
	case SocialFollow:
		if !g.pickFollow(&op) {
			op.Kind = SocialPost
		}
	case SocialUnfollow:
		if !g.pickUnfollow(&op) {
			op.Kind = SocialPost
		}
	case SocialDelete:
		if !g.pickDelete(&op) {
			op.Kind = SocialPost
		}
	}
	if op.Kind == SocialPost {
		g.makePost(&op)
	}
	op.Subject = "events." + op.Kind
	if op.Kind == SocialPost {
		op.Subject = "events." + g.cfg.PostType
	}
	return op
}

func (g *SocialGen) pickFollow(op *SocialOp) bool {
	for range 32 {
		f := int32(g.rng.IntN(g.cfg.Users))
		a := int32(g.followed.pick(g.rng))
		k := edgeKey(f, a)
		if f == a || contains(g.following, k) || contains(g.touched, k) {
			continue
		}
		g.following[k] = struct{}{}
		g.touched[k] = struct{}{}
		op.User, op.Author = f, a
		return true
	}
	return false
}

func (g *SocialGen) pickUnfollow(op *SocialOp) bool {
	if len(g.unfollowable) == 0 {
		return false
	}
	i := g.rng.IntN(len(g.unfollowable))
	k := g.unfollowable[i]
	g.unfollowable[i] = g.unfollowable[len(g.unfollowable)-1]
	g.unfollowable = g.unfollowable[:len(g.unfollowable)-1]
	delete(g.following, k)
	g.touched[k] = struct{}{}
	op.User, op.Author = int32(k>>32), int32(uint32(k))
	return true
}

func (g *SocialGen) pickDelete(op *SocialOp) bool {
	// Posts at least DeleteMinAge of schedule old are a prefix of recent.
	minGap := int64(g.cfg.DeleteMinAge.Seconds() * g.cfg.Rate())
	n := 0
	for n < len(g.recent) && g.recent[n].seq <= op.Seq-minGap {
		n++
	}
	if n == 0 {
		return false
	}
	i := g.rng.IntN(n)
	p := g.recent[i]
	g.recent = slices.Delete(g.recent, i, i+1)
	op.Author, op.Post, op.PostSeq = p.author, p.post, p.seq
	return true
}

func (g *SocialGen) makePost(op *SocialOp) {
	op.Post = g.posts
	g.posts++
	// Drawn for every post, so probes do not reshuffle the rest.
	author := int32(g.posters.pick(g.rng))
	op.fill = byte('a' + g.rng.IntN(26))
	binary.BigEndian.PutUint64(op.node[:], g.nodeBase+uint64(op.Post))
	op.node[2] |= 0x01 // multicast bit: never a real IEEE 802 address
	if c := g.cfg.ProbeEvery; c > 0 && len(g.probeAuthors) > 0 && op.Post%c == 0 {
		pa := g.probeAuthors[g.probes%int64(len(g.probeAuthors))]
		op.Author, op.Probe, op.Pull = pa.Author, g.probes, pa.Pull
		g.probes++
		return
	}
	op.Author = author
	if len(g.recent) >= g.cfg.RecentPosts {
		g.recent = append(g.recent[:0], g.recent[len(g.recent)/2:]...)
	}
	g.recent = append(g.recent, recentPost{seq: op.Seq, post: op.Post, author: author})
}

// PostID returns the id of post op started at intended: a version 1 UUID
// of that time, its clock sequence and node from the seed and the post
// number, so every post of a run has its own.
func (op *SocialOp) PostID(intended time.Time) uuid.UUID {
	id, err := bucket.NewTimeUUID(intended, op.node)
	if err != nil {
		panic("BUG: a post time out of the TimeUUID range: " + err.Error())
	}
	return id
}

// Body returns the JSON body of op started at intended. A post carries
// its own id (so deletes can name it) and no time (the id's); a delete
// names the post by deleted, its id.
func (op *SocialOp) Body(dst []byte, run string, intended time.Time, postSize int, deleted uuid.UUID) []byte {
	t := intended.UnixMilli()
	switch op.Kind {
	case SocialFollow, SocialUnfollow:
		return fmt.Appendf(dst, `{"time":%d,"user":%q,"author":%q}`, t, UserName(run, op.User), UserName(run, op.Author))
	case SocialDelete:
		return fmt.Appendf(dst, `{"time":%d,"author":%q,"data":{"post_id":%q}}`, t, UserName(run, op.Author), deleted.String())
	}
	id := op.PostID(intended)
	if op.Probe >= 0 {
		return fmt.Appendf(dst, `{"id":%q,"author":%q,"data":{"probe":%d}}`, id.String(), UserName(run, op.Author), op.Probe)
	}
	dst = fmt.Appendf(dst, `{"id":%q,"author":%q,"data":{"post":%d,"text":"`, id.String(), UserName(run, op.Author), op.Post)
	for range max(postSize-len(dst)-len(`"}}`), 1) {
		dst = append(dst, op.fill)
	}
	return append(dst, `"}}`...)
}

// splitmix is SplitMix64's finalizer: a seed mixed into well spread bits.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
