package consumer

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the loop's Prometheus metrics. The user creates them with
// its own name prefix, registers Collectors on its registry, and passes
// them in Config.Metrics; the fields are exported for its tests.
type Metrics struct {
	Skipped        prometheus.Counter
	BatchSize      prometheus.Histogram
	ApplySeconds   prometheus.Histogram
	ApplyFailures  prometheus.Counter
	Pending        prometheus.Gauge
	WaitingStorage prometheus.Gauge
	LastApplied    prometheus.Gauge
	Resets         prometheus.Counter
	AckedUnstored  prometheus.Counter
	LagSeconds     prometheus.GaugeFunc

	// oldestUnstored is the stream timestamp (unix ns) of the oldest
	// message fetched and not yet stored; 0 when there is none.
	oldestUnstored atomic.Int64
	now            func() time.Time
}

// NewMetrics creates the metrics, named prefix + "_" + name (the writer's
// prefix is "eventide_writer").
func NewMetrics(prefix string) *Metrics {
	p := prefix + "_"
	m := &Metrics{now: time.Now,
		Skipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: p + "messages_skipped_total",
			Help: "Redelivered messages acked without being applied again (at or below the checkpoint).",
		}),
		BatchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    p + "batch_messages",
			Help:    "Messages per fetched batch.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 7),
		}),
		ApplySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    p + "apply_duration_seconds",
			Help:    "Time to apply one batch to storage (WAL fsync and write stalls included).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9),
		}),
		ApplyFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: p + "apply_failures_total",
			Help: "Failed attempts to apply a batch to storage; the batch is retried.",
		}),
		Pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: p + "consumer_pending_messages",
			Help: "Messages in the stream not yet delivered to the consumer (consumer lag in messages).",
		}),
		WaitingStorage: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: p + "waiting_on_storage",
			Help: "1 while blocked applying a batch to storage (fsync, write stall, retries), else 0.",
		}),
		LastApplied: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: p + "last_applied_sequence",
			Help: "Stream sequence of the checkpoint.",
		}),
		Resets: prometheus.NewCounter(prometheus.CounterOpts{
			Name: p + "consumer_resets_total",
			Help: "Times the consumer was repositioned to just after the checkpoint (start, lost deliveries, fetch errors).",
		}),
		AckedUnstored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: p + "acked_unstored_messages_total",
			Help: "Messages JetStream saw acknowledged that storage does not hold and the stream no longer has (storage replaced by an older copy under work-queue or interest retention): lost to storage.",
		}),
	}
	m.LagSeconds = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: p + "consumer_lag_seconds",
		Help: "Age of the oldest message fetched but not yet stored (now minus its time in the stream); 0 when every fetched message is stored.",
	}, m.lagSeconds)
	return m
}

func (m *Metrics) lagSeconds() float64 {
	oldest := m.oldestUnstored.Load()
	if oldest == 0 {
		return 0
	}
	return max(m.now().Sub(time.Unix(0, oldest)).Seconds(), 0)
}

// setOldestUnstored records the stream time of the oldest message fetched
// and not yet stored; the zero time when there is none.
func (m *Metrics) setOldestUnstored(t time.Time) {
	if t.IsZero() {
		m.oldestUnstored.Store(0)
		return
	}
	m.oldestUnstored.Store(t.UnixNano())
}

// Collectors returns every metric, for registering.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Skipped, m.BatchSize, m.ApplySeconds, m.ApplyFailures, m.Pending,
		m.WaitingStorage, m.LastApplied, m.Resets, m.AckedUnstored, m.LagSeconds}
}
