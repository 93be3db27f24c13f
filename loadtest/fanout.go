package main

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/loadtest/internal/hist"
	"github.com/eventide/eventide/loadtest/internal/report"
	"github.com/eventide/eventide/loadtest/internal/workload"
	"github.com/google/uuid"
)

// fanoutTracker times probe posts from their intended publish until they
// are in the timelines of every sampled follower of their author (the
// fan-out lag: "fanout.push" for pushed authors, "fanout.pull" for big
// ones merged at read time), polling those timelines every
// --fanout-interval. That interval plus one timeline read is the
// resolution. It keeps every probe post (one small struct each) for the
// correctness check.
type fanoutTracker struct {
	api     *apiClient
	run     string
	lat     *hist.Set // one worker: the poller
	samples map[int32][]int32
	// byAuthor holds the same lags by probe author (kind: its user
	// number), for the report's per-author figures.
	byAuthor *hist.Set

	mu     sync.Mutex
	probes map[int64]*probePost
	// waiting are the probes neither timed nor failed: what the poller
	// and the drain look at, however many probes the run made.
	waiting map[int64]*probePost
	timed   int64
}

type probePost struct {
	n                 int64
	id                uuid.UUID
	author            int32
	pull              bool
	intended, started time.Time
	acked, failed     bool
	timed             bool
	seen              []time.Time // per sampled follower; zero until seen
	seenCount         int
}

func newFanoutTracker(api *apiClient, run string, gen *workload.SocialGen, lat *hist.Set) *fanoutTracker {
	f := &fanoutTracker{api: api, run: run, lat: lat, samples: map[int32][]int32{}, probes: map[int64]*probePost{}, waiting: map[int64]*probePost{},
		byAuthor: hist.NewSet(1, time.Now())}
	for _, pa := range gen.ProbeAuthors() {
		f.samples[pa.Author] = pa.Sample
	}
	return f
}

func (f *fanoutTracker) publishing(op workload.SocialOp, intended, started time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := &probePost{
		n: op.Probe, id: op.PostID(intended), author: op.Author, pull: op.Pull,
		intended: intended, started: started, seen: make([]time.Time, len(f.samples[op.Author])),
	}
	f.probes[op.Probe] = p
	f.waiting[op.Probe] = p
}

func (f *fanoutTracker) acked(n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.probes[n]; p != nil {
		p.acked = true
		f.finishLocked(p)
	}
}

func (f *fanoutTracker) failed(n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.probes[n]; p != nil {
		p.failed = true
		delete(f.waiting, n)
	}
}

// finishLocked records p's lag once it is acknowledged and seen by every
// sampled follower.
func (f *fanoutTracker) finishLocked(p *probePost) {
	if p.timed || !p.acked || p.seenCount < len(p.seen) {
		return
	}
	last := p.intended
	for _, t := range p.seen {
		if t.After(last) {
			last = t
		}
	}
	kind := "fanout.push"
	if p.pull {
		kind = "fanout.pull"
	}
	f.lat.Record(0, kind, last.Sub(p.intended))
	f.byAuthor.Record(0, strconv.Itoa(int(p.author)), last.Sub(p.intended))
	p.timed = true
	f.timed++
	delete(f.waiting, p.n)
}

// outstanding returns how many acknowledged probe posts are not yet timed
// and how many are still being published.
func (f *fanoutTracker) outstanding() (pending, inFlight int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.waiting {
		switch {
		case p.acked:
			pending++
		default:
			inFlight++
		}
	}
	return pending, inFlight
}

// authorLag returns the fan-out lag summary of author's probe posts.
func (f *fanoutTracker) authorLag(author int32) (hist.Summary, bool) {
	f.byAuthor.Tick(time.Now())
	s := f.byAuthor.Summary(strconv.Itoa(int(author)))
	return s, s.Count > 0
}

func (f *fanoutTracker) counts() (acked, timed int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.probes {
		if p.acked {
			acked++
		}
	}
	return acked, f.timed
}

// poll reads, every interval, the first page of each sampled follower's
// timeline that still waits for a probe post, until ctx is done.
func (f *fanoutTracker) poll(ctx context.Context, interval time.Duration, errs *errorCounts) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		waiting := map[int32][]*probePost{}
		f.mu.Lock()
		for _, p := range f.waiting {
			for i, u := range f.samples[p.author] {
				if p.seen[i].IsZero() {
					waiting[u] = append(waiting[u], p)
				}
			}
		}
		f.mu.Unlock()
		var wg sync.WaitGroup
		sem := make(chan struct{}, 4)
		for u := range waiting {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				ids := map[uuid.UUID]bool{}
				path := "/v1/timeline/" + url.PathEscape(workload.UserName(f.run, u)) + "?limit=100"
				var page timelinePage
				err := f.api.get(ctx, path, &page)
				at := time.Now()
				if err != nil {
					if ctx.Err() == nil {
						errs.add("fanout_poll." + apiErrorCause(err))
					}
					return
				}
				for _, p := range page.Posts {
					if id, err := uuid.Parse(p.ID); err == nil {
						ids[id] = true
					}
				}
				f.mu.Lock()
				defer f.mu.Unlock()
				for _, p := range f.waiting {
					if !ids[p.id] {
						continue
					}
					if i := slices.Index(f.samples[p.author], u); i >= 0 && p.seen[i].IsZero() {
						p.seen[i] = at
						p.seenCount++
						f.finishLocked(p)
					}
				}
			})
		}
		wg.Wait()
	}
}

