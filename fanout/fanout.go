package fanout

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
	"github.com/google/uuid"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

// Position is a message's place in the stream: the consumer's checkpoint
// epoch (it changes when the stream is recreated and sequences restart)
// and the stream sequence.
type Position struct {
	Epoch, Seq uint64
}

const (
	subBits   = 16
	seqBits   = 40
	epochBits = 63 - seqBits - subBits
	// subSteps is how many ordered writes one message may make to one
	// cell (job progress: one per chunk).
	subSteps = 1 << subBits
)

// WriteTimestamp is the write timestamp of every cell a message at p
// writes: epoch, sequence and room for subSteps ordered writes below, so
// a later message always wins. p.Seq must be below 2^40 and p.Epoch below
// 2^7.
func WriteTimestamp(p Position) int64 {
	return int64(p.Epoch<<(seqBits+subBits) | p.Seq<<subBits)
}

func (p Position) check() error {
	if p.Seq == 0 || p.Seq >= 1<<seqBits || p.Epoch >= 1<<epochBits {
		return fmt.Errorf("fan-out: position epoch %d seq %d out of range (seq 1 to 2^%d-1, epoch below 2^%d)", p.Epoch, p.Seq, seqBits, epochBits)
	}
	return nil
}

// Message is one stream message as the fan-out needs it: its position and
// its event, parsed and validated by the writer's rules.
type Message struct {
	Pos   Position
	Event schema.Event
}

// Fanout applies follow-graph and post events and works fan-out jobs. It
// is safe for concurrent use, but Prepare calls must not overlap and must
// see messages in stream order.
type Fanout struct {
	db        *storage.DB
	opts      Options
	m         *metrics
	postTypes map[string]bool
	wake      chan struct{}

	// scanFrom is the oldest job key PendingChunks last saw pending;
	// maxCommittedJob the newest job key Committed has seen (jobs.go).
	scanFrom, maxCommittedJob atomic.Int64
	// finishMu orders the last chunks of a job's parts (jobs.go).
	finishMu sync.Mutex
	// batches holds up to Workers chunk batches for reuse (releaseChunk).
	batches chan *storage.Batch
	// lengths bounds the length of the timelines chunks pushed to
	// (lengths.go): when to check one for trimming.
	lengths *lengths
	// ahead holds, per job part, its next chunk read while the previous
	// one's batch waited for its WAL sync (WorkChunk, jobs.go).
	aheadMu sync.Mutex
	ahead   map[ChunkRef]*preparedChunk

	logMu   sync.Mutex
	lastLog map[string]time.Time
}

// Open returns a Fanout over db, creating the fan-out tables if missing.
func Open(db *storage.DB, opts Options) (*Fanout, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.MaxMemtableBytes == 0 {
		opts.MaxMemtableBytes = db.Metrics().MemtableSize
	}
	if err := catalog.EnsureFanoutTables(db); err != nil {
		return nil, err
	}
	f := &Fanout{db: db, opts: opts, m: newMetrics(), postTypes: map[string]bool{},
		wake: make(chan struct{}, 1), lastLog: map[string]time.Time{}, batches: make(chan *storage.Batch, opts.Workers),
		ahead: map[ChunkRef]*preparedChunk{}, lengths: newLengths(opts.TrimTracked)}
	for _, t := range opts.PostTypes {
		f.postTypes[t] = true
	}
	if opts.Registerer != nil {
		for _, c := range f.m.collectors() {
			if err := opts.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("cannot register fan-out metrics: %w", err)
			}
		}
	}
	return f, nil
}

// Shard returns the shard of a timeline partition (a user name):
// bucket.Shard of its key, so fan-out chunks group by the same shards the
// storage nodes own.
func Shard(user string, shards int) int32 {
	return int32(bucket.Shard([]byte(user), shards))
}

// Prepared is what Prepare did, for Committed.
type Prepared struct {
	// Jobs is how many fan-out jobs the messages created.
	Jobs int
	// Skipped counts skipped messages by reason.
	Skipped map[string]int
	// lastJob is the key of the newest job created.
	lastJob int64
}

// Apply prepares msgs, applies them in one batch and calls Committed. For
// callers that keep no checkpoint of their own.
func (f *Fanout) Apply(ctx context.Context, msgs ...Message) error {
	var b storage.Batch
	p, err := f.Prepare(ctx, &b, msgs)
	if err != nil {
		return err
	}
	if b.Len() > 0 {
		if err := f.db.Apply(ctx, &b); err != nil {
			return fmt.Errorf("cannot apply fan-out batch: %w", err)
		}
	}
	f.Committed(p)
	return nil
}

