package fanout

import "github.com/prometheus/client_golang/prometheus"

// Skip reasons (label reason of eventide_fanout_skipped_total).
const (
	SkipMissingUser     = "missing_user"
	SkipMissingAuthor   = "missing_author"
	SkipSelfFollow      = "self_follow"
	SkipInvalidName     = "invalid_name"
	SkipMissingPostID   = "missing_post_id"
	SkipInvalidPostID   = "invalid_post_id"
	SkipUnknownPost     = "unknown_post"
	SkipAlreadyFollowed = "already_following"
	SkipNotFollowing    = "not_following"
	SkipDuplicatePost   = "duplicate_post"
)

type metrics struct {
	lag            prometheus.Histogram
	rowsWritten    prometheus.Counter
	pendingChunks  prometheus.Gauge
	largestPending prometheus.Gauge
	skipped        *prometheus.CounterVec
	chunkErrors    prometheus.Counter
	yielded        prometheus.Counter
	trimChecks     prometheus.Counter
	trims          prometheus.Counter
	memtableWait   prometheus.Counter
	memtableWaits  prometheus.Gauge
}

func newMetrics() *metrics {
	return &metrics{
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "eventide_fanout_lag_seconds",
			Help:    "Seconds from a post's time to its fan-out's last timeline write.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
		}),
		rowsWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventide_fanout_timeline_rows_written_total",
			Help: "Timeline rows written (copies pushed, backfilled or deleted).",
		}),
		pendingChunks: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eventide_fanout_pending_chunks",
			Help: "Chunks of fan-out jobs not worked yet (estimated from follower counts at post time).",
		}),
		largestPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eventide_fanout_largest_pending_followers",
			Help: "Follower count (at post time) of the largest pending fan-out job.",
		}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventide_fanout_skipped_total",
			Help: "Events the fan-out skipped (still stored in events), by reason.",
		}, []string{"reason"}),
		chunkErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventide_fanout_chunk_errors_total",
			Help: "Chunks that failed and will be retried.",
		}),
		yielded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventide_fanout_yield_seconds_total",
			Help: "Seconds the chunk workers held back a chunk to yield to the writer's backlog.",
		}),
		trimChecks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventide_fanout_trim_checks_total",
			Help: "Timelines a chunk read (up to the timeline cap's worth of rows) to see whether to trim them.",
		}),
		trims: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventide_fanout_trims_total",
			Help: "Timelines cut back to the timeline cap (one range tombstone each).",
		}),
		memtableWait: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventide_fanout_memtable_wait_seconds_total",
			Help: "Seconds chunks waited for the storage engine to flush a frozen memtable (Options.MaxMemtableBytes).",
		}),
		memtableWaits: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eventide_fanout_chunks_waiting_for_flush",
			Help: "Chunks waiting now for the storage engine to flush a frozen memtable (Options.MaxMemtableBytes).",
		}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.lag, m.rowsWritten, m.pendingChunks, m.largestPending, m.skipped, m.chunkErrors, m.yielded, m.trimChecks, m.trims, m.memtableWait, m.memtableWaits}
}
