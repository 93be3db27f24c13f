package reader

// Timeline and follow-graph reads over the fan-out tables
// (catalog/fanout_tables.go). A timeline page merges the user's pushed
// timeline with the userlines of the large (pulled) authors the user
// follows, newest first, and filters at read time what background cleanup
// may not have reached yet:
//
//   - a copy of a post that was deleted (a _fanout_deleted row exists);
//   - a copy of an author the user no longer follows, or written before the
//     user's current follow of that author began (a copy from an earlier
//     follow period that the unfollow's cleanup missed).
//
// So a read is right at once, whatever the fan-out's lag. The filter costs
// one slice of the user's following list (up to followScanMin rows, or 4
// per large author; past that, one point read of following per distinct
// author) and one point read of
// _fanout_deleted per pushed copy examined (the bloom filter answers most
// without a block read), each at most once per page. A pulled userline row
// needs no deletion check: post_delete deletes the userline row in the
// batch that writes the _fanout_deleted marker (same partition key, so the
// same shard), so a live userline row is never a deleted post.
//
// What a page reads: the first page of every source is read at once (at
// most prefetchParallel slices in flight, which matters most when the
// store is remote and each slice a round trip); the pushed timeline's
// first page is limit+1 rows, a pulled userline's a share of that
// (pulledFirstPage), doubling when a source runs dry, so merging many
// pulled authors reads about what the page shows rather than limit+1 rows
// from each. Rows are copied out of the slices into one buffer per page.
//
// The page token (kind 5) holds how many posts the earlier pages showed and
// the key of the last post returned; every source resumes strictly after
// it, so one token covers all of them.
//
// A timeline shows at most TimelineCap posts in all its pages together,
// the newest, pushed and pulled alike, which is what the fan-out's trims
// keep of a pushed timeline. Trims are amortized (the fan-out cuts a
// timeline once it may have grown TrimEvery rows past the cap), so the
// stored timeline is often longer than the cap; reads do not show the
// rows waiting for the next cut.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

const (
	// tokenKindTimeline 3 held only the last key; 5 adds the count of
	// posts shown before it (the cap).
	tokenKindTimeline = 5
	tokenKindFollows  = 4
	// DefaultTimelineCap is the most posts a timeline shows across its
	// pages: the fan-out's default TimelineCap.
	DefaultTimelineCap = 800
	// DefaultTimelineLimit is the page size of a timeline read without
	// a limit; MaxTimelineLimit the largest allowed.
	DefaultTimelineLimit = 20
	MaxTimelineLimit     = 1000
)

// TimelineOptions configure Timelines. Zero fields take their defaults.
type TimelineOptions struct {
	// TimelineTTL must be the fan-out's (default 30 days): reads never
	// walk posts older than now minus it.
	TimelineTTL time.Duration
	// TimelineCap must be the fan-out's (default DefaultTimelineCap): a
	// timeline shows at most this many posts across all its pages.
	TimelineCap int
	// MaxScan bounds the rows one page examines (filtered rows included);
	// a page that reaches it ends early with a token. Default 10,000.
	MaxScan int
	// FailTombstones: a slice of a page that scans more tombstones fails
	// with ErrTooManyTombstones (default DefaultFailTombstones).
	FailTombstones int
	Now            func() time.Time
	Logger         *slog.Logger
	Registerer     prometheus.Registerer
}

// Timelines reads timelines and the follow graph. It is safe for
// concurrent use.
type Timelines struct {
	db         Store
	opts       TimelineOptions
	pullMerges prometheus.Histogram
	filtered   prometheus.Counter
}

// NewTimelines returns a Timelines reading db.
func NewTimelines(db Store, opts TimelineOptions) (*Timelines, error) {
	if opts.TimelineTTL <= 0 {
		opts.TimelineTTL = 30 * 24 * time.Hour
	}
	if opts.TimelineCap <= 0 {
		opts.TimelineCap = DefaultTimelineCap
	}
	if opts.MaxScan <= 0 {
		opts.MaxScan = 10_000
	}
	if opts.FailTombstones <= 0 {
		opts.FailTombstones = DefaultFailTombstones
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	t := &Timelines{db: db, opts: opts,
		pullMerges: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "eventide_timeline_pull_merges",
			Help:    "Userlines of large (pulled) authors merged per timeline read.",
			Buckets: []float64{0, 1, 2, 5, 10, 20, 50, 100},
		}),
		filtered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventide_timeline_filtered_total",
			Help: "Timeline rows hidden at read time (deleted posts, unfollowed authors) that background cleanup had not removed yet.",
		}),
	}
	if opts.Registerer != nil {
		for _, c := range []prometheus.Collector{t.pullMerges, t.filtered} {
			if err := opts.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("register timeline metrics: %w", err)
			}
		}
	}
	return t, nil
}

