package fanout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/google/uuid"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

// ChunkRef names the next chunk of one part of a pending fan-out job.
type ChunkRef struct {
	// Job is the job's key: the write timestamp of the message that
	// created it.
	Job int64
	// Shard is the part (jobParts): its followers are in timeline shard
	// Shard % Options.Shards.
	Shard int32
}

// job is one part's row of _fanout_jobs.
type job struct {
	ChunkRef
	kind      string
	author    string
	postID    uuid.UUID
	data      []byte
	followers int64
	shards    int32
	cursor    string
	hasCursor bool
	chunks    int64
}

// PendingChunks returns up to limit chunks that can be worked now, oldest
// job first, one per job part (a part's chunks go one after the other:
// each starts at the cursor the previous one stored).
//
// It reads from the oldest job it last saw pending, not from the start of
// the jobs partition: finished jobs leave row tombstones there (for
// gc_grace), and a scan from the start would walk all of them every time.
// Jobs are keyed by stream position, so every job not seen yet is newer.
func (f *Fanout) PendingChunks(ctx context.Context, limit int) ([]ChunkRef, error) {
	committed := f.maxCommittedJob.Load() // before the scan: see advanceScanFrom
	var refs []ChunkRef
	err := f.scanJobs(ctx, func(j *job) bool {
		refs = append(refs, j.ChunkRef)
		return len(refs) < limit
	})
	if err != nil {
		return nil, err
	}
	if len(refs) > 0 {
		f.advanceScanFrom(refs[0].Job)
	} else {
		// Everything applied up to committed is done; jobs applied since
		// are newer.
		f.advanceScanFrom(committed + 1)
		f.m.pendingChunks.Set(0)
		f.m.largestPending.Set(0)
	}
	return refs, nil
}

// RefreshPendingMetrics walks every pending job row and sets the pending
// chunk gauges (estimated from the follower count at post time). Run calls
// it at most once a second.
func (f *Fanout) RefreshPendingMetrics(ctx context.Context) error {
	var pending, largest int64
	err := f.scanJobs(ctx, func(j *job) bool {
		perPart := (j.followers + int64(j.shards) - 1) / int64(j.shards)
		pending += max(1, (perPart+int64(f.opts.ChunkSize)-1)/int64(f.opts.ChunkSize)-j.chunks)
		largest = max(largest, j.followers)
		return true
	})
	if err != nil {
		return err
	}
	f.m.pendingChunks.Set(float64(pending))
	f.m.largestPending.Set(float64(largest))
	return nil
}