// Committed tells f the batch Prepare filled is durable: skips are
// counted and the workers woken.
func (f *Fanout) Committed(p Prepared) {
	for reason, n := range p.Skipped {
		f.m.skipped.WithLabelValues(reason).Add(float64(n))
	}
	if p.Jobs > 0 {
		if p.lastJob > f.maxCommittedJob.Load() {
			f.maxCommittedJob.Store(p.lastJob)
		}
		f.Wake()
	}
}

// Wake makes Run look for pending chunks now.
func (f *Fanout) Wake() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// edge is a follow edge: user follows author.
type edge struct{ author, user string }

type edgeState struct {
	since int64
	live  bool
}

type authorState struct {
	followers int64
	large     bool
}

// pendingPost is a userline row written earlier in the same batch.
type pendingPost struct {
	id      uuid.UUID
	data    []byte
	job     int64
	deleted bool
}

// batchState is what the messages prepared so far in one batch wrote:
// later messages of the batch read through it, as they would read the
// store had each message been applied alone.
type batchState struct {
	edges      map[edge]edgeState
	authors    map[string]authorState
	posts      map[string][]pendingPost
	backfilled map[string][]edgePost // user -> copies written in this batch
}

type edgePost struct {
	author string
	id     uuid.UUID
}

// Prepare adds to b the effects of msgs, applied one by one in order. The
// messages must come after every message already applied, in stream
// order. The caller applies b (adding its own checkpoint to it) and then
// calls Committed. Events that are not of a fan-out type are ignored.
func (f *Fanout) Prepare(ctx context.Context, b *storage.Batch, msgs []Message) (Prepared, error) {
	st := &batchState{edges: map[edge]edgeState{}, authors: map[string]authorState{},
		posts: map[string][]pendingPost{}, backfilled: map[string][]edgePost{}}
	p := Prepared{Skipped: map[string]int{}}
	for i := range msgs {
		m := &msgs[i]
		if err := m.Pos.check(); err != nil {
			return Prepared{}, err
		}
		var reason string
		var err error
		e := &m.Event
		switch {
		case e.Type == f.opts.FollowType:
			reason, err = f.follow(ctx, b, st, m)
		case e.Type == f.opts.UnfollowType:
			reason, err = f.unfollow(ctx, b, st, m)
		case e.Type == f.opts.DeleteType:
			reason, err = f.deletePost(ctx, b, st, m, &p)
		case f.postTypes[e.Type]:
			reason, err = f.post(ctx, b, st, m, &p)
		default:
			continue
		}
		if err != nil {
			return Prepared{}, fmt.Errorf("cannot prepare %s event at stream sequence %d: %w", e.Type, m.Pos.Seq, err)
		}
		if reason != "" {
			p.Skipped[reason]++
			f.logSkip(reason, m)
		}
	}
	return p, nil
}

// logSkip logs a skipped message, at most once per reason per minute.
func (f *Fanout) logSkip(reason string, m *Message) {
	now := f.opts.Now()
	f.logMu.Lock()
	last, seen := f.lastLog[reason]
	if seen && now.Sub(last) < time.Minute {
		f.logMu.Unlock()
		return
	}
	f.lastLog[reason] = now
	f.logMu.Unlock()
	f.opts.Logger.Warn("fan-out skipped an event (logged once a minute per reason; eventide_fanout_skipped_total counts them all)",
		"reason", reason, "type", m.Event.Type, "seq", m.Pos.Seq, "user", m.Event.User, "author", m.Event.Author)
}

func (f *Fanout) checkPair(e *schema.Event) string {
	switch {
	case e.User == "":
		return SkipMissingUser
	case e.Author == "":
		return SkipMissingAuthor
	case !utf8.ValidString(e.User) || !utf8.ValidString(e.Author):
		return SkipInvalidName
	case e.User == e.Author:
		return SkipSelfFollow
	}
	return ""
}

func checkAuthor(e *schema.Event) string {
	switch {
	case e.Author == "":
		return SkipMissingAuthor
	case !utf8.ValidString(e.Author):
		return SkipInvalidName
	}
	return ""
}

