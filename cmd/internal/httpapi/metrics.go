package httpapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns the registry a process serves on /metrics, holding
// the Go runtime, process and build-info collectors. Storage, writer and
// reader register on it through their Registerer options.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector(),
	)
	return reg
}

// RegisterBuildInfo registers eventide_build_info{version,revision,goversion},
// always 1: which build a process runs, for dashboards to join on.
func RegisterBuildInfo(reg prometheus.Registerer, version, revision, goVersion string) error {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "eventide_build_info",
		Help:        "Always 1; the labels say which build of Eventide runs: module version, VCS revision and Go version.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": goVersion},
	})
	g.Set(1)
	if err := reg.Register(g); err != nil {
		return fmt.Errorf("cannot register eventide_build_info: %w", err)
	}
	return nil
}

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventide_http_requests_total",
			Help: "HTTP requests answered, by handler (the route, or \"other\") and status code.",
		}, []string{"handler", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "eventide_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by handler.",
			Buckets: prometheus.ExponentialBuckets(100e-6, 4, 10),
		}, []string{"handler"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("cannot register HTTP metrics: %w", err)
		}
	}
	return m, nil
}

func (m *httpMetrics) instrument(handler string, h http.Handler) http.Handler {
	labels := prometheus.Labels{"handler": handler}
	return promhttp.InstrumentHandlerCounter(m.requests.MustCurryWith(labels),
		promhttp.InstrumentHandlerDuration(m.duration.MustCurryWith(labels), h))
}

// accessLog writes one debug line per request.
func accessLog(logger *slog.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !logger.Enabled(r.Context(), slog.LevelDebug) {
			h.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		logger.Debug("http request", "method", r.Method, "url", r.URL.String(), "status", rec.status,
			"bytes", rec.bytes, "took", time.Since(start), "remote", r.RemoteAddr)
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	n, err := r.ResponseWriter.Write(b)
	r.bytes += n
	return n, err
}

// Unwrap lets http.ResponseController reach the connection.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