// TimelineQuery asks for one page of a user's timeline.
type TimelineQuery struct {
	User string
	// Limit is the page size (default DefaultTimelineLimit).
	Limit int
	// PageToken is the NextPage of the previous page, or empty.
	PageToken string
}

// TimelinePost is one post of a timeline.
type TimelinePost struct {
	ID     uuid.UUID
	Author string
	Time   time.Time
	Data   []byte
}

// TimelinePage is one page of a timeline, newest first.
type TimelinePage struct {
	Posts []TimelinePost
	// NextPage is empty only at the end; a short page is not the end.
	NextPage string
	// Pulled is how many large authors' userlines were merged.
	Pulled int
}

// postSource is one newest-first stream of post rows: the pushed timeline
// or one pulled userline. It reads in pages and keeps only one page.
type postSource struct {
	table     string
	partition []byte
	author    string // set for a userline
	buf       []storage.Row
	next      storage.Bound
	end       storage.Bound
	done      bool
	page      int
	maxTomb   int
}

func (s *postSource) head(ctx context.Context, db Store) (*storage.Row, error) {
	for len(s.buf) == 0 && !s.done {
		if err := s.fill(ctx, db); err != nil {
			return nil, err
		}
	}
	if len(s.buf) == 0 {
		return nil, nil
	}
	return &s.buf[0], nil
}

// fill reads the source's next page into buf (which must be empty).
func (s *postSource) fill(ctx context.Context, db Store) error {
	it, err := db.Slice(ctx, storage.SliceQuery{Table: s.table, Partition: s.partition, Start: s.next, End: s.end, Limit: s.page, MaxTombstones: s.maxTomb})
	if err != nil {
		return fmt.Errorf("cannot read %s of %s: %w", s.table, s.partition, err)
	}
	s.buf = s.buf[:0]
	var cells []storage.Cell
	var arena []byte
	for it.Next() {
		r := it.Row()
		s.buf = append(s.buf, *r)
		cells = append(cells, r.Cells...)
		arena = append(arena, r.Clustering...)
		for _, c := range r.Cells {
			arena = append(arena, c.Column...)
			arena = append(arena, c.Value...)
		}
	}
	if err := it.Close(); err != nil {
		s.buf = s.buf[:0]
		return fmt.Errorf("cannot read %s of %s: %w", s.table, s.partition, err)
	}
	// The rows point into the iterator's buffers, valid only until its
	// next row: repoint them into cells and arena, which no longer grow.
	off, ci := 0, 0
	take := func(n int) []byte {
		b := arena[off : off+n : off+n]
		off += n
		return b
	}
	for i := range s.buf {
		r := &s.buf[i]
		r.Clustering = take(len(r.Clustering))
		rc := cells[ci : ci+len(r.Cells) : ci+len(r.Cells)]
		ci += len(r.Cells)
		for j := range rc {
			rc[j].Column = take(len(rc[j].Column))
			rc[j].Value = take(len(rc[j].Value))
		}
		r.Cells = rc
	}
	n := len(s.buf)
	if n < s.page {
		s.done = true
	}
	if n > 0 {
		s.next = storage.Bound{Key: s.buf[n-1].Clustering}
	}
	s.page = min(s.page*2, 1000)
	return nil
}

// prefetchParallel bounds the first-page slices of one timeline read in
// flight at once.
const prefetchParallel = 8