func (f *Fanout) follow(ctx context.Context, b *storage.Batch, st *batchState, m *Message) (string, error) {
	e := &m.Event
	if r := f.checkPair(e); r != "" {
		return r, nil
	}
	es, err := f.edge(ctx, st, e.Author, e.User)
	if err != nil {
		return "", err
	}
	if es.live {
		return SkipAlreadyFollowed, nil
	}
	ts := WriteTimestamp(m.Pos)
	since := catalog.BigintValue(ts)
	b.Put(catalog.FollowersTable, []byte(e.Author), catalog.NameKey(e.User), []byte(catalog.ColSince), since, ts)
	b.Put(catalog.FollowingTable, []byte(e.User), catalog.NameKey(e.Author), []byte(catalog.ColSince), since, ts)
	st.edges[edge{e.Author, e.User}] = edgeState{since: ts, live: true}
	as, err := f.author(ctx, st, e.Author)
	if err != nil {
		return "", err
	}
	as.followers++
	if !as.large && as.followers > f.opts.LargeThreshold {
		as.large = true
		b.Put(catalog.FanoutLargeTable, catalog.LargePartition(), catalog.NameKey(e.Author), nil, nil, ts)
	}
	f.putAuthor(b, st, e.Author, as, ts)
	if as.large {
		return "", nil // pulled at read time: nothing to copy
	}
	posts, err := f.recentPosts(ctx, st, e.Author, f.opts.Backfill)
	if err != nil {
		return "", err
	}
	partition := []byte(e.User)
	added := 0
	for _, p := range posts {
		if f.putTimelineRow(b, partition, p.id, e.Author, p.data, ts) {
			st.backfilled[e.User] = append(st.backfilled[e.User], edgePost{e.Author, p.id})
			added++
		}
	}
	if added > 0 {
		// The length table's bound must count every row added (counted
		// before the batch is applied: a batch that fails only makes it
		// higher). A timeline it does not track may have been short or
		// full before: it is bounded as full, so the next copy pushed
		// to it checks it (one check per follow).
		h := xxhash.Sum64(partition)
		if _, known := f.lengths.add(h, uint32(added)); !known {
			f.lengths.set(h, uint32(f.opts.TimelineCap+f.opts.TrimEvery-1))
		}
	}
	return "", nil
}

func (f *Fanout) unfollow(ctx context.Context, b *storage.Batch, st *batchState, m *Message) (string, error) {
	e := &m.Event
	if r := f.checkPair(e); r != "" {
		return r, nil
	}
	es, err := f.edge(ctx, st, e.Author, e.User)
	if err != nil {
		return "", err
	}
	if !es.live {
		return SkipNotFollowing, nil
	}
	ts := WriteTimestamp(m.Pos)
	b.DeleteRow(catalog.FollowersTable, []byte(e.Author), catalog.NameKey(e.User), ts)
	b.DeleteRow(catalog.FollowingTable, []byte(e.User), catalog.NameKey(e.Author), ts)
	st.edges[edge{e.Author, e.User}] = edgeState{}
	as, err := f.author(ctx, st, e.Author)
	if err != nil {
		return "", err
	}
	as.followers--
	f.putAuthor(b, st, e.Author, as, ts)
	// Cleanup of the copies already in the timeline; copies a lagging
	// chunk writes later are older than ts where they land on a key
	// deleted here, and hidden by the read filter (the edge is gone, or
	// newer than them) where they do not.
	partition := []byte(e.User)
	for _, bp := range st.backfilled[e.User] {
		if bp.author == e.Author {
			b.DeleteRow(catalog.TimelineTable, partition, catalog.PostKey(bp.id), ts)
		}
	}
	it, err := f.db.Slice(ctx, storage.SliceQuery{Table: catalog.TimelineTable, Partition: partition,
		End: f.ttlEnd(), Limit: f.opts.CleanupScan})
	if err != nil {
		return "", fmt.Errorf("cannot scan timeline of %s: %w", e.User, err)
	}
	defer it.Close()
	want := catalog.TextValue(e.Author)
	for it.Next() {
		r := it.Row()
		if c, ok := catalog.CellOf(r, catalog.ColAuthor); ok && string(c.Value) == string(want) {
			b.DeleteRow(catalog.TimelineTable, partition, append([]byte(nil), r.Clustering...), ts)
		}
	}
	if err := it.Err(); err != nil {
		return "", fmt.Errorf("cannot scan timeline of %s: %w", e.User, err)
	}
	return "", nil
}