type timelinePage struct {
	Posts []struct {
		ID   string    `json:"id"`
		Time time.Time `json:"time"`
	} `json:"posts"`
	NextPage string `json:"next_page"`
}

// timelineSince calls fn with every post of user's timeline newer than
// since (and the rest of the page reaching past it), newest first,
// following the pages.
func (a *apiClient) timelineSince(ctx context.Context, user string, since time.Time, fn func(id uuid.UUID, t time.Time)) error {
	q := url.Values{"limit": {"1000"}}
	for {
		var page timelinePage
		if err := a.get(ctx, "/v1/timeline/"+url.PathEscape(user)+"?"+q.Encode(), &page); err != nil {
			return err
		}
		for _, p := range page.Posts {
			id, err := uuid.Parse(p.ID)
			if err != nil {
				return fmt.Errorf("timeline of %s: post id %q: %w", user, p.ID, err)
			}
			fn(id, p.Time)
		}
		if page.NextPage == "" || (len(page.Posts) > 0 && page.Posts[len(page.Posts)-1].Time.Before(since)) {
			return nil
		}
		q.Set("page", page.NextPage)
	}
}

func postTime(id uuid.UUID) (time.Time, error) { return bucket.TimeOf(id) }

// A follower's expectations for the check: the probe posts of the
// authors it must have (present), must not have (absent: it unfollowed
// them), and deleted posts it must not have.
type followerExpect struct {
	present, absent []*probePost
	deleted         []deletedPost
}

func (x *followerExpect) since() time.Time {
	var s time.Time
	upd := func(t time.Time) {
		if s.IsZero() || t.Before(s) {
			s = t
		}
	}
	for _, p := range x.present {
		upd(p.intended)
	}
	for _, p := range x.absent {
		upd(p.intended)
	}
	for _, d := range x.deleted {
		upd(d.time)
	}
	return s.Add(-time.Millisecond)
}

// judgement is what one follower's timeline says of its expectations.
type judgement struct {
	// missing are present-expected probe posts not in the timeline;
	// trimmed counts those missing from a timeline holding at least the
	// cap of newer posts (trimmed by the server, not missing).
	missing []*probePost
	trimmed int
	// unfollowedThere and deletedThere are posts that must not be in the
	// timeline and are.
	unfollowedThere []*probePost
	deletedThere    []deletedPost
}

// judge compares x with have, the timeline's posts (id and post time)
// read back to x.since().
func (x *followerExpect) judge(have map[uuid.UUID]time.Time, timelineCap int) judgement {
	var j judgement
	for _, p := range x.present {
		if _, ok := have[p.id]; ok {
			continue
		}
		newer := 0
		for _, t := range have {
			if t.After(p.intended) {
				newer++
			}
		}
		if newer >= timelineCap {
			j.trimmed++
		} else {
			j.missing = append(j.missing, p)
		}
	}
	for _, p := range x.absent {
		if _, ok := have[p.id]; ok {
			j.unfollowedThere = append(j.unfollowedThere, p)
		}
	}
	for _, d := range x.deleted {
		if _, ok := have[d.id]; ok {
			j.deletedThere = append(j.deletedThere, d)
		}
	}
	return j
}

func first(ps []*probePost) *probePost {
	if len(ps) == 0 {
		return nil
	}
	return ps[0]
}

