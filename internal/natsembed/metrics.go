package natsembed

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
)

var storeBytesDesc = prometheus.NewDesc("eventide_nats_store_bytes",
	"Bytes on disk of the embedded NATS server's JetStream store (files under its store directory, summed at each scrape).", nil, nil)

// NewStoreCollector reports eventide_nats_store_bytes, the size of the
// files under storeDir (Config.StoreDir), walked at each scrape: what the
// embedded server's streams, consumers and metadata take on disk.
func NewStoreCollector(storeDir string) prometheus.Collector { return storeCollector{storeDir} }

type storeCollector struct{ dir string }

func (c storeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- storeBytesDesc }

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	n, err := dirBytes(c.dir)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(storeBytesDesc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(storeBytesDesc, prometheus.GaugeValue, float64(n))
}

// dirBytes sums the sizes of the regular files under dir. Files removed
// during the walk (the server compacts and deletes blocks) are skipped.
func dirBytes(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path != dir && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		total += info.Size()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("cannot measure the NATS store %s: %w", dir, err)
	}
	return total, nil
}
