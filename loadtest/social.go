package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventide/eventide/loadtest/internal/arrival"
	"github.com/eventide/eventide/loadtest/internal/hist"
	"github.com/eventide/eventide/loadtest/internal/jspub"
	"github.com/eventide/eventide/loadtest/internal/report"
	"github.com/eventide/eventide/loadtest/internal/workload"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The social workload at run time: the setup phase (the initial graph's
// follows, then a wait until the fan-out worker has applied them), the
// open-loop operations, and what they left for the correctness check:
// which operations were acknowledged, and when, for the edges of the
// probe authors and for deleted posts.

// socialLoad is the social workload of one run.
type socialLoad struct {
	cfg    *config
	js     jetstream.JetStream // the setup's publishes
	nc     *nats.Conn          // the operations' (jspub)
	api    *apiClient
	gen    *workload.SocialGen
	run    string // the run id in the user names
	probes map[int32]bool
	fan    *fanoutTracker

	lat     *hist.Set        // "social.publish", one slot: only the ack handler records
	dropped map[string]int64 // by kind, on the scheduler goroutine
	// buf and msg are the scheduler's, reused for every publish.
	buf []byte
	msg nats.Msg

	acked, failed atomic.Int64
	setup         *report.SocialSetup
	graphCheck    report.Check

	mu sync.Mutex
	// posts are the recent posts by number (deletes look their ids up):
	// bounded, pruned to the last 4 * RecentPosts.
	posts    map[int64]postState
	lastPost int64
	// edges are the outcomes of the run's follows and unfollows of the
	// probe authors.
	edges map[uint64]edgeOutcome
	// deletes are the acknowledged deletes of posts acknowledged before
	// the delete was published: their posts must be gone (at most
	// maxCheckedDeletes kept).
	deletes []deletedPost
	// maxSeq is the highest stream sequence of an acknowledged operation.
	maxSeq uint64
	// ackedByKind counts acknowledged operations by kind.
	ackedByKind map[string]int64
	// errors counts failed operations by kind and cause.
	errors map[string]int64
}

// socialLatSlots is the number of histogram slots the social operations
// record into (hist.NewSet).
const socialLatSlots = 1

const maxCheckedDeletes = 10_000

type postState struct {
	id      uuid.UUID
	author  int32
	started time.Time // publish started
	acked   bool
}

type edgeOutcome struct {
	follow bool // else an unfollow
	state  int  // outcomeAcked, outcomeFailed or outcomeDropped
	ackAt  time.Time
}

const (
	outcomeAcked = iota
	outcomeFailed
	outcomeDropped
)

type deletedPost struct {
	id     uuid.UUID
	author int32
	time   time.Time
}

// socialInFlight is one operation in flight: what its outcome updates,
// and its permit.
type socialInFlight struct {
	op        workload.SocialOp
	started   time.Time // publish sent
	deleted   postState // a delete's post, as known when the delete was sent
	deletable bool
	release   func()
}

func newSocialLoad(cfg *config, js jetstream.JetStream, nc *nats.Conn, api *apiClient) (*socialLoad, error) {
	sc := cfg.Social
	sc.Seed, sc.Run = cfg.Seed, cfg.Run
	gen, err := workload.NewSocialGen(sc)
	if err != nil {
		return nil, err
	}
	l := &socialLoad{
		cfg: cfg, js: js, nc: nc, api: api, gen: gen, run: cfg.Run, probes: map[int32]bool{},
		posts: map[int64]postState{}, edges: map[uint64]edgeOutcome{}, ackedByKind: map[string]int64{},
	}
	for _, pa := range gen.ProbeAuthors() {
		l.probes[pa.Author] = true
	}
	return l, nil
}

func (l *socialLoad) user(n int32) string { return workload.UserName(l.run, n) }

// runSetup publishes the initial graph's follows (--setup-workers
// at a time, each retried with a Nats-Msg-Id so the stream keeps one),
// then waits until the fan-out worker has applied them and checks the
// probe authors' follower counts over HTTP.
func (l *socialLoad) runSetup(ctx context.Context, p *progress) error {
	total := l.gen.Edges()
	p.note("social setup: %d users, %d follows to publish (%d big authors above the fan-out threshold %d)",
		l.cfg.Social.Users, total, l.cfg.Social.BigAuthors, l.cfg.Social.Threshold)
	type follow struct {
		n            int
		user, author int32
	}
	work := make(chan follow, 1024)
	var published atomic.Int64
	var maxSeq atomic.Uint64
	var firstErr error
	var errOnce sync.Once
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for range l.cfg.SetupWorkers {
		wg.Go(func() {
			var buf []byte
			for f := range work {
				buf = fmt.Appendf(buf[:0], `{"time":%d,"user":%q,"author":%q}`, time.Now().UnixMilli(), l.user(f.user), l.user(f.author))
				msg := &nats.Msg{Subject: "events." + workload.SocialFollow, Data: buf,
					Header: nats.Header{jetstream.MsgIDHeader: {"lt-" + l.run + "-setup-" + strconv.Itoa(f.n)}}}
				var err error
				for range 3 {
					pctx, c := context.WithTimeout(sctx, l.cfg.PublishLimit)
					var ack *jetstream.PubAck
					ack, err = l.js.PublishMsg(pctx, msg)
					c()
					if err == nil {
						for {
							cur := maxSeq.Load()
							if ack.Sequence <= cur || maxSeq.CompareAndSwap(cur, ack.Sequence) {
								break
							}
						}
						break
					}
					if sctx.Err() != nil {
						break
					}
				}
				if err != nil {
					errOnce.Do(func() {
						firstErr = fmt.Errorf("cannot publish setup follow %s -> %s: %w", l.user(f.user), l.user(f.author), err)
						cancel()
					})
					continue
				}
				published.Add(1)
			}
		})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-sctx.Done():
				return
			case <-t.C:
				n := published.Load()
				p.note("social setup: %d/%d follows published (%.0f/s)", n, total, float64(n)/time.Since(start).Seconds())
			}
		}
	}()
	n := 0
	l.gen.SetupFollows(func(user, author int32) {
		if sctx.Err() != nil {
			return
		}
		select {
		case work <- follow{n, user, author}:
		case <-sctx.Done():
		}
		n++
	})
	close(work)
	wg.Wait()
	cancel()
	<-done
	if firstErr != nil {
		return firstErr
	}
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	publishTime := time.Since(start)
	p.note("social setup: %d follows published in %.1fs; waiting for the fan-out worker to apply them (at most %s)", total, publishTime.Seconds(), l.cfg.SetupTimeout)
	if err := l.waitApplied(ctx, maxSeq.Load(), time.Now().Add(l.cfg.SetupTimeout)); err != nil {
		var ce configError
		if errors.As(err, &ce) {
			return configError{fmt.Errorf("social setup: %w", err)}
		}
		return fmt.Errorf("social setup: %w", err)
	}
	applied := time.Since(start)
	l.setup = &report.SocialSetup{
		Follows: int64(total), PublishSeconds: publishTime.Seconds(), AppliedSeconds: applied.Seconds(),
		FollowsPerSecond: float64(total) / applied.Seconds(),
	}
	l.graphCheck = l.checkGraph(ctx)
	p.note("social setup: applied after %.1fs (%.0f follows/s); %s", applied.Seconds(), l.setup.FollowsPerSecond, l.graphCheck.Detail)
	return nil
}

