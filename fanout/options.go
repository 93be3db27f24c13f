package fanout

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Options configure a Fanout. Start from DefaultOptions.
type Options struct {
	// Logger receives skipped events (rate-limited) and worker errors.
	Logger *slog.Logger
	// Registerer receives the fan-out metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Now is the clock for TTLs and lag. Defaults to time.Now.
	Now func() time.Time

	// PostTypes are the event types that are posts (field author; the
	// event id is the post id).
	PostTypes []string
	// FollowType, UnfollowType (fields user = follower, author = followed)
	// and DeleteType (fields author and data.post_id).
	FollowType, UnfollowType, DeleteType string

	// LargeThreshold: an author with more followers than this is pulled
	// at read time instead of pushed.
	LargeThreshold int64
	// ChunkSize is the most followers one chunk of a job writes.
	ChunkSize int
	// Shards is how many shards the timeline partitions are split into
	// (xxhash64 of the partition key modulo Shards).
	Shards int
	// Workers bounds how many chunks are worked at once (each with the
	// next chunk of its part read while it is applied).
	Workers int
	// PartsPerShard: a job is split into Shards times up to PartsPerShard
	// parts, each with its own cursor, worked in parallel. Each part
	// streams the author's whole follower list and keeps its own (a hash
	// of the follower), so a part more costs that streaming again; since
	// the storage engine applies batches to its memtable one at a time,
	// one part (with its read-ahead) per shard kept two cores as busy as
	// two parts did (BENCHMARKS.md), so the default is 1.
	PartsPerShard int
	// Backfill is how many of an author's newest posts a follow copies.
	Backfill int
	// TimelineTTL is how long a timeline copy lives after its post time.
	TimelineTTL time.Duration
	// TimelineCap is the length a timeline is trimmed back to.
	TimelineCap int
	// TrimEvery is how far past TimelineCap a timeline grows before one
	// range tombstone cuts it back to the cap. Chunks keep an upper bound
	// of each timeline's length in memory (TrimTracked timelines) and
	// read a timeline to trim it only when the bound reaches TimelineCap
	// plus TrimEvery: a check reads the cap's worth of rows, so it costs
	// about TimelineCap/TrimEvery rows read per copy pushed to a full
	// timeline. A timeline not tracked yet (since a restart, or evicted)
	// is checked within TimelineCap+TrimEvery copies, at a point drawn by
	// a hash of user and post id (so a post's untracked followers are not
	// all checked at once), which starts tracking it.
	TrimEvery int
	// TrimTracked is how many timelines' length bounds the chunks keep
	// (8 bytes each, allocated once, outside the Go heap where anonymous
	// mmap exists; rounded up to a power of two). A
	// timeline evicted from the table is checked as an untracked one
	// (about one in TimelineCap+TrimEvery of its copies when more
	// timelines than the table holds take turns evicting each other).
	TrimTracked int
	// WriterBusy, when set, reports whether the event writer has a
	// backlog (cmd/ingest: the writer's consumer has pending messages).
	// While it does, at most one chunk is in flight and chunks start at
	// no more than BusyRowsPerSecond timeline rows a second on average,
	// so ordinary ingest keeps most of the shared storage engine; while
	// it does not, the fan-out runs at full speed.
	WriterBusy func() bool
	// BusyRowsPerSecond is the fan-out's budget of timeline rows per
	// second while WriterBusy reports a backlog. It is never zero, so a
	// fan-out always progresses, however busy the writer stays.
	BusyRowsPerSecond int
	// BusyShare is the most of the time the chunk workers spend on chunks
	// while WriterBusy reports a backlog: after a chunk that took d, the
	// next starts no sooner than d*(1/BusyShare-1) later. It adapts where
	// a fixed rate does not: on a machine that gives the process less
	// CPU, chunks take longer and start less often. 1 turns it off.
	BusyShare float64
	// CleanupScan is how many of a user's newest timeline rows an
	// unfollow looks through for the author's copies to delete (the read
	// filter hides any it misses).
	CleanupScan int
	// MaxMemtableBytes bounds the storage engine's memtables while a
	// fan-out writes: a chunk waits before its batch while the memtables
	// (storage.Metrics MemtableBytes: the mutable one and the frozen ones
	// waiting for their flush) hold more than this and one of them is
	// being flushed. A large fan-out writes memtables faster than they
	// are flushed, so without it the mutable memtable fills while the
	// frozen ones flush, up to the engine's own stall limit
	// (MemtableSize x (1 + MaxImmutableMemtables)). Ordinary ingest does
	// not wait. The default (0) is the store's own memtable size
	// (storage.Options.MemtableSize, read from its Metrics at Open): a
	// chunk waits whenever a frozen memtable is being flushed and the
	// mutable one holds anything. Negative: no limit.
	MaxMemtableBytes int64
}

