package reader

import (
	"errors"
	"log/slog"
	"time"

	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
	"github.com/prometheus/client_golang/prometheus"
)

// ErrInvalidQuery is wrapped by every error caused by the query itself: bad
// parameters, bad bounds, bad page tokens, unknown tables or columns, too
// wide a window. The message says what to fix.
var ErrInvalidQuery = errors.New("invalid query")

// ErrTooManyTombstones is wrapped when a query scanned more tombstones than
// Options.FailTombstones.
var ErrTooManyTombstones = storage.ErrTooManyTombstones

// Defaults of Options.
const (
	DefaultWarnTombstones = 1000
	DefaultFailTombstones = 100000
	// DefaultMaxBuckets admits a query over the whole window of the
	// default TTL (7 days): 168 hours touch 169 hour buckets unless they
	// start on the hour.
	DefaultMaxBuckets      = 7*24 + 1
	DefaultMaxCountBuckets = 31 * 24
	DefaultLimit           = 100
	MaxLimit               = 10000
	// MaxCountPoints bounds the points of one count query, as Prometheus
	// bounds a range query: a week at a one-minute step (10080) fits.
	MaxCountPoints = 11000
	// DefaultMaxPageBytes bounds the event data one page of an event
	// query holds: MaxLimit events of the largest accepted body would be
	// gigabytes in memory and on the wire.
	DefaultMaxPageBytes = 8 << 20
)

// Options configure a Reader. The zero value of each field means its
// default.
type Options struct {
	// WarnTombstones: a query that scans at least this many tombstones
	// logs a warning and counts in eventide_reader_tombstone_warnings_total.
	WarnTombstones int
	// FailTombstones: a query that scans more fails with
	// ErrTooManyTombstones.
	FailTombstones int
	// MaxBuckets bounds the hour buckets one event query may touch.
	MaxBuckets int
	// MaxCountBuckets bounds the hour buckets one count query may touch.
	MaxCountBuckets int
	// ParallelHours is how many hour partitions of one count query are
	// sliced at once; 0 or 1: one after the other, right for a local
	// store (a slice is a memory or page cache read, and goroutines on a
	// busy machine cost more than they save). A remote store (cmd/query,
	// where each slice is a NATS round trip) sets RemoteParallelHours,
	// used when it cannot run the count query as one walk
	// (GroupWalker).
	ParallelHours int
	// MaxPageBytes bounds the event data of one page: once a page holds
	// this many bytes of data it ends early, with a page token (a short
	// page is not the end). At least one event is always returned.
	MaxPageBytes int
	// Types holds the event types' TTLs and sub-partitions; it must be the
	// writer's, with the history catalog.RecordEventTypes returns, so each
	// hour bucket is read with the settings it was written with.
	Types *schema.EventTypes
	// Catalog resolves the tables of generic slices; nil serves only the
	// built-in tables.
	Catalog    *catalog.Catalog
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Now is the clock of TTL clamps and default windows.
	Now func() time.Time
}

func (o *Options) fillDefaults() {
	if o.WarnTombstones <= 0 {
		o.WarnTombstones = DefaultWarnTombstones
	}
	if o.FailTombstones <= 0 {
		o.FailTombstones = DefaultFailTombstones
	}
	if o.MaxBuckets <= 0 {
		o.MaxBuckets = DefaultMaxBuckets
	}
	if o.MaxCountBuckets <= 0 {
		o.MaxCountBuckets = DefaultMaxCountBuckets
	}
	if o.MaxPageBytes <= 0 {
		o.MaxPageBytes = DefaultMaxPageBytes
	}
	if o.Types == nil {
		o.Types = &schema.EventTypes{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}