// waitApplied waits until the fan-out worker's freshness (what
// /v1/users/{user}/followers reflects) reaches stream sequence seq.
func (l *socialLoad) waitApplied(ctx context.Context, seq uint64, deadline time.Time) error {
	path := "/v1/users/" + url.PathEscape(l.user(0)) + "/followers?limit=1"
	for {
		var ans struct {
			Freshness *struct {
				Shards []struct {
					AppliedSeq uint64 `json:"applied_seq"`
				} `json:"shards"`
			} `json:"freshness"`
		}
		err := l.api.get(ctx, path, &ans)
		var st *httpStatusError
		if errors.As(err, &st) && st.Status == http.StatusNotFound {
			return configError{fmt.Errorf("the server has no follow graph (%s answers 404): is its fan-out worker off (--fanout=false)? %w", path, err)}
		}
		if err == nil {
			if ans.Freshness == nil || len(ans.Freshness.Shards) == 0 {
				return nil // an API without freshness: the checks' retries will wait
			}
			least := ans.Freshness.Shards[0].AppliedSeq
			for _, s := range ans.Freshness.Shards {
				least = min(least, s.AppliedSeq)
			}
			if least >= seq {
				return nil
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("the fan-out worker did not apply stream sequence %d in time: %w", seq, err)
			}
			return fmt.Errorf("the fan-out worker did not apply stream sequence %d in time", seq)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted: %w", context.Cause(ctx))
		case <-time.After(100 * time.Millisecond): // polling the server's state, with a deadline
		}
	}
}