// checkFanout reads the timelines of every follower of every probe
// author (and of a few followers of each deleted post's author) and
// checks, from the graph the generator made and the outcomes of the
// run's operations, that every acknowledged probe post reached every
// follower that followed its author before it and never unfollowed;
// that no unfollowed author's probe post and no deleted post is in a
// timeline. A follower whose follow or unfollow of the author failed
// without an ack, or whose follow was acknowledged after the post's
// publish began (the follow's backfill may or may not hold it), is
// skipped. A missing post is re-read until deadline (pushes are
// asynchronous); a post missing from a timeline of at least
// --timeline-cap newer posts counts as trimmed, not missing.
func (l *socialLoad) checkFanout(ctx context.Context, deadline time.Time) (reached, gone report.Check, deletesChecked int64) {
	reached = report.Check{Name: "probe posts reached followers"}
	gone = report.Check{Name: "deleted, unfollowed gone"}
	f := l.fan
	f.mu.Lock()
	byAuthor := map[int32][]*probePost{}
	for _, p := range f.probes {
		if p.acked {
			byAuthor[p.author] = append(byAuthor[p.author], p)
		}
	}
	f.mu.Unlock()
	l.mu.Lock()
	edges := maps.Clone(l.edges)
	deletes := slices.Clone(l.deletes)
	l.mu.Unlock()

	expect := map[int32]*followerExpect{}
	get := func(u int32) *followerExpect {
		x := expect[u]
		if x == nil {
			x = &followerExpect{}
			expect[u] = x
		}
		return x
	}
	var skipped int64
	runFollows := map[int32][]struct {
		user  int32
		ackAt time.Time
	}{}
	for k, o := range edges {
		if o.follow && o.state == outcomeAcked {
			a := int32(uint32(k))
			runFollows[a] = append(runFollows[a], struct {
				user  int32
				ackAt time.Time
			}{int32(k >> 32), o.ackAt})
		}
	}
	for a, posts := range byAuthor {
		for _, u := range l.gen.Followers(a) {
			o, touched := edges[edgeKey(u, a)]
			switch {
			case !touched || (!o.follow && o.state == outcomeDropped):
				get(u).present = append(get(u).present, posts...)
			case !o.follow && o.state == outcomeAcked:
				get(u).absent = append(get(u).absent, posts...)
			default:
				skipped += int64(len(posts))
			}
		}
		for _, rf := range runFollows[a] {
			for _, p := range posts {
				if rf.ackAt.Before(p.started) {
					get(rf.user).present = append(get(rf.user).present, p)
				} else {
					skipped++
				}
			}
		}
	}
	for _, d := range deletes {
		fs := l.gen.Followers(d.author)
		for _, u := range fs[:min(len(fs), 3)] {
			get(u).deleted = append(get(u).deleted, d)
		}
	}
	deletesChecked = int64(len(deletes))

	var mu sync.Mutex
	var pairsPresent, missing, trimmed, absentPairs, wrongAbsent, deletedPairs, wrongDeleted int64
	var firstMissing, firstWrong string
	var readErr error
	todo := slices.Sorted(maps.Keys(expect))
	for round := 0; len(todo) > 0; round++ {
		// The last round judges what is still missing.
		last := time.Now().After(deadline) || ctx.Err() != nil
		if round > 0 && !last {
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond): // pushes are asynchronous: read again, until the deadline
			}
		}
		var again []int32
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for _, u := range todo {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				x := expect[u]
				have := map[uuid.UUID]time.Time{}
				err := l.api.timelineSince(ctx, l.user(u), x.since(), func(id uuid.UUID, t time.Time) { have[id] = t })
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					readErr = fmt.Errorf("cannot read the timeline of %s: %w", l.user(u), err)
					return
				}
				j := x.judge(have, l.cfg.TimelineCap)
				if len(j.missing) > 0 && !last {
					again = append(again, u)
					return
				}
				pairsPresent += int64(len(x.present))
				missing += int64(len(j.missing))
				trimmed += int64(j.trimmed)
				absentPairs += int64(len(x.absent))
				wrongAbsent += int64(len(j.unfollowedThere))
				deletedPairs += int64(len(x.deleted))
				wrongDeleted += int64(len(j.deletedThere))
				if p := first(j.missing); p != nil && firstMissing == "" {
					firstMissing = fmt.Sprintf("probe post %s of %s is not in the timeline of %s", p.id, l.user(p.author), l.user(u))
				}
				if p := first(j.unfollowedThere); p != nil && firstWrong == "" {
					firstWrong = fmt.Sprintf("probe post %s of %s, unfollowed, is in the timeline of %s", p.id, l.user(p.author), l.user(u))
				}
				if len(j.deletedThere) > 0 && firstWrong == "" {
					d := j.deletedThere[0]
					firstWrong = fmt.Sprintf("deleted post %s of %s is in the timeline of %s", d.id, l.user(d.author), l.user(u))
				}
			})
		}
		wg.Wait()
		if readErr != nil {
			break
		}
		todo = again
	}
	if readErr != nil {
		reached.Detail, gone.Detail = readErr.Error(), readErr.Error()
		return reached, gone, deletesChecked
	}
	probes := 0
	for _, ps := range byAuthor {
		probes += len(ps)
	}
	reached.Passed = missing == 0 && probes > 0
	reached.Detail = fmt.Sprintf("%d acked probe posts by %d authors: %d post-follower pairs checked in %d timelines, %d missing, %d trimmed past the timeline cap, %d skipped (follow or unfollow raced the post or failed)",
		probes, len(byAuthor), pairsPresent, len(expect), missing, trimmed, skipped)
	if firstMissing != "" {
		reached.Detail += "; first: " + firstMissing
	}
	if probes == 0 {
		reached.Detail = "no probe post was acknowledged"
	}
	gone.Passed = wrongAbsent == 0 && wrongDeleted == 0
	gone.Detail = fmt.Sprintf("%d unfollowed post-follower pairs, %d still there; %d deleted posts, %d deleted post-follower pairs, %d still there",
		absentPairs, wrongAbsent, len(deletes), deletedPairs, wrongDeleted)
	if firstWrong != "" {
		gone.Detail += "; first: " + firstWrong
	}
	return reached, gone, deletesChecked
}
