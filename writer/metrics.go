package writer

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventide/eventide/writer/consumer"
)

// maxTypeLabels bounds the distinct values of the type label: event types
// are chosen by producers, and a label per type must not grow without end.
// Types past the bound are counted under otherTypeLabel.
const (
	maxTypeLabels  = 256
	otherTypeLabel = "_other"
)

// metricsPrefix names every writer metric, the loop's included.
const metricsPrefix = "eventide_writer"

// metrics are the writer's Prometheus metrics: its own, and those of its
// consumer loop. The batch's Stored updates ingested, rejected and the
// type counters; commits run one at a time.
type metrics struct {
	ingested    *prometheus.CounterVec
	rejected    *prometheus.CounterVec
	dlqFailures prometheus.Counter
	consumer    *consumer.Metrics

	// typeCounters are ingested's counters by event type, looked up once
	// per type (a label lookup hashes and locks: once per type per batch
	// was 1% of the server's CPU at 10,000 events/s); at most
	// maxTypeLabels, then otherTypes.
	typeCounters map[string]prometheus.Counter
	otherTypes   prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		ingested: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricsPrefix + "_events_ingested_total",
			Help: "Events stored, by event type (types past the first 256 seen count as _other).",
		}, []string{"type"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricsPrefix + "_events_rejected_total",
			Help: "Messages sent to the dead-letter stream, by reason.",
		}, []string{"reason"}),
		dlqFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricsPrefix + "_dlq_publish_failures_total",
			Help: "Dead letters the dead-letter stream did not ack (error, no stream, timeout); each is retried and its original stays unacked.",
		}),
		consumer:     consumer.NewMetrics(metricsPrefix),
		typeCounters: map[string]prometheus.Counter{},
	}
	for _, r := range allReasons {
		m.rejected.WithLabelValues(r)
	}
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return append([]prometheus.Collector{m.ingested, m.rejected, m.dlqFailures}, m.consumer.Collectors()...)
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

// ingestedOf returns the counter of events of eventType ingested: its own
// for the first maxTypeLabels types seen, then the one of otherTypeLabel.
func (m *metrics) ingestedOf(eventType string) prometheus.Counter {
	if c, ok := m.typeCounters[eventType]; ok {
		return c
	}
	if len(m.typeCounters) >= maxTypeLabels {
		if m.otherTypes == nil {
			m.otherTypes = m.ingested.WithLabelValues(otherTypeLabel)
		}
		return m.otherTypes
	}
	c := m.ingested.WithLabelValues(eventType)
	m.typeCounters[eventType] = c
	return c
}