// checkGraph reads every probe author's followers over HTTP and compares
// their number with the graph published.
func (l *socialLoad) checkGraph(ctx context.Context) report.Check {
	c := report.Check{Name: "follow graph applied", Passed: true}
	checked := 0
	for _, pa := range l.gen.ProbeAuthors() {
		n, err := l.api.followerCount(ctx, l.user(pa.Author))
		if err != nil {
			c.Passed = false
			c.Detail = fmt.Sprintf("cannot read the followers of %s: %v", l.user(pa.Author), err)
			return c
		}
		if n != pa.Followers {
			c.Passed = false
			c.Detail = fmt.Sprintf("%s has %d followers over HTTP, %d published", l.user(pa.Author), n, pa.Followers)
			return c
		}
		checked += n
	}
	c.Detail = fmt.Sprintf("the %d probe authors have the %d followers published", len(l.gen.ProbeAuthors()), checked)
	return c
}

// start prepares the run-time load: its counts and histograms.
func (l *socialLoad) start(lat *hist.Set, fan *fanoutTracker) {
	l.lat, l.fan = lat, fan
	l.dropped = map[string]int64{}
	l.errors = map[string]int64{}
}

// runOps runs the operations open loop, as the event workload's
// publishes (eventLoad): sent by the scheduler, ended by their ack, at
// most --social-workers in flight.
func (l *socialLoad) runOps(ctx context.Context) (arrival.Stats, error) {
	pub, err := jspub.New(ctx, l.nc, jspub.Config[socialInFlight]{Timeout: l.cfg.PublishLimit, Done: l.done})
	if err != nil {
		return arrival.Stats{}, err
	}
	defer pub.Close()
	return arrival.RunAsync(ctx, arrival.AsyncConfig[workload.SocialOp]{
		Rate: l.cfg.Social.Rate(), Duration: l.cfg.Duration, InFlight: l.cfg.SocialWorkers,
		MaxLateness: l.cfg.MaxLateness,
		Next:        l.gen.Next,
		Start: func(_ context.Context, op workload.SocialOp, intended time.Time, release func()) {
			l.publish(pub, op, intended, release)
		},
		Dropped: func(op workload.SocialOp, intended time.Time) {
			kind := op.Kind
			if op.Probe >= 0 {
				kind = "probe_post"
			}
			l.dropped[kind]++
			l.mu.Lock()
			defer l.mu.Unlock()
			switch op.Kind {
			case workload.SocialFollow, workload.SocialUnfollow:
				if l.probes[op.Author] {
					l.edges[edgeKey(op.User, op.Author)] = edgeOutcome{follow: op.Kind == workload.SocialFollow, state: outcomeDropped}
				}
			case workload.SocialPost:
				l.notePostLocked(op, intended, time.Time{})
			}
		},
	})
}

func edgeKey(user, author int32) uint64 { return uint64(uint32(user))<<32 | uint64(uint32(author)) }