func (f *Fanout) post(ctx context.Context, b *storage.Batch, st *batchState, m *Message, p *Prepared) (string, error) {
	e := &m.Event
	if r := checkAuthor(e); r != "" {
		return r, nil
	}
	if e.ID.Version() != 1 {
		return SkipInvalidPostID, nil
	}
	if _, ok, err := f.userlinePost(ctx, st, e.Author, e.ID); err != nil {
		return "", err
	} else if ok {
		return SkipDuplicatePost, nil
	}
	ts := WriteTimestamp(m.Pos)
	as, err := f.author(ctx, st, e.Author)
	if err != nil {
		return "", err
	}
	partition, key := []byte(e.Author), catalog.PostKey(e.ID)
	data := e.Data
	if data == nil {
		data = []byte("{}")
	}
	b.Put(catalog.UserlineTable, partition, key, []byte(catalog.ColData), catalog.BlobValue(data), ts)
	pp := pendingPost{id: e.ID, data: data}
	if !as.large {
		// Copied now or, by a later follow's backfill, later: its delete
		// must clean timelines (the job column says so, and names the
		// job, if there is one, to cancel).
		pp.job = ts
		b.Put(catalog.UserlineTable, partition, key, []byte(catalog.ColJob), catalog.BigintValue(ts), ts)
		if as.followers > 0 {
			f.putJob(b, ts, catalog.JobKindPost, e.Author, e.ID, data, as.followers)
			p.Jobs++
			p.lastJob = ts
		}
	}
	st.posts[e.Author] = append(st.posts[e.Author], pp)
	return "", nil
}

// jobParts is how many parts a job over that many followers is split
// into: Shards times up to PartsPerShard (fewer when the followers fill
// fewer chunks). Part p holds the followers whose xxhash is p modulo the
// part count; since the part count is a multiple of Shards, every
// follower of part p is in timeline shard p % Shards, and a shard's owner
// works the parts p with p % Shards equal to its shard. Every part
// streams the author's whole follower list (keeping its own followers),
// so more parts per shard cost that streaming again per part.
func (f *Fanout) jobParts(followers int64) int {
	perShard := (followers + int64(f.opts.Shards) - 1) / int64(f.opts.Shards)
	k := min(int64(f.opts.PartsPerShard), (perShard+int64(f.opts.ChunkSize)-1)/int64(f.opts.ChunkSize))
	return f.opts.Shards * int(max(k, 1))
}

func (f *Fanout) putJob(b *storage.Batch, job int64, kind, author string, id uuid.UUID, data []byte, followers int64) {
	kindV, authorV, idV, followersV := catalog.TextValue(kind), catalog.TextValue(author), catalog.TimeUUIDValue(id), catalog.BigintValue(followers)
	parts := f.jobParts(followers)
	shardsV := catalog.IntValue(int32(parts))
	var dataV []byte
	if kind == catalog.JobKindPost {
		dataV = catalog.BlobValue(data)
	}
	for s := 0; s < parts; s++ {
		key := catalog.JobKey(job, int32(s))
		put := func(col string, v []byte) {
			b.Put(catalog.FanoutJobsTable, catalog.JobsPartition(), key, []byte(col), v, job)
		}
		put(catalog.ColKind, kindV)
		put(catalog.ColAuthor, authorV)
		put(catalog.ColPostID, idV)
		put(catalog.ColFollowers, followersV)
		put(catalog.ColShards, shardsV)
		if dataV != nil {
			put(catalog.ColData, dataV)
		}
	}
}

func (f *Fanout) deletePost(ctx context.Context, b *storage.Batch, st *batchState, m *Message, p *Prepared) (string, error) {
	e := &m.Event
	if r := checkAuthor(e); r != "" {
		return r, nil
	}
	id, reason := parsePostID(e.Data)
	if reason != "" {
		return reason, nil
	}
	post, ok, err := f.userlinePost(ctx, st, e.Author, id)
	if err != nil {
		return "", err
	}
	if !ok {
		return SkipUnknownPost, nil
	}
	ts := WriteTimestamp(m.Pos)
	partition, key := []byte(e.Author), catalog.PostKey(id)
	b.DeleteRow(catalog.UserlineTable, partition, key, ts)
	if ttl := f.remainingTTL(id); ttl > 0 {
		b.PutTTL(catalog.FanoutDeletedTable, partition, key, nil, nil, ts, ttl)
	}
	f.markDeleted(st, e.Author, id)
	if post.job != 0 {
		// The post was made while its author was not large, so it may
		// have copies (pushed, or backfilled by a follow). Cancel its job
		// (chunks in flight write at the post's timestamp, below ts) and
		// remove the copies from the current followers' timelines (the
		// former followers' went with their unfollow).
		b.DeleteRange(catalog.FanoutJobsTable, catalog.JobsPartition(),
			storage.Bound{Key: catalog.JobPrefix(post.job), Inclusive: true},
			storage.Bound{Key: catalog.JobPrefixEnd(post.job)}, ts)
		as, err := f.author(ctx, st, e.Author)
		if err != nil {
			return "", err
		}
		if as.followers > 0 {
			f.putJob(b, ts, catalog.JobKindDelete, e.Author, id, nil, as.followers)
			p.Jobs++
			p.lastJob = ts
		}
	}
	return "", nil
}

