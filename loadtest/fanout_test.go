package main

import (
	"testing"
	"time"

	"github.com/google/uuid"
)

// A follower's timeline is judged against what it must and must not hold:
// a missing probe post is missing unless at least the cap of newer posts
// hide it (trimmed); an unfollowed author's post or a deleted post that is
// there is wrong.
func TestJudgeTimeline(t *testing.T) {
	base := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	post := func(n int) *probePost {
		return &probePost{n: int64(n), id: uuid.New(), intended: base.Add(time.Duration(n) * time.Second)}
	}
	have := map[uuid.UUID]time.Time{}
	add := func(p *probePost) { have[p.id] = p.intended }
	kept, lost, oldLost, unfollowed, unfollowedGone := post(5), post(6), post(1), post(4), post(3)
	deleted, deletedGone := deletedPost{id: uuid.New(), time: base}, deletedPost{id: uuid.New(), time: base}
	add(kept)
	add(unfollowed)
	have[deleted.id] = deleted.time
	// Three other posts, at 1 s, 1.5 s and 2 s: two newer than oldLost
	// (at 1 s), none newer than lost.
	for i := range 3 {
		have[uuid.New()] = base.Add(time.Duration(2+i) * time.Second / 2)
	}
	x := &followerExpect{
		present: []*probePost{kept, lost, oldLost},
		absent:  []*probePost{unfollowed, unfollowedGone},
		deleted: []deletedPost{deleted, deletedGone},
	}
	j := x.judge(have, 5)
	if len(j.missing) != 2 || j.missing[0] != lost || j.missing[1] != oldLost || j.trimmed != 0 {
		t.Errorf("cap 5: missing %v, trimmed %d; want lost and oldLost missing", j.missing, j.trimmed)
	}
	if len(j.unfollowedThere) != 1 || j.unfollowedThere[0] != unfollowed || len(j.deletedThere) != 1 || j.deletedThere[0] != deleted {
		t.Errorf("unfollowed there %v, deleted there %v", j.unfollowedThere, j.deletedThere)
	}
	// oldLost has 4 newer posts (kept, unfollowed, two others): with a
	// cap of 4 it may have been trimmed; lost (the newest) may not.
	if j := x.judge(have, 4); len(j.missing) != 1 || j.missing[0] != lost || j.trimmed != 1 {
		t.Errorf("cap 4: missing %v, trimmed %d; want lost missing, oldLost trimmed", j.missing, j.trimmed)
	}
	if since := x.since(); !since.Before(base) {
		t.Errorf("since %v, want before the oldest expectation %v", since, base)
	}
}