// scanJobs calls fn with the pending job rows from the scan watermark on,
// in job order, until fn returns false.
func (f *Fanout) scanJobs(ctx context.Context, fn func(*job) bool) error {
	q := storage.SliceQuery{Table: catalog.FanoutJobsTable, Partition: catalog.JobsPartition()}
	if from := f.scanFrom.Load(); from > 0 {
		q.Start = storage.Bound{Key: catalog.JobPrefix(from), Inclusive: true}
	}
	it, err := f.db.Slice(ctx, q)
	if err != nil {
		return fmt.Errorf("cannot list fan-out jobs: %w", err)
	}
	defer it.Close()
	for it.Next() {
		j, err := decodeJob(it.Row())
		if err != nil {
			return err
		}
		if !fn(&j) {
			break
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("cannot list fan-out jobs: %w", err)
	}
	return nil
}

// advanceScanFrom moves the scan watermark up to job (never down). It is
// safe because batches are applied in stream order: a job not applied yet
// when a scan began is newer than every job the scan can see, and newer
// than the committed maximum read before it.
func (f *Fanout) advanceScanFrom(job int64) {
	for {
		cur := f.scanFrom.Load()
		if job <= cur || f.scanFrom.CompareAndSwap(cur, job) {
			return
		}
	}
}

func decodeJob(row *storage.Row) (job, error) {
	var j job
	var err error
	if j.Job, j.Shard, err = catalog.DecodeJobKey(row.Clustering); err != nil {
		return job{}, err
	}
	for _, c := range row.Cells {
		switch string(c.Column) {
		case catalog.ColKind:
			j.kind, err = catalog.DecodeText(c.Value)
		case catalog.ColAuthor:
			j.author, err = catalog.DecodeText(c.Value)
		case catalog.ColPostID:
			j.postID, err = catalog.DecodeTimeUUIDValue(c.Value)
		case catalog.ColData:
			j.data, err = catalog.DecodeBlob(c.Value)
		case catalog.ColFollowers:
			j.followers, err = catalog.DecodeBigint(c.Value)
		case catalog.ColShards:
			j.shards, err = catalog.DecodeInt(c.Value)
		case catalog.ColCursor:
			j.cursor, err = catalog.DecodeText(c.Value)
			j.hasCursor = true
		case catalog.ColChunks:
			j.chunks, err = catalog.DecodeBigint(c.Value)
		}
		if err != nil {
			return job{}, fmt.Errorf("cannot decode fan-out job %d part %d column %s: %w", j.Job, j.Shard, c.Column, err)
		}
	}
	if j.kind != catalog.JobKindPost && j.kind != catalog.JobKindDelete || j.author == "" || j.postID.Version() != 1 ||
		j.shards <= 0 || j.Shard < 0 || j.Shard >= j.shards {
		return job{}, fmt.Errorf("cannot decode fan-out job %d part %d: %w: kind %q author %q post %s parts %d",
			j.Job, j.Shard, storage.ErrCorruption, j.kind, j.author, j.postID, j.shards)
	}
	return j, nil
}

// WorkChunk works the next chunk of ref: it streams the author's
// followers from the part's cursor, takes up to ChunkSize of them that
// are in the part (and, for a post, followed before it), and writes in
// one atomic batch their timeline copies (or, for a delete job, the
// copies' deletion), any trims, and the part's new cursor, or the job
// row's deletion when the part is done. It reports whether the part is
// done. A ref whose job is gone (finished, or cancelled by a delete) is
// done.
//
// While the batch waits for its WAL sync, WorkChunk reads the part's next
// chunk (read-ahead): a chunk worker spent about 40% of its time waiting
// for syncs (a block profile of BenchmarkFanout). The next call for ref
// uses it if the part's job row still says what it was read from (cursor
// and chunk count), and reads afresh otherwise. A chunk read ahead is a
// chunk in flight like any other: messages applied between its read and
// its batch are shadowed by, or shadow, its writes through their
// timestamps (see the package doc).
func (f *Fanout) WorkChunk(ctx context.Context, ref ChunkRef) (done bool, err error) {
	ahead := f.takeAhead(ref)
	j, ok, err := f.readJob(ctx, ref)
	if err != nil || !ok {
		f.discardChunk(ahead)
		return !ok && err == nil, err
	}
	pc := ahead
	if pc == nil || pc.fromCursor != j.cursor || pc.fromHasCursor != j.hasCursor || pc.fromChunks != j.chunks {
		f.discardChunk(ahead)
		if pc, err = f.prepareJobChunk(ctx, &j); err != nil {
			return false, err
		}
	}
	var next chan *preparedChunk
	if pc.more {
		next = make(chan *preparedChunk, 1)
		nj := j
		nj.cursor, nj.hasCursor, nj.chunks = pc.nextCursor, true, j.chunks+1
		go func() {
			n, err := f.prepareJobChunk(ctx, &nj)
			if err != nil {
				n = nil // read again by the next call, which reports the error
			}
			next <- n
		}()
	}
	done, err = f.applyChunk(ctx, pc)
	if err != nil {
		f.discardChunk(pc)
	} else {
		f.releaseChunk(pc)
	}
	if next != nil {
		if n := <-next; n != nil {
			if err == nil {
				f.putAhead(ref, n)
			} else {
				f.discardChunk(n)
			}
		}
	}
	return done, err
}

func (f *Fanout) takeAhead(ref ChunkRef) *preparedChunk {
	f.aheadMu.Lock()
	defer f.aheadMu.Unlock()
	pc := f.ahead[ref]
	delete(f.ahead, ref)
	return pc
}

func (f *Fanout) putAhead(ref ChunkRef, pc *preparedChunk) {
	f.aheadMu.Lock()
	old := f.ahead[ref]
	f.ahead[ref] = pc
	f.aheadMu.Unlock()
	f.discardChunk(old)
}

// dropAheadExcept forgets the chunks read ahead for parts not in refs (a
// part that finished elsewhere or was cancelled is never worked again),
// so they stay bounded by the parts being worked.
func (f *Fanout) dropAheadExcept(refs []ChunkRef) {
	f.aheadMu.Lock()
	var drop []*preparedChunk
	for ref, pc := range f.ahead {
		if !slices.Contains(refs, ref) {
			drop = append(drop, pc)
			delete(f.ahead, ref)
		}
	}
	f.aheadMu.Unlock()
	for _, pc := range drop {
		f.discardChunk(pc)
	}
}

// discardChunk drops a chunk that was not applied: the timelines it
// checked for trimming are forgotten by the length table (its trims did
// not happen), and its batch is released.
func (f *Fanout) discardChunk(pc *preparedChunk) {
	if pc == nil {
		return
	}
	for _, h := range pc.checked {
		f.lengths.forget(h)
	}
	pc.checked = nil
	f.releaseChunk(pc)
}

// releaseChunk gives pc's batch back for the next chunk to fill: a
// chunk's batch holds thousands of mutations, and growing a new one for
// every chunk was the largest share of the fan-out's allocations (a
// sync.Pool lost them at every GC, which chunks cause often). Only
// the batch's mutation array is reused; the keys and values it pointed
// to may live on in the memtable.
func (f *Fanout) releaseChunk(pc *preparedChunk) {
	if pc != nil && pc.b != nil {
		pc.b.Reset()
		select {
		case f.batches <- pc.b:
		default:
		}
		pc.b = nil
	}
}

// preparedChunk is a chunk read and turned into its batch, not applied
// yet. Between the two, other messages may be applied: a chunk in flight.
type preparedChunk struct {
	ref    ChunkRef
	gone   bool // the job row is gone: nothing to do
	b      *storage.Batch
	more   bool
	post   bool
	postID uuid.UUID
	rows   int
	// What the chunk was read from: the part's cursor and chunk count.
	fromCursor    string
	fromHasCursor bool
	fromChunks    int64
	nextCursor    string // the cursor its batch writes, when more
	// checked holds the user hashes of the timelines it checked for
	// trimming (it set their bounds in Fanout.lengths).
	checked []uint64
}

// readJob reads the job row of ref; ok is false when it is gone.
func (f *Fanout) readJob(ctx context.Context, ref ChunkRef) (j job, ok bool, err error) {
	row, ok, err := catalog.ReadRow(ctx, f.db, catalog.FanoutJobsTable, catalog.JobsPartition(), catalog.JobKey(ref.Job, ref.Shard))
	if err != nil || !ok {
		return job{}, false, err
	}
	j, err = decodeJob(&row)
	if err != nil {
		return job{}, false, err
	}
	return j, true, nil
}

func (f *Fanout) prepareChunk(ctx context.Context, ref ChunkRef) (*preparedChunk, error) {
	j, ok, err := f.readJob(ctx, ref)
	if err != nil {
		return nil, err
	}
	if !ok {
		return &preparedChunk{ref: ref, gone: true}, nil
	}
	return f.prepareJobChunk(ctx, &j)
}

// prepareJobChunk reads the next chunk of j's part from j's cursor and
// builds its batch.
func (f *Fanout) prepareJobChunk(ctx context.Context, j *job) (*preparedChunk, error) {
	ref := j.ChunkRef
	pc := &preparedChunk{ref: ref, fromCursor: j.cursor, fromHasCursor: j.hasCursor, fromChunks: j.chunks}
	names, more, err := f.nextFollowers(ctx, j)
	if err != nil {
		return nil, err
	}
	pc.more, pc.post, pc.postID = more, j.kind == catalog.JobKindPost, j.postID
	select {
	case pc.b = <-f.batches:
	default:
		pc.b = new(storage.Batch)
	}
	b := pc.b
	key := catalog.PostKey(j.postID)
	if pc.post {
		if c, ok := f.newPostCopy(j.postID, j.author, j.data); ok { // else expired: no copy would be live
			limit := uint32(f.opts.TimelineCap + f.opts.TrimEvery)
			// The chunk's length table slots are loaded first, all at
			// once: the misses of plain loads overlap, where each add's
			// compare-and-swap would wait for its own (they were the
			// chunk's largest own CPU cost after the memtable insert).
			hashes := make([]uint64, len(names))
			for i, partition := range names {
				hashes[i] = xxhash.Sum64(partition)
			}
			f.lengths.touch(hashes)
			for i, partition := range names {
				c.put(b, partition, j.Job)
				pc.rows++
				h := hashes[i]
				bound, known := f.lengths.add(h, 1)
				if !known {
					// Untracked: a check within limit copies, at a
					// point spread by a hash of user and post.
					if bound = 1 + f.untrackedStart(partition, j.postID); bound < limit {
						f.lengths.set(h, bound)
					}
				}
				if bound >= limit {
					n, err := f.trim(ctx, b, partition, key, j.Job)
					if err != nil {
						f.discardChunk(pc)
						return nil, err
					}
					f.lengths.set(h, n)
					pc.checked = append(pc.checked, h)
				}
			}
		}
	} else {
		for _, partition := range names {
			b.DeleteRow(catalog.TimelineTable, partition, key, j.Job)
		}
		pc.rows = len(names)
	}
	jobKey := catalog.JobKey(ref.Job, ref.Shard)
	if more {
		pc.nextCursor = string(names[len(names)-1])
		step := min(j.chunks+1, subSteps-2)
		b.Put(catalog.FanoutJobsTable, catalog.JobsPartition(), jobKey, []byte(catalog.ColCursor), catalog.TextValue(pc.nextCursor), ref.Job+step)
		b.Put(catalog.FanoutJobsTable, catalog.JobsPartition(), jobKey, []byte(catalog.ColChunks), catalog.BigintValue(j.chunks+1), ref.Job+step)
	} else {
		b.DeleteRow(catalog.FanoutJobsTable, catalog.JobsPartition(), jobKey, ref.Job+subSteps-1)
	}
	return pc, nil
}

// applyChunk applies a chunk's batch with storage's ApplyNoSync: it does
// not wait for the WAL's fsync, because a chunk lost in a crash is redone
// from its job's durable cursor (doc.go, "Chunks and durability").
func (f *Fanout) applyChunk(ctx context.Context, pc *preparedChunk) (done bool, err error) {
	if pc.gone {
		return true, nil
	}
	ref := pc.ref
	if err := f.waitForMemtables(ctx); err != nil {
		return false, fmt.Errorf("cannot apply chunk of fan-out job %d part %d: %w", ref.Job, ref.Shard, err)
	}
	if pc.more || !pc.post {
		if err := f.db.ApplyNoSync(ctx, pc.b); err != nil {
			return false, fmt.Errorf("cannot apply chunk of fan-out job %d part %d: %w", ref.Job, ref.Shard, err)
		}
		f.m.rowsWritten.Add(float64(pc.rows))
		return !pc.more, nil
	}
	// The last chunk of a part: the post's lag is observed when no other
	// part is left. finishMu makes "apply, then look for other parts"
	// atomic among this process's workers, so it is observed once.
	f.finishMu.Lock()
	defer f.finishMu.Unlock()
	if err := f.db.ApplyNoSync(ctx, pc.b); err != nil {
		return false, fmt.Errorf("cannot apply chunk of fan-out job %d part %d: %w", ref.Job, ref.Shard, err)
	}
	f.m.rowsWritten.Add(float64(pc.rows))
	it, err := f.db.Slice(ctx, storage.SliceQuery{Table: catalog.FanoutJobsTable, Partition: catalog.JobsPartition(),
		Start: storage.Bound{Key: catalog.JobPrefix(ref.Job), Inclusive: true}, End: storage.Bound{Key: catalog.JobPrefixEnd(ref.Job)}, Limit: 1})
	if err != nil {
		return true, nil // the chunk is applied; only the metric is lost
	}
	last := !it.Next()
	it.Close()
	if last {
		if t, err := bucket.TimeOf(pc.postID); err == nil {
			f.m.lag.Observe(f.opts.Now().Sub(t).Seconds())
		}
	}
	return true, nil
}

// nextFollowers streams the job author's followers after the cursor and
// returns the next chunk of those in the job's part (their names, which
// are their timelines' partition keys), and whether another one of them
// follows. A post skips followers whose edge is newer than the post: their
// follow already decided what they get.
//
// The names are decoded into one buffer per chunk, not a string
// and a partition key per follower: those were most of the fan-out's own
// allocations. A new buffer per chunk, never reused, because a batch's
// keys may be kept by the storage engine after Apply.
func (f *Fanout) nextFollowers(ctx context.Context, j *job) (names [][]byte, more bool, err error) {
	// A post's follower list is read once per post, in order: through
	// the block cache without filling it.
	q := storage.SliceQuery{Table: catalog.FollowersTable, Partition: []byte(j.author), NoCacheFill: true}
	if j.hasCursor {
		q.Start = storage.Bound{Key: catalog.NameKey(j.cursor)}
	}
	it, err := f.db.Slice(ctx, q)
	if err != nil {
		return nil, false, fmt.Errorf("cannot read followers of %s: %w", j.author, err)
	}
	defer it.Close()
	// ends[i] is where name i ends in buf; the slices are cut once buf
	// stops growing.
	buf := make([]byte, 0, f.opts.ChunkSize*16)
	ends := make([]int, 0, f.opts.ChunkSize)
	var jobSince []byte // the post's timestamp as a stored since
	if j.kind == catalog.JobKindPost {
		jobSince = catalog.BigintValue(j.Job)
	}
	for it.Next() {
		r := it.Row()
		start := len(buf)
		buf, err = catalog.AppendNameFromKey(buf, r.Clustering)
		if err != nil {
			return nil, false, fmt.Errorf("cannot read followers of %s: %w", j.author, err)
		}
		name := buf[start:]
		if j.shards > 1 && int32(bucket.Shard(name, int(j.shards))) != j.Shard {
			buf = buf[:start]
			continue
		}
		if j.kind == catalog.JobKindPost {
			c, ok := catalog.CellOf(r, catalog.ColSince)
			if !ok {
				buf = buf[:start]
				continue
			}
			newer, err := sinceNewer(c.Value, jobSince, j.Job)
			if err != nil {
				return nil, false, fmt.Errorf("cannot read followers of %s: %w", j.author, err)
			}
			if newer {
				buf = buf[:start]
				continue
			}
		}
		if len(ends) == f.opts.ChunkSize {
			more = true
			buf = buf[:start]
			break
		}
		ends = append(ends, len(buf))
	}
	if err := it.Err(); err != nil {
		return nil, false, fmt.Errorf("cannot read followers of %s: %w", j.author, err)
	}
	names = make([][]byte, len(ends))
	start := 0
	for i, end := range ends {
		names[i] = buf[start:end:end]
		start = end
	}
	return names, more, nil
}

// sinceNewer reports whether a follow edge's stored since is newer than
// the job's timestamp job (stored: jobStored, catalog.BigintValue(job)).
// A stored bigint is its type byte and the number in the clustering
// encoding, which sorts like the number, so a well-formed since is
// compared as it is stored; decoding it (catalog.DecodeBigint boxes the
// number in an interface) was an allocation and 5% of the chunk's CPU
// per follower streamed. Anything else is decoded, to report it.
func sinceNewer(stored, jobStored []byte, job int64) (bool, error) {
	if len(stored) == len(jobStored) && len(stored) > 0 && stored[0] == jobStored[0] {
		return bytes.Compare(stored, jobStored) > 0, nil
	}
	since, err := catalog.DecodeBigint(stored)
	if err != nil {
		return false, err
	}
	return since > job, nil
}

// untrackedStart is the length bound an untracked timeline starts from
// (before the copy being pushed): one of 0 to TimelineCap+TrimEvery-1,
// by a hash of user and post id, so the timeline is checked within
// TimelineCap+TrimEvery copies (it may have grown up to that past the
// cap while untracked), and the checks of a post's many untracked
// followers (all of them after a restart) spread evenly over the posts
// that follow instead of all coming at one.
func (f *Fanout) untrackedStart(user []byte, id uuid.UUID) uint32 {
	var buf [128]byte
	k := append(append(buf[:0], user...), id[:]...)
	return uint32(xxhash.Sum64(k) % uint64(f.opts.TimelineCap+f.opts.TrimEvery))
}

// trim adds to b one range tombstone that cuts the user's timeline back
// to its TimelineCap newest rows, counting the copy (at key) this chunk
// adds: if the timeline already holds TimelineCap rows, the cut starts at
// the last of them when the copy is newer, after it otherwise (and then
// the copy, written at the same timestamp, is cut too). It returns an
// upper bound of the timeline's length once b is applied: TimelineCap
// after a cut, else the rows it read plus the copy.
func (f *Fanout) trim(ctx context.Context, b *storage.Batch, partition, key []byte, ts int64) (uint32, error) {
	f.m.trimChecks.Inc()
	// Through the block cache without filling it: a post's trim checks
	// touch up to one timeline per follower, each read once.
	it, err := f.db.Slice(ctx, storage.SliceQuery{Table: catalog.TimelineTable, Partition: partition, Limit: f.opts.TimelineCap, NoCacheFill: true})
	if err != nil {
		return 0, fmt.Errorf("cannot read timeline of %s to trim it: %w", partition, err)
	}
	defer it.Close()
	n := 0
	var last []byte // a copy: the row's bytes go with the next step, and
	// the step that ends the slice releases its SSTable blocks
	for it.Next() {
		n++
		last = append(last[:0], it.Row().Clustering...)
	}
	if err := it.Err(); err != nil {
		return 0, fmt.Errorf("cannot read timeline of %s to trim it: %w", partition, err)
	}
	if n == f.opts.TimelineCap && !bytes.Equal(key, last) {
		inclusive := bytes.Compare(key, last) < 0
		b.DeleteRange(catalog.TimelineTable, partition, storage.Bound{Key: last, Inclusive: inclusive}, storage.Bound{}, ts)
		f.m.trims.Inc()
		return uint32(n), nil
	}
	return uint32(n + 1), nil
}

// Run works pending chunks with at most Options.Workers at once until ctx
// ends; it then waits for the chunks in flight and returns nil. A failed
// chunk is retried after a pause (its batch was not applied, or was
// applied whole). Run is the only caller of WorkChunk it expects.
//
// While Options.WriterBusy reports a backlog, Run yields to the writer:
// one chunk at a time, started at most at Options.BusyRowsPerSecond rows
// a second and working at most Options.BusyShare of the time
// (throttle.go), checking again at least every yieldRecheck.
func (f *Fanout) Run(ctx context.Context) error {
	type result struct {
		ref  ChunkRef
		took time.Duration
		err  error
	}
	inFlight := map[ChunkRef]bool{}
	done := make(chan result)
	var retry, yield <-chan time.Time
	var yieldFor time.Duration
	var refreshed time.Time
	tb := newThrottle(f.opts.BusyRowsPerSecond, f.opts.ChunkSize, f.opts.BusyShare)
	for {
		if now := f.opts.Now(); now.Sub(refreshed) >= time.Second && ctx.Err() == nil {
			refreshed = now
			if err := f.RefreshPendingMetrics(ctx); err != nil && ctx.Err() == nil {
				f.opts.Logger.Warn("cannot refresh fan-out metrics", "err", err)
			}
		}
		limit := f.opts.Workers
		busy := f.opts.WriterBusy != nil && f.opts.WriterBusy()
		if busy {
			limit = 1
		} else {
			tb.idle(time.Now())
		}
		if len(inFlight) < limit && retry == nil && yield == nil && ctx.Err() == nil {
			refs, err := f.PendingChunks(ctx, f.opts.Workers*4)
			if err != nil && ctx.Err() == nil {
				f.m.chunkErrors.Inc()
				f.opts.Logger.Error("cannot list fan-out jobs; retrying", "err", err)
				retry = time.After(time.Second)
			} else if err == nil {
				f.dropAheadExcept(refs)
			}
			for _, r := range refs {
				if len(inFlight) >= limit {
					break
				}
				if inFlight[r] {
					continue
				}
				if busy {
					if wait := tb.take(time.Now()); wait > 0 {
						yieldFor = min(wait, yieldRecheck)
						yield = time.After(yieldFor)
						break
					}
				}
				inFlight[r] = true
				go func() {
					start := time.Now()
					_, err := f.WorkChunk(ctx, r)
					done <- result{r, time.Since(start), err}
				}()
			}
		}
		if ctx.Err() != nil && len(inFlight) == 0 {
			return nil
		}
		select {
		case res := <-done:
			delete(inFlight, res.ref)
			tb.worked(time.Now(), res.took)
			if res.err != nil && ctx.Err() == nil {
				f.m.chunkErrors.Inc()
				f.opts.Logger.Error("fan-out chunk failed; retrying", "job", res.ref.Job, "part", res.ref.Shard, "err", res.err)
				if !errors.Is(res.err, context.Canceled) {
					retry = time.After(time.Second)
				}
			}
		case <-f.wake:
		case <-retry:
			retry = nil
		case <-yield:
			yield = nil
			f.m.yielded.Add(yieldFor.Seconds())
		case <-ctx.Done():
			if len(inFlight) == 0 {
				return nil
			}
			res := <-done
			delete(inFlight, res.ref)
		}
	}
}

// yieldRecheck bounds how long Run holds a chunk back before it asks
// WriterBusy again, so the fan-out resumes full speed soon after the
// writer's backlog is gone.
const yieldRecheck = 10 * time.Millisecond