// prefetch reads the first page of every source, up to prefetchParallel
// at once.
func prefetch(ctx context.Context, db Store, sources []*postSource) error {
	if len(sources) == 1 {
		return sources[0].fill(ctx, db)
	}
	errs := make([]error, len(sources))
	sem := make(chan struct{}, prefetchParallel)
	var wg sync.WaitGroup
	for i, s := range sources {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.fill(ctx, db)
			<-sem
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// pulledFirstPage is the first page size of each of pulled userlines
// merged into a page of limit posts: twice an even share of limit+1 among
// the sources (at least 2), so that posts spread over the authors cost one
// slice each, and an author with more than that share refills at double
// the size.
func pulledFirstPage(limit, pulled int) int {
	share := (limit + 1 + pulled) / (pulled + 1) // ceil((limit+1)/(pulled+1))
	return min(limit+1, max(2, 2*share))
}

// Timeline returns one page of q.User's timeline.
func (t *Timelines) Timeline(ctx context.Context, q TimelineQuery) (TimelinePage, error) {
	if q.User == "" {
		return TimelinePage{}, fmt.Errorf("%w: user is empty", ErrInvalidQuery)
	}
	limit := q.Limit
	if limit == 0 {
		limit = DefaultTimelineLimit
	}
	if limit < 0 || limit > MaxTimelineLimit {
		return TimelinePage{}, fmt.Errorf("%w: limit %d is not 1 to %d", ErrInvalidQuery, q.Limit, MaxTimelineLimit)
	}
	fp := fingerprint("timeline", q.User)
	start := storage.Bound{}
	shown := 0 // posts the earlier pages showed
	if q.PageToken != "" {
		payload, err := decodeToken(q.PageToken, tokenKindTimeline, fp)
		if err != nil {
			return TimelinePage{}, err
		}
		n, w := binary.Uvarint(payload)
		last := payload[max(w, 0):]
		if w <= 0 || n >= uint64(t.opts.TimelineCap) {
			return TimelinePage{}, fmt.Errorf("%w: page token does not hold a post count below the timeline cap %d; pass the next_page value of the previous page unchanged", ErrInvalidQuery, t.opts.TimelineCap)
		}
		if _, err := catalog.DecodePostKey(last); err != nil {
			return TimelinePage{}, fmt.Errorf("%w: page token does not hold a post id; pass the next_page value of the previous page unchanged", ErrInvalidQuery)
		}
		shown = int(n)
		start = storage.Bound{Key: last}
	}
	// The cap: this page shows at most what is left of it, and the page
	// that reaches it is the last.
	left := t.opts.TimelineCap - shown
	capped := left <= limit
	limit = min(limit, left)
	nextPage := func(last []byte, n int) string {
		b := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(last)), uint64(shown+n))
		return encodeToken(tokenKindTimeline, fp, append(b, last...))
	}
	end := storage.Bound{}
	if oldest, err := bucket.MinTimeUUID(t.opts.Now().Add(-t.opts.TimelineTTL)); err == nil {
		end = storage.Bound{Key: catalog.PostKey(oldest), Inclusive: true}
	}
	f := &readFilter{t: t, user: q.User, follows: map[string]followState{}, deletes: map[string]bool{}}
	sources := []*postSource{{table: catalog.TimelineTable, partition: []byte(q.User), next: start, end: end, page: limit + 1, maxTomb: t.opts.FailTombstones}}
	large, err := t.followedLargeAuthors(ctx, f)
	if err != nil {
		return TimelinePage{}, err
	}
	pulledPage := pulledFirstPage(limit, len(large))
	for _, a := range large {
		sources = append(sources, &postSource{table: catalog.UserlineTable, partition: []byte(a), author: a, next: start, end: end, page: pulledPage, maxTomb: t.opts.FailTombstones})
	}
	t.pullMerges.Observe(float64(len(large)))
	if err := prefetch(ctx, t.db, sources); err != nil {
		return TimelinePage{}, err
	}
	page := TimelinePage{Pulled: len(large)}
	var lastKey []byte
	scanned := 0
	for {
		// The newest head among the sources, and every copy of that post.
		var newest []byte
		for _, s := range sources {
			r, err := s.head(ctx, t.db)
			if err != nil {
				return TimelinePage{}, err
			}
			if r != nil && (newest == nil || bytes.Compare(r.Clustering, newest) < 0) {
				newest = r.Clustering
			}
		}
		if newest == nil {
			return page, nil
		}
		newest = append([]byte(nil), newest...)
		var post *TimelinePost
		for _, s := range sources {
			r, _ := s.head(ctx, t.db) // buffered: cannot fail
			if r == nil || !bytes.Equal(r.Clustering, newest) {
				continue
			}
			scanned++
			if post == nil {
				p, ok, err := f.accept(ctx, s, r)
				if err != nil {
					return TimelinePage{}, err
				}
				if ok {
					post = &p
				}
			}
			s.buf = s.buf[1:]
		}
		if post != nil {
			if len(page.Posts) == limit {
				page.NextPage = nextPage(lastKey, len(page.Posts))
				return page, nil
			}
			page.Posts = append(page.Posts, *post)
			if capped && len(page.Posts) == limit {
				return page, nil // the cap's last post: no next page
			}
		}
		lastKey = newest
		if scanned >= t.opts.MaxScan {
			page.NextPage = nextPage(lastKey, len(page.Posts))
			return page, nil
		}
	}
}

