package main

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventide/eventide/cmd/internal/httpapi"
)

// TestOpsMetrics: eventide_ready follows the readiness checks, and the
// data disk's free bytes are positive and at most its size.
func TestOpsMetrics(t *testing.T) {
	health := httpapi.NewHealth()
	var failing error
	health.Add("x", func() error { return failing })
	reg := prometheus.NewPedanticRegistry()
	if err := registerOpsMetrics(reg, health, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	gauges := func() map[string]float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]float64{}
		for _, mf := range mfs {
			m[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
		}
		return m
	}
	g := gauges()
	if g["eventide_ready"] != 1 {
		t.Errorf("eventide_ready %v with every check passing, want 1", g["eventide_ready"])
	}
	if free, size := g["eventide_data_disk_free_bytes"], g["eventide_data_disk_size_bytes"]; free <= 0 || size < free {
		t.Errorf("data disk free %v, size %v", free, size)
	}
	failing = errors.New("down")
	if g := gauges(); g["eventide_ready"] != 0 {
		t.Errorf("eventide_ready %v with a failing check, want 0", g["eventide_ready"])
	}
}
