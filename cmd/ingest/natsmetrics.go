package main

import (
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// registerNATSMetrics registers the state of the process's NATS
// connection, read from nc at each scrape: whether it is connected, how
// often it reconnected, and its traffic.
func registerNATSMetrics(reg prometheus.Registerer, nc *nats.Conn) error {
	stat := func(f func(s nats.Statistics) uint64) func() float64 {
		return func() float64 { return float64(f(nc.Stats())) }
	}
	cs := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "eventide_nats_connected",
			Help: "1 while the NATS connection is connected, 0 while it is disconnected, reconnecting or closed.",
		}, func() float64 {
			if nc.Status() == nats.CONNECTED {
				return 1
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "eventide_nats_reconnects_total",
			Help: "Times the NATS connection reconnected after losing its server.",
		}, stat(func(s nats.Statistics) uint64 { return s.Reconnects })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "eventide_nats_in_bytes_total",
			Help: "Bytes the NATS connection received.",
		}, stat(func(s nats.Statistics) uint64 { return s.InBytes })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "eventide_nats_out_bytes_total",
			Help: "Bytes the NATS connection sent.",
		}, stat(func(s nats.Statistics) uint64 { return s.OutBytes })),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("cannot register the NATS connection metrics: %w", err)
		}
	}
	return nil
}