// DefaultOptions returns the defaults of the issue: posts of type "post",
// a 10,000-follower pull threshold, chunks of 1,000, one shard, a 30-day
// timeline TTL and an 800-entry cap.
func DefaultOptions() Options {
	return Options{
		Now:            time.Now,
		PostTypes:      []string{"post"},
		FollowType:     "follow",
		UnfollowType:   "unfollow",
		DeleteType:     "post_delete",
		LargeThreshold: 10_000,
		ChunkSize:      1_000,
		Shards:         1,
		Workers:        2,
		PartsPerShard:  1,
		Backfill:       20,
		TimelineTTL:    30 * 24 * time.Hour,
		TimelineCap:    800,
		TrimEvery:      200,
		TrimTracked:    1 << 19,
		CleanupScan:    2_000,

		BusyRowsPerSecond: 20_000,
		BusyShare:         0.25,
	}
}

func (o *Options) validate() error {
	d := DefaultOptions()
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Now == nil {
		o.Now = d.Now
	}
	if len(o.PostTypes) == 0 {
		o.PostTypes = d.PostTypes
	}
	if o.FollowType == "" {
		o.FollowType = d.FollowType
	}
	if o.UnfollowType == "" {
		o.UnfollowType = d.UnfollowType
	}
	if o.DeleteType == "" {
		o.DeleteType = d.DeleteType
	}
	if o.BusyRowsPerSecond == 0 {
		o.BusyRowsPerSecond = d.BusyRowsPerSecond
	}
	if o.PartsPerShard == 0 {
		o.PartsPerShard = d.PartsPerShard
	}
	if o.TrimTracked == 0 {
		o.TrimTracked = d.TrimTracked
	}
	if o.BusyShare == 0 {
		o.BusyShare = d.BusyShare
	}
	switch {
	case o.LargeThreshold < 0:
		return fmt.Errorf("fan-out: LargeThreshold %d is negative", o.LargeThreshold)
	case o.ChunkSize <= 0:
		return fmt.Errorf("fan-out: ChunkSize %d must be positive", o.ChunkSize)
	case o.Shards <= 0 || o.Shards > 1<<15:
		return fmt.Errorf("fan-out: Shards %d must be 1 to 32768", o.Shards)
	case o.Workers <= 0:
		return fmt.Errorf("fan-out: Workers %d must be positive", o.Workers)
	case o.PartsPerShard < 0 || o.Shards*o.PartsPerShard > 1<<15:
		return fmt.Errorf("fan-out: PartsPerShard %d must be 0 (the default) or positive, and Shards times it at most 32768", o.PartsPerShard)
	case o.Backfill < 0:
		return fmt.Errorf("fan-out: Backfill %d is negative", o.Backfill)
	case o.TimelineTTL < time.Second:
		return fmt.Errorf("fan-out: TimelineTTL %s is under a second", o.TimelineTTL)
	case o.TimelineCap <= 0:
		return fmt.Errorf("fan-out: TimelineCap %d must be positive", o.TimelineCap)
	case o.TrimEvery <= 0:
		return fmt.Errorf("fan-out: TrimEvery %d must be positive", o.TrimEvery)
	case o.TrimTracked < 0 || o.TrimTracked > 1<<30:
		return fmt.Errorf("fan-out: TrimTracked %d must be 0 (the default) to 2^30", o.TrimTracked)
	case o.TimelineCap+o.TrimEvery > maxLength:
		return fmt.Errorf("fan-out: TimelineCap %d plus TrimEvery %d is above 2^31-1", o.TimelineCap, o.TrimEvery)
	case !(o.BusyShare > 0 && o.BusyShare <= 1):
		return fmt.Errorf("fan-out: BusyShare %v must be above 0 and at most 1", o.BusyShare)
	case o.BusyRowsPerSecond < 0:
		return fmt.Errorf("fan-out: BusyRowsPerSecond %d is negative", o.BusyRowsPerSecond)
	case o.CleanupScan <= 0:
		return fmt.Errorf("fan-out: CleanupScan %d must be positive", o.CleanupScan)
	}
	return nil
}