// notePostLocked records post op (started at started; zero when dropped)
// for the deletes that will name it.
func (l *socialLoad) notePostLocked(op workload.SocialOp, intended, started time.Time) {
	if op.Probe >= 0 {
		return
	}
	l.posts[op.Post] = postState{id: op.PostID(intended), author: op.Author, started: started}
	l.lastPost = max(l.lastPost, op.Post)
	if keep := int64(4 * l.cfg.Social.RecentPosts); int64(len(l.posts)) > 2*keep {
		for n := range l.posts {
			if n < l.lastPost-keep {
				delete(l.posts, n)
			}
		}
	}
}

// publish sends op; done receives its outcome.
func (l *socialLoad) publish(pub *jspub.Publisher[socialInFlight], op workload.SocialOp, intended time.Time, release func()) {
	started := time.Now()
	var deleted postState
	var deletable bool
	switch op.Kind {
	case workload.SocialPost:
		if op.Probe >= 0 {
			l.fan.publishing(op, intended, started)
		} else {
			l.mu.Lock()
			l.notePostLocked(op, intended, started)
			l.mu.Unlock()
		}
	case workload.SocialDelete:
		l.mu.Lock()
		deleted, deletable = l.posts[op.Post]
		l.mu.Unlock()
		if !deletable {
			// Pruned (the run is far ahead of its schedule's deletes):
			// the id is still the post's.
			deleted.id = uuid.Nil
		}
	}
	l.buf = op.Body(l.buf[:0], l.run, intended, l.cfg.Social.PostSize, deleted.id)
	l.msg = nats.Msg{Subject: op.Subject, Data: l.buf}
	pub.Publish(&l.msg, socialInFlight{op: op, started: started, deleted: deleted, deletable: deletable, release: release}, intended)
}

// done records one operation's outcome and releases its permit.
func (l *socialLoad) done(f socialInFlight, intended, ackAt time.Time, seq uint64, err error) {
	defer f.release()
	op := f.op
	if err != nil {
		l.failed.Add(1)
	} else {
		l.lat.Record(0, "social.publish", ackAt.Sub(intended))
		l.acked.Add(1)
	}
	if op.Probe >= 0 {
		if err != nil {
			l.fan.failed(op.Probe)
		} else {
			l.fan.acked(op.Probe)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.errors["social."+op.Kind+"."+publishErrorCause(err)]++
	} else {
		l.maxSeq = max(l.maxSeq, seq)
		kind := op.Kind
		if op.Probe >= 0 {
			kind = "probe_post"
		}
		l.ackedByKind[kind]++
	}
	switch op.Kind {
	case workload.SocialPost:
		if op.Probe < 0 && err == nil {
			if p, ok := l.posts[op.Post]; ok {
				p.acked = true
				l.posts[op.Post] = p
			}
		}
	case workload.SocialFollow, workload.SocialUnfollow:
		if l.probes[op.Author] {
			o := edgeOutcome{follow: op.Kind == workload.SocialFollow, state: outcomeAcked, ackAt: ackAt}
			if err != nil {
				o.state = outcomeFailed
			}
			l.edges[edgeKey(op.User, op.Author)] = o
		}
	case workload.SocialDelete:
		// Only a post acknowledged before its delete was published is
		// surely before it in the stream.
		deleted := f.deleted
		if err == nil && f.deletable && deleted.acked && deleted.started.Before(f.started) && len(l.deletes) < maxCheckedDeletes {
			if t, terr := postTime(deleted.id); terr == nil {
				l.deletes = append(l.deletes, deletedPost{id: deleted.id, author: op.Author, time: t})
			}
		}
	}
}

// errorTotals returns the error counts; call after the run.
func (l *socialLoad) errorTotals() map[string]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.errors)
}

// followerCount pages through user's followers and counts them.
func (a *apiClient) followerCount(ctx context.Context, user string) (int, error) {
	q := url.Values{"limit": {"10000"}}
	n := 0
	for {
		var page struct {
			Users    []string `json:"users"`
			NextPage string   `json:"next_page"`
		}
		if err := a.get(ctx, "/v1/users/"+url.PathEscape(user)+"/followers?"+q.Encode(), &page); err != nil {
			return n, err
		}
		n += len(page.Users)
		if page.NextPage == "" {
			return n, nil
		}
		q.Set("page", page.NextPage)
	}
}
