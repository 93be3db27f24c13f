package reader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eventide/eventide/storage"
	"github.com/prometheus/client_golang/prometheus"
)

// Store is what a Reader reads from: bounded slices of one partition.
// *storage.DB implements it; a client of a remote shard can too. Slice
// must stop with an error wrapping ctx.Err() once ctx is done.
type Store interface {
	Slice(ctx context.Context, q storage.SliceQuery) (storage.Rows, error)
}

// Reader runs queries against one store. It is safe for concurrent use.
type Reader struct {
	db      Store
	opts    Options
	metrics *metrics
	// pages recycles released event pages (EventPage.Release).
	pages eventPages
}

// New returns a Reader of db. Its metrics register on opts.Registerer.
func New(db Store, opts Options) (*Reader, error) {
	opts.fillDefaults()
	m := newMetrics()
	if opts.Registerer != nil {
		for _, c := range m.collectors() {
			if err := opts.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("register reader metrics: %w", err)
			}
		}
	}
	return &Reader{db: db, opts: opts, metrics: m}, nil
}

// finishQuery applies the tombstone warning threshold and records the
// query's tombstones.
func (r *Reader) finishQuery(qs *queryState, kind, what string) {
	r.metrics.tombstones.WithLabelValues(kind).Observe(float64(qs.trace.Tombstones))
	if qs.trace.Tombstones >= r.opts.WarnTombstones {
		r.metrics.tombstoneWarnings.WithLabelValues(kind).Inc()
		r.opts.Logger.Warn("query scanned many tombstones",
			"kind", kind, "query", what, "tombstones", qs.trace.Tombstones,
			"warn_threshold", r.opts.WarnTombstones, "fail_threshold", r.opts.FailTombstones,
			"last_partition", string(qs.partition), "trace", qs.trace.String())
	}
}

type metrics struct {
	queries           *prometheus.CounterVec
	duration          *prometheus.HistogramVec
	tombstones        *prometheus.HistogramVec
	tombstoneWarnings *prometheus.CounterVec
}

// queryKinds are the kind label values of the reader's metrics: one per
// kind of query (finishQuery's and observe's callers).
var queryKinds = []string{"events", "event", "counts", "top_types", "slice", "raw_slice"}

func newMetrics() *metrics {
	m := &metrics{
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventide_reader_queries_total",
			Help: "Queries run, by kind (events, counts, slice) and result (ok, invalid, tombstones, canceled, error).",
		}, []string{"kind", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "eventide_reader_query_duration_seconds",
			Help:    "Time to run a query, by kind.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16),
		}, []string{"kind"}),
		tombstones: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "eventide_reader_tombstones_scanned",
			Help:    "Tombstones (including expired and shadowed cells) scanned per query, by kind.",
			Buckets: []float64{0, 1, 10, 100, 1000, 10000, 100000},
		}, []string{"kind"}),
		tombstoneWarnings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventide_reader_tombstone_warnings_total",
			Help: "Queries that scanned at least the warning threshold of tombstones, by kind.",
		}, []string{"kind"}),
	}
	// The warning counter starts at 0 for every kind, so that it is on
	// /metrics (and alerts on it work) before the first warning.
	for _, kind := range queryKinds {
		m.tombstoneWarnings.WithLabelValues(kind)
	}
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.queries, m.duration, m.tombstones, m.tombstoneWarnings}
}

func (m *metrics) observe(kind string, start time.Time, err error) {
	result := "ok"
	switch {
	case err == nil:
	case errors.Is(err, ErrInvalidQuery):
		result = "invalid"
	case errors.Is(err, ErrTooManyTombstones):
		result = "tombstones"
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		// The caller gave up or ran out of time: not a server failure.
		result = "canceled"
	default:
		result = "error"
	}
	m.queries.WithLabelValues(kind, result).Inc()
	m.duration.WithLabelValues(kind).Observe(time.Since(start).Seconds())
}
