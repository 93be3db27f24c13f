package main

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventide/eventide/cmd/internal/httpapi"
)

var (
	diskFreeDesc = prometheus.NewDesc("eventide_data_disk_free_bytes",
		"Bytes available to this process on the filesystem of --data (statfs at each scrape): what the WAL, SSTables and the embedded NATS store can still grow into.", nil, nil)
	diskSizeDesc = prometheus.NewDesc("eventide_data_disk_size_bytes",
		"Size in bytes of the filesystem of --data.", nil, nil)
)

// registerOpsMetrics registers what deploy/prometheus alerts on without
// an exporter beside the process: eventide_ready (the /readyz verdict,
// evaluated at each scrape) and the free and total bytes of the data
// directory's filesystem.
func registerOpsMetrics(reg prometheus.Registerer, health *httpapi.Health, dataDir string) error {
	ready := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "eventide_ready",
		Help: "1 when /readyz would answer 200 (NATS connected, storage healthy, writer and fan-out running), else 0.",
	}, func() float64 {
		if ok, _ := health.Check(); ok {
			return 1
		}
		return 0
	})
	if err := reg.Register(ready); err != nil {
		return fmt.Errorf("cannot register eventide_ready: %w", err)
	}
	if err := reg.Register(diskCollector{dataDir}); err != nil {
		return fmt.Errorf("cannot register the data disk metrics: %w", err)
	}
	return nil
}

type diskCollector struct{ dir string }

func (c diskCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- diskFreeDesc
	ch <- diskSizeDesc
}

func (c diskCollector) Collect(ch chan<- prometheus.Metric) {
	free, size, err := diskSpace(c.dir)
	if err != nil {
		err = fmt.Errorf("cannot statfs the data directory %s: %w", c.dir, err)
		ch <- prometheus.NewInvalidMetric(diskFreeDesc, err)
		ch <- prometheus.NewInvalidMetric(diskSizeDesc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(diskFreeDesc, prometheus.GaugeValue, float64(free))
	ch <- prometheus.MustNewConstMetric(diskSizeDesc, prometheus.GaugeValue, float64(size))
}