func (f *Fanout) markDeleted(st *batchState, author string, id uuid.UUID) {
	ps := st.posts[author]
	for i := range ps {
		if ps[i].id == id {
			ps[i].deleted = true
			return
		}
	}
	st.posts[author] = append(ps, pendingPost{id: id, deleted: true})
}

// postCopy holds the cells of a post's timeline copies, encoded once for
// every follower it goes to.
type postCopy struct {
	key, author, data []byte
	ttl               int32
}

// newPostCopy returns the copy of a post; ok is false when the copy
// would already be expired.
func (f *Fanout) newPostCopy(id uuid.UUID, author string, data []byte) (c postCopy, ok bool) {
	ttl := f.remainingTTL(id)
	if ttl <= 0 {
		return postCopy{}, false
	}
	return postCopy{key: catalog.PostKey(id), author: catalog.TextValue(author), data: catalog.BlobValue(data), ttl: ttl}, true
}

var (
	colAuthor = []byte(catalog.ColAuthor)
	colData   = []byte(catalog.ColData)
)

func (c *postCopy) put(b *storage.Batch, partition []byte, ts int64) {
	b.PutTTL(catalog.TimelineTable, partition, c.key, colAuthor, c.author, ts, c.ttl)
	b.PutTTL(catalog.TimelineTable, partition, c.key, colData, c.data, ts, c.ttl)
}

// putTimelineRow writes one copy of a post; it reports false (writing
// nothing) when the copy would already be expired.
func (f *Fanout) putTimelineRow(b *storage.Batch, partition []byte, id uuid.UUID, author string, data []byte, ts int64) bool {
	c, ok := f.newPostCopy(id, author, data)
	if ok {
		c.put(b, partition, ts)
	}
	return ok
}

// remainingTTL is the TTL in seconds that makes a copy of post id expire
// at its post time plus the timeline TTL; <= 0 if that has passed.
func (f *Fanout) remainingTTL(id uuid.UUID) int32 {
	t, err := bucket.TimeOf(id)
	if err != nil {
		return 0
	}
	left := t.Add(f.opts.TimelineTTL).Sub(f.opts.Now())
	if left <= 0 {
		return 0
	}
	secs := int64((left + time.Second - 1) / time.Second)
	return int32(min(secs, 1<<31-1))
}

// ttlEnd bounds a newest-first post slice at the oldest post still live
// under the timeline TTL.
func (f *Fanout) ttlEnd() storage.Bound {
	oldest, err := bucket.MinTimeUUID(f.opts.Now().Add(-f.opts.TimelineTTL))
	if err != nil {
		return storage.Bound{}
	}
	return storage.Bound{Key: catalog.PostKey(oldest), Inclusive: true}
}

func (f *Fanout) putAuthor(b *storage.Batch, st *batchState, author string, as authorState, ts int64) {
	st.authors[author] = as
	b.Put(catalog.FanoutAuthorsTable, []byte(author), nil, []byte(catalog.ColFollowers), catalog.BigintValue(as.followers), ts)
	b.Put(catalog.FanoutAuthorsTable, []byte(author), nil, []byte(catalog.ColLarge), catalog.BooleanValue(as.large), ts)
}

func (f *Fanout) edge(ctx context.Context, st *batchState, author, user string) (edgeState, error) {
	if es, ok := st.edges[edge{author, user}]; ok {
		return es, nil
	}
	row, ok, err := catalog.ReadRow(ctx, f.db, catalog.FollowersTable, []byte(author), catalog.NameKey(user))
	if err != nil || !ok {
		return edgeState{}, err
	}
	c, ok := catalog.CellOf(&row, catalog.ColSince)
	if !ok {
		return edgeState{}, nil
	}
	since, err := catalog.DecodeBigint(c.Value)
	if err != nil {
		return edgeState{}, fmt.Errorf("cannot read follow edge %s -> %s: %w", user, author, err)
	}
	return edgeState{since: since, live: true}, nil
}

