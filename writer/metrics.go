package writer

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// maxTypeLabels bounds the distinct values of the type label: event types
// are chosen by producers, and a label per type must not grow without end.
// Types past the bound are counted under otherTypeLabel.
const (
	maxTypeLabels  = 256
	otherTypeLabel = "_other"
)

// metrics are the writer's Prometheus metrics. Only the Run goroutine
// updates them.
type metrics struct {
	ingested       *prometheus.CounterVec
	rejected       *prometheus.CounterVec
	skipped        prometheus.Counter
	batchSize      prometheus.Histogram
	applySeconds   prometheus.Histogram
	applyFailures  prometheus.Counter
	pending        prometheus.Gauge
	waitingStorage prometheus.Gauge
	lastApplied    prometheus.Gauge
	consumerResets prometheus.Counter
	dlqFailures    prometheus.Counter
	ackedUnstored  prometheus.Counter

	typeLabels map[string]bool
}

func newMetrics() *metrics {
	m := &metrics{
		ingested: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventide_writer_events_ingested_total",
			Help: "Events stored, by event type (types past the first 256 seen count as _other).",
		}, []string{"type"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventide_writer_events_rejected_total",
			Help: "Messages sent to the dead-letter stream, by reason.",
		}, []string{"reason"}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventide_writer_messages_skipped_total",
			Help: "Redelivered messages acked without being applied again (at or below the checkpoint).",
		}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "eventide_writer_batch_messages",
			Help:    "Messages per fetched batch.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 7),
		}),
		applySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "eventide_writer_apply_duration_seconds",
			Help:    "Time to apply one batch to storage (WAL fsync and write stalls included).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9),
		}),
		applyFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventide_writer_apply_failures_total",
			Help: "Failed attempts to apply a batch to storage; the batch is retried.",
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eventide_writer_consumer_pending_messages",
			Help: "Messages in the stream not yet delivered to the writer's consumer (consumer lag).",
		}),
		waitingStorage: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eventide_writer_waiting_on_storage",
			Help: "1 while the writer is blocked applying a batch to storage (fsync, write stall, retries), else 0.",
		}),
		lastApplied: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eventide_writer_last_applied_sequence",
			Help: "Stream sequence of the writer's checkpoint.",
		}),
		consumerResets: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventide_writer_consumer_resets_total",
			Help: "Times the consumer was repositioned to just after the checkpoint (start, lost deliveries, fetch errors).",
		}),
		dlqFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventide_writer_dlq_publish_failures_total",
			Help: "Dead letters the dead-letter stream did not ack (error, no stream, timeout); each is retried and its original stays unacked.",
		}),
		ackedUnstored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventide_writer_acked_unstored_messages_total",
			Help: "Messages JetStream saw acknowledged that storage does not hold and the stream no longer has (storage replaced by an older copy under work-queue or interest retention): lost to storage.",
		}),
		typeLabels: map[string]bool{},
	}
	for _, r := range allReasons {
		m.rejected.WithLabelValues(r)
	}
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.ingested, m.rejected, m.skipped, m.batchSize, m.applySeconds,
		m.applyFailures, m.pending, m.waitingStorage, m.lastApplied, m.consumerResets, m.dlqFailures, m.ackedUnstored}
}

// register registers every metric on r, or none of them.
func (m *metrics) register(r prometheus.Registerer) error {
	var done []prometheus.Collector
	for _, c := range m.collectors() {
		if err := r.Register(c); err != nil {
			for _, d := range done {
				r.Unregister(d)
			}
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return fmt.Errorf("cannot register writer metrics: %w (one registry per writer)", err)
			}
			return fmt.Errorf("cannot register writer metrics: %w", err)
		}
		done = append(done, c)
	}
	return nil
}

func (m *metrics) typeLabel(eventType string) string {
	if m.typeLabels[eventType] {
		return eventType
	}
	if len(m.typeLabels) >= maxTypeLabels {
		return otherTypeLabel
	}
	m.typeLabels[eventType] = true
	return eventType
}
