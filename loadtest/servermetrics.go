package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// serverCounters reads the server's /metrics and returns every
// monotonic value of Eventide and its process, summed over label sets:
// counters by name, and each histogram's "<name>_count" and "<name>_sum".
// The difference of two readings says what the server did in between:
// WAL fsyncs and their time, writer batches, flushes, compactions,
// stalls, CPU.
func (a *apiClient) serverCounters(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("cannot make request /metrics: %w", err)
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot GET /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %w", &httpStatusError{Status: resp.StatusCode})
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("cannot parse /metrics: %w", err)
	}
	out := map[string]float64{}
	for name, f := range families {
		if !strings.HasPrefix(name, "eventide_") && name != "process_cpu_seconds_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[name] += m.GetCounter().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[name+"_count"] += float64(m.GetHistogram().GetSampleCount())
				out[name+"_sum"] += m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out, nil
}

// counterDeltas returns after - before for every name in after, leaving
// out those that did not move.
func counterDeltas(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for name, v := range after {
		if d := v - before[name]; d != 0 {
			out[name] = d
		}
	}
	return out
}