// AuthorInfo is what the store says about an author.
type AuthorInfo struct {
	Followers int64
	Large     bool
}

// Author returns the follower count and push/pull state of author.
func (f *Fanout) Author(ctx context.Context, author string) (AuthorInfo, error) {
	as, err := f.author(ctx, nil, author)
	return AuthorInfo{Followers: as.followers, Large: as.large}, err
}

func (f *Fanout) author(ctx context.Context, st *batchState, author string) (authorState, error) {
	if st != nil {
		if as, ok := st.authors[author]; ok {
			return as, nil
		}
	}
	row, ok, err := catalog.ReadRow(ctx, f.db, catalog.FanoutAuthorsTable, []byte(author), nil)
	if err != nil || !ok {
		return authorState{}, err
	}
	var as authorState
	if c, ok := catalog.CellOf(&row, catalog.ColFollowers); ok {
		if as.followers, err = catalog.DecodeBigint(c.Value); err != nil {
			return authorState{}, fmt.Errorf("cannot read author %s: %w", author, err)
		}
	}
	if c, ok := catalog.CellOf(&row, catalog.ColLarge); ok {
		if as.large, err = catalog.DecodeBoolean(c.Value); err != nil {
			return authorState{}, fmt.Errorf("cannot read author %s: %w", author, err)
		}
	}
	return as, nil
}

func (f *Fanout) userlinePost(ctx context.Context, st *batchState, author string, id uuid.UUID) (pendingPost, bool, error) {
	for _, p := range st.posts[author] {
		if p.id == id {
			return p, !p.deleted, nil
		}
	}
	row, ok, err := catalog.ReadRow(ctx, f.db, catalog.UserlineTable, []byte(author), catalog.PostKey(id))
	if err != nil || !ok {
		return pendingPost{}, false, err
	}
	p, err := decodeUserlineRow(&row)
	if err != nil {
		return pendingPost{}, false, fmt.Errorf("cannot read userline of %s: %w", author, err)
	}
	return p, true, nil
}

func decodeUserlineRow(row *storage.Row) (pendingPost, error) {
	id, err := catalog.DecodePostKey(row.Clustering)
	if err != nil {
		return pendingPost{}, err
	}
	p := pendingPost{id: id}
	if c, ok := catalog.CellOf(row, catalog.ColData); ok {
		if p.data, err = catalog.DecodeBlob(c.Value); err != nil {
			return pendingPost{}, err
		}
	}
	if c, ok := catalog.CellOf(row, catalog.ColJob); ok {
		if p.job, err = catalog.DecodeBigint(c.Value); err != nil {
			return pendingPost{}, err
		}
	}
	return p, nil
}

// recentPosts returns the author's n newest live posts within the
// timeline TTL, newest first, including those of the current batch.
func (f *Fanout) recentPosts(ctx context.Context, st *batchState, author string, n int) ([]pendingPost, error) {
	if n == 0 {
		return nil, nil
	}
	pending := st.posts[author]
	deleted := map[uuid.UUID]bool{}
	var out []pendingPost
	for _, p := range pending {
		if p.deleted {
			deleted[p.id] = true
		} else {
			out = append(out, p)
		}
	}
	it, err := f.db.Slice(ctx, storage.SliceQuery{Table: catalog.UserlineTable, Partition: []byte(author),
		End: f.ttlEnd(), Limit: n + len(deleted)})
	if err != nil {
		return nil, fmt.Errorf("cannot read userline of %s: %w", author, err)
	}
	defer it.Close()
	for it.Next() {
		p, err := decodeUserlineRow(it.Row())
		if err != nil {
			return nil, fmt.Errorf("cannot read userline of %s: %w", author, err)
		}
		if !deleted[p.id] && !slices.ContainsFunc(out, func(q pendingPost) bool { return q.id == p.id }) {
			out = append(out, p)
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("cannot read userline of %s: %w", author, err)
	}
	slices.SortFunc(out, func(a, b pendingPost) int { return -bucket.CompareTimeUUID(a.id, b.id) })
	if len(out) > n {
		out = out[:n]
	}
	return out, nil
}
