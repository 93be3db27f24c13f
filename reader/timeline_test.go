package reader

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

// putCopy stores a copy of a post in user's timeline (no TTL: the test
// checks the read's own bound), and the follow edge that makes it visible.
func putCopy(t *testing.T, db *storage.DB, user, author string, at time.Time, node byte) {
	t.Helper()
	id, err := bucket.NewTimeUUID(at, [8]byte{node})
	if err != nil {
		t.Fatal(err)
	}
	var b storage.Batch
	key := catalog.PostKey(id)
	b.Put(catalog.TimelineTable, []byte(user), key, []byte(catalog.ColAuthor), catalog.TextValue(author), 10)
	b.Put(catalog.TimelineTable, []byte(user), key, []byte(catalog.ColData), catalog.BlobValue([]byte("{}")), 10)
	b.Put(catalog.FollowingTable, []byte(user), catalog.NameKey(author), []byte(catalog.ColSince), catalog.BigintValue(1), 1)
	b.Put(catalog.FollowersTable, []byte(author), catalog.NameKey(user), []byte(catalog.ColSince), catalog.BigintValue(1), 1)
	if err := db.Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
}

func TestTimelineBoundsAndTokens(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	clock := &fixedClock{now: now}
	db := openStore(t, clock)
	if err := catalog.EnsureFanoutTables(db); err != nil {
		t.Fatal(err)
	}
	tl, err := NewTimelines(db, TimelineOptions{TimelineTTL: 24 * time.Hour, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	putCopy(t, db, "u", "a", now.Add(-time.Hour), 1)
	putCopy(t, db, "u", "b", now.Add(-2*time.Hour), 2)
	putCopy(t, db, "u", "a", now.Add(-25*time.Hour), 3) // older than the TTL: never walked
	putCopy(t, db, "v", "a", now.Add(-time.Hour), 4)
	ctx := context.Background()

	p, err := tl.Timeline(ctx, TimelineQuery{User: "u", Limit: 1})
	if err != nil || len(p.Posts) != 1 || p.Posts[0].Author != "a" || p.NextPage == "" {
		t.Fatalf("first page %+v %v", p, err)
	}
	p2, err := tl.Timeline(ctx, TimelineQuery{User: "u", Limit: 1, PageToken: p.NextPage})
	if err != nil || len(p2.Posts) != 1 || p2.Posts[0].Author != "b" {
		t.Fatalf("second page %+v %v", p2, err)
	}
	if p2.NextPage != "" {
		t.Fatalf("a third page after the TTL bound: token %q", p2.NextPage)
	}

	bad := []TimelineQuery{
		{User: ""},
		{User: "u", Limit: MaxTimelineLimit + 1},
		{User: "u", Limit: -1},
		{User: "v", PageToken: p.NextPage}, // another user's token
		{User: "u", PageToken: "not a token"},
	}
	for _, q := range bad {
		if _, err := tl.Timeline(ctx, q); !errors.Is(err, ErrInvalidQuery) {
			t.Errorf("%+v: err %v, want ErrInvalidQuery", q, err)
		}
	}

	f, err := tl.Followers(ctx, "a", 1, "")
	if err != nil || len(f.Names) != 1 || f.Names[0] != "u" || f.NextPage == "" {
		t.Fatalf("followers page %+v %v", f, err)
	}
	f2, err := tl.Followers(ctx, "a", 1, f.NextPage)
	if err != nil || len(f2.Names) != 1 || f2.Names[0] != "v" || f2.NextPage != "" {
		t.Fatalf("followers second page %+v %v", f2, err)
	}
	if _, err := tl.Following(ctx, "a", 1, f.NextPage); !errors.Is(err, ErrInvalidQuery) {
		t.Errorf("a followers token accepted by following: %v", err)
	}
}

// TestTimelinePulledPages merges ten pulled authors whose posts are
// spread unevenly (one author holds the newest 45, the others a few
// each) with a pushed timeline, and pages through it with several limits:
// every page is the next slice of the brute-force order, whatever the
// first page size each source starts with and however often one refills.
func TestTimelinePulledPages(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	clock := &fixedClock{now: now}
	db := openStore(t, clock)
	if err := catalog.EnsureFanoutTables(db); err != nil {
		t.Fatal(err)
	}
	tl, err := NewTimelines(db, TimelineOptions{TimelineTTL: 24 * time.Hour, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	type post struct {
		id     [16]byte
		author string
	}
	var want []post
	users := []string{"u", "w"}
	ctx := context.Background()
	var b storage.Batch
	at := now.Add(-time.Minute)
	add := func(author string, pulled bool) {
		at = at.Add(-time.Second)
		id, err := bucket.NewTimeUUID(at, [8]byte{1})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, post{id, author})
		key := catalog.PostKey(id)
		if pulled {
			b.Put(catalog.UserlineTable, []byte(author), key, []byte(catalog.ColData), catalog.BlobValue([]byte("{}")), 5)
			return
		}
		for _, user := range users {
			b.Put(catalog.TimelineTable, []byte(user), key, []byte(catalog.ColAuthor), catalog.TextValue(author), 10)
			b.Put(catalog.TimelineTable, []byte(user), key, []byte(catalog.ColData), catalog.BlobValue([]byte("{}")), 10)
		}
	}
	follow := func(user, author string) {
		b.Put(catalog.FollowingTable, []byte(user), catalog.NameKey(author), []byte(catalog.ColSince), catalog.BigintValue(1), 1)
	}
	for i := 0; i < 10; i++ {
		a := fmt.Sprintf("big%d", i)
		b.Put(catalog.FanoutLargeTable, catalog.LargePartition(), catalog.NameKey(a), nil, nil, 1)
		for _, user := range users {
			follow(user, a)
		}
	}
	for _, user := range users {
		follow(user, "small")
	}
	// w follows more authors than one slice of its following list takes
	// (followScanMin): its follow checks fall back to point reads.
	for i := 0; i < followScanMin+10; i++ {
		follow("w", fmt.Sprintf("other%03d", i))
	}
	// A copy by an author u does not follow (from an earlier follow period
	// whose cleanup has not run) is hidden.
	stale, err := bucket.NewTimeUUID(now.Add(-time.Second), [8]byte{2})
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range users {
		b.Put(catalog.TimelineTable, []byte(user), catalog.PostKey(stale), []byte(catalog.ColAuthor), catalog.TextValue("gone"), 10)
		b.Put(catalog.TimelineTable, []byte(user), catalog.PostKey(stale), []byte(catalog.ColData), catalog.BlobValue([]byte("{}")), 10)
	}
	for n := 0; n < 45; n++ {
		add("big0", true)
		if n%9 == 0 {
			add("small", false)
		}
	}
	for n := 0; n < 3; n++ {
		for i := 1; i < 10; i++ {
			add(fmt.Sprintf("big%d", i), true)
		}
		add("small", false)
	}
	for n := 0; n < 4; n++ {
		add("big7", true)
	}
	if err := db.Apply(ctx, &b); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		user  string
		limit int
	}{{"u", 1}, {"u", 3}, {"u", 20}, {"u", 50}, {"u", 200}, {"w", 3}, {"w", 20}} {
		user, limit := c.user, c.limit
		var got []post
		token := ""
		for pages := 0; ; pages++ {
			if pages > len(want)+1 {
				t.Fatalf("%s limit %d: more pages than posts", user, limit)
			}
			p, err := tl.Timeline(ctx, TimelineQuery{User: user, Limit: limit, PageToken: token})
			if err != nil {
				t.Fatalf("%s limit %d page %d: %v", user, limit, pages, err)
			}
			if p.Pulled != 10 || len(p.Posts) > limit {
				t.Fatalf("%s limit %d page %d: %d posts, %d pulled", user, limit, pages, len(p.Posts), p.Pulled)
			}
			for _, q := range p.Posts {
				got = append(got, post{q.ID, q.Author})
			}
			if token = p.NextPage; token == "" {
				break
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%s limit %d: %d posts, want %d", user, limit, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s limit %d: post %d is %x by %s, want %x by %s", user, limit, i, got[i].id, got[i].author, want[i].id, want[i].author)
			}
		}
	}
}

func TestPulledFirstPage(t *testing.T) {
	for _, c := range []struct{ limit, pulled, want int }{
		{20, 10, 4}, {20, 1, 21}, {20, 0, 21}, {1, 10, 2}, {1000, 10, 182}, {20, 100, 2},
	} {
		if got := pulledFirstPage(c.limit, c.pulled); got != c.want {
			t.Errorf("pulledFirstPage(%d, %d) = %d, want %d", c.limit, c.pulled, got, c.want)
		}
	}
}

// TestTimelineCap stores more copies in a timeline than its cap (as the
// fan-out does between amortized trims) and pages through it with limits
// that do and do not divide the cap: the pages together show exactly the
// newest TimelineCap posts, the page that reaches the cap has no next
// page, and a token claiming the cap is already reached is refused.
func TestTimelineCap(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	clock := &fixedClock{now: now}
	db := openStore(t, clock)
	if err := catalog.EnsureFanoutTables(db); err != nil {
		t.Fatal(err)
	}
	const capacity, stored = 10, 25
	for i := range stored {
		putCopy(t, db, "u", "a", now.Add(-time.Duration(i+1)*time.Second), byte(i))
	}
	ctx := context.Background()
	for _, tc := range []struct {
		cap, limit, want int
	}{
		{capacity, 3, capacity},
		{capacity, 5, capacity},
		{capacity, 10, capacity},
		{capacity, 20, capacity},
		{stored + 5, 7, stored}, // under the cap: everything stored
		{0, 20, stored},         // the default cap (800)
	} {
		t.Run(fmt.Sprintf("cap%d/limit%d", tc.cap, tc.limit), func(t *testing.T) {
			tl, err := NewTimelines(db, TimelineOptions{TimelineTTL: 24 * time.Hour, TimelineCap: tc.cap, Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			var got []time.Time
			token := ""
			for pages := 0; ; pages++ {
				if pages > stored {
					t.Fatalf("no end after %d pages", pages)
				}
				p, err := tl.Timeline(ctx, TimelineQuery{User: "u", Limit: tc.limit, PageToken: token})
				if err != nil {
					t.Fatal(err)
				}
				if len(p.Posts) > tc.limit {
					t.Fatalf("page of %d posts for limit %d", len(p.Posts), tc.limit)
				}
				for _, post := range p.Posts {
					got = append(got, post.Time)
				}
				if token = p.NextPage; token == "" {
					break
				}
			}
			if len(got) != tc.want {
				t.Fatalf("pages showed %d posts, want %d", len(got), tc.want)
			}
			for i, at := range got { // the newest, in order
				if want := now.Add(-time.Duration(i+1) * time.Second); !at.Equal(want) {
					t.Fatalf("post %d at %s, want %s", i, at, want)
				}
			}
		})
	}

	tl, err := NewTimelines(db, TimelineOptions{TimelineTTL: 24 * time.Hour, TimelineCap: capacity, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	p, err := tl.Timeline(ctx, TimelineQuery{User: "u", Limit: 4})
	if err != nil || p.NextPage == "" {
		t.Fatalf("first page %+v %v", p, err)
	}
	// The same position, claimed at the cap: forged, refused.
	payload, err := decodeToken(p.NextPage, tokenKindTimeline, fingerprint("timeline", "u"))
	if err != nil {
		t.Fatal(err)
	}
	_, w := binary.Uvarint(payload)
	forged := encodeToken(tokenKindTimeline, fingerprint("timeline", "u"), append(binary.AppendUvarint(nil, capacity), payload[w:]...))
	if _, err := tl.Timeline(ctx, TimelineQuery{User: "u", PageToken: forged}); !errors.Is(err, ErrInvalidQuery) {
		t.Fatalf("token at the cap: err %v, want ErrInvalidQuery", err)
	}
}