// followedLargeAuthors returns the large authors user follows.
func (t *Timelines) followedLargeAuthors(ctx context.Context, f *readFilter) ([]string, error) {
	it, err := t.db.Slice(ctx, storage.SliceQuery{Table: catalog.FanoutLargeTable, Partition: catalog.LargePartition()})
	if err != nil {
		return nil, fmt.Errorf("cannot list large authors: %w", err)
	}
	var all []string
	for it.Next() {
		name, err := catalog.DecodeNameKey(it.Row().Clustering)
		if err != nil {
			it.Close()
			return nil, err
		}
		all = append(all, name)
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("cannot list large authors: %w", err)
	}
	if err := f.readFollowing(ctx, max(followScanMin, 4*len(all))); err != nil {
		return nil, err
	}
	var out []string
	for _, a := range all {
		fs, err := f.follow(ctx, a)
		if err != nil {
			return nil, err
		}
		if fs.live {
			out = append(out, a)
		}
	}
	return out, nil
}

type followState struct {
	live  bool
	since int64
}

// readFilter decides, with point reads cached for one page, whether a row
// may be shown.
type readFilter struct {
	t       *Timelines
	user    string
	follows map[string]followState
	// allFollows: follows holds every author the user follows, so an
	// author not in it is not followed (readFollowing read the whole list).
	allFollows bool
	deletes    map[string]bool // author + "\x00" + post key
}

// followScanMin is the fewest rows of a user's following list a timeline
// read takes in one slice before it falls back to a point read per
// author.
const followScanMin = 64

// readFollowing reads up to limit rows of the user's following list in
// one slice: when the list ends within them (most users), every follow
// check of the page (one per large author, one per author of a pushed
// copy) is answered from it instead of by a point read each.
func (f *readFilter) readFollowing(ctx context.Context, limit int) error {
	it, err := f.t.db.Slice(ctx, storage.SliceQuery{Table: catalog.FollowingTable, Partition: []byte(f.user), Limit: limit + 1, MaxTombstones: f.t.opts.FailTombstones})
	if err != nil {
		return fmt.Errorf("cannot read following of %s: %w", f.user, err)
	}
	read := map[string]followState{}
	for it.Next() {
		r := it.Row()
		author, err := catalog.DecodeNameKey(r.Clustering)
		if err != nil {
			it.Close()
			return fmt.Errorf("cannot read following of %s: %w", f.user, err)
		}
		var fs followState
		if c, ok := catalog.CellOf(r, catalog.ColSince); ok {
			if fs.since, err = catalog.DecodeBigint(c.Value); err != nil {
				it.Close()
				return fmt.Errorf("cannot read follow %s -> %s: %w", f.user, author, err)
			}
			fs.live = true
		}
		read[author] = fs
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("cannot read following of %s: %w", f.user, err)
	}
	if len(read) <= limit {
		f.follows, f.allFollows = read, true
	}
	return nil
}

func (f *readFilter) follow(ctx context.Context, author string) (followState, error) {
	if fs, ok := f.follows[author]; ok || f.allFollows {
		return fs, nil
	}
	row, ok, err := catalog.ReadRow(ctx, f.t.db, catalog.FollowingTable, []byte(f.user), catalog.NameKey(author))
	if err != nil {
		return followState{}, err
	}
	var fs followState
	if ok {
		if c, ok := catalog.CellOf(&row, catalog.ColSince); ok {
			if fs.since, err = catalog.DecodeBigint(c.Value); err != nil {
				return followState{}, fmt.Errorf("cannot read follow %s -> %s: %w", f.user, author, err)
			}
			fs.live = true
		}
	}
	f.follows[author] = fs
	return fs, nil
}

func (f *readFilter) deleted(ctx context.Context, author string, key []byte) (bool, error) {
	k := author + "\x00" + string(key)
	if d, ok := f.deletes[k]; ok {
		return d, nil
	}
	_, ok, err := catalog.ReadRow(ctx, f.t.db, catalog.FanoutDeletedTable, []byte(author), key)
	if err != nil {
		return false, err
	}
	f.deletes[k] = ok
	return ok, nil
}

// accept decodes r from source s and says whether it may be shown.
func (f *readFilter) accept(ctx context.Context, s *postSource, r *storage.Row) (TimelinePost, bool, error) {
	id, err := catalog.DecodePostKey(r.Clustering)
	if err != nil {
		return TimelinePost{}, false, fmt.Errorf("cannot read %s of %s: %w", s.table, s.partition, err)
	}
	p := TimelinePost{ID: id, Author: s.author}
	p.Time, _ = bucket.TimeOf(id)
	var written int64
	for _, c := range r.Cells {
		switch string(c.Column) {
		case catalog.ColAuthor:
			if p.Author, err = catalog.DecodeText(c.Value); err != nil {
				return TimelinePost{}, false, fmt.Errorf("cannot read timeline of %s post %s: %w", s.partition, id, err)
			}
			written = c.WriteTimeMicros
		case catalog.ColData:
			if p.Data, err = catalog.DecodeBlob(c.Value); err != nil {
				return TimelinePost{}, false, fmt.Errorf("cannot read %s of %s post %s: %w", s.table, s.partition, id, err)
			}
		}
	}
	if p.Author == "" {
		// A row left with only some of its cells (e.g. data shadowed):
		// not a whole copy.
		f.t.filtered.Inc()
		return TimelinePost{}, false, nil
	}
	if s.author == "" {
		fs, err := f.follow(ctx, p.Author)
		if err != nil {
			return TimelinePost{}, false, err
		}
		if !fs.live || written < fs.since {
			f.t.filtered.Inc()
			return TimelinePost{}, false, nil
		}
	}
	if s.author != "" {
		return p, true, nil // a live userline row: not deleted (see the file comment)
	}
	del, err := f.deleted(ctx, p.Author, r.Clustering)
	if err != nil {
		return TimelinePost{}, false, err
	}
	if del {
		f.t.filtered.Inc()
		return TimelinePost{}, false, nil
	}
	return p, true, nil
}

// FollowPage is one page of a follower or following list, in name order.
type FollowPage struct {
	Names []string
	// NextPage is empty only at the end.
	NextPage string
}

// Followers returns one page of author's followers.
func (t *Timelines) Followers(ctx context.Context, author string, limit int, pageToken string) (FollowPage, error) {
	return t.follows(ctx, catalog.FollowersTable, author, limit, pageToken)
}

// Following returns one page of the authors user follows.
func (t *Timelines) Following(ctx context.Context, user string, limit int, pageToken string) (FollowPage, error) {
	return t.follows(ctx, catalog.FollowingTable, user, limit, pageToken)
}

func (t *Timelines) follows(ctx context.Context, table, name string, limit int, pageToken string) (FollowPage, error) {
	if name == "" {
		return FollowPage{}, fmt.Errorf("%w: user is empty", ErrInvalidQuery)
	}
	if limit == 0 {
		limit = DefaultLimit
	}
	if limit < 0 || limit > MaxLimit {
		return FollowPage{}, fmt.Errorf("%w: limit %d is not 1 to %d", ErrInvalidQuery, limit, MaxLimit)
	}
	fp := fingerprint(table, name)
	q := storage.SliceQuery{Table: table, Partition: []byte(name), Limit: limit + 1, MaxTombstones: t.opts.FailTombstones}
	if pageToken != "" {
		last, err := decodeToken(pageToken, tokenKindFollows, fp)
		if err != nil {
			return FollowPage{}, err
		}
		q.Start = storage.Bound{Key: last}
	}
	it, err := t.db.Slice(ctx, q)
	if err != nil {
		return FollowPage{}, fmt.Errorf("cannot read %s of %s: %w", table, name, err)
	}
	defer it.Close()
	var page FollowPage
	var lastKey []byte
	for it.Next() {
		if len(page.Names) == limit {
			page.NextPage = encodeToken(tokenKindFollows, fp, lastKey)
			break
		}
		r := it.Row()
		n, err := catalog.DecodeNameKey(r.Clustering)
		if err != nil {
			return FollowPage{}, fmt.Errorf("cannot read %s of %s: %w", table, name, err)
		}
		page.Names = append(page.Names, n)
		lastKey = append(lastKey[:0], r.Clustering...)
	}
	if err := it.Err(); err != nil {
		return FollowPage{}, fmt.Errorf("cannot read %s of %s: %w", table, name, err)
	}
	return page, nil
}
