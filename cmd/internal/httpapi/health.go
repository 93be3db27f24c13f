package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
)

// Health answers /livez and /readyz from check functions the process
// adds. /readyz says every dependency is up and the process is not
// shutting down, so a load balancer sends it work; /livez says the process
// can still recover by itself, so an orchestrator should not restart it.
// A dependency that is down but may come back (NATS reconnecting, storage
// stalled) fails readiness only; one that cannot recover without a
// restart (storage failed for good) fails liveness too.
type Health struct {
	mu       sync.Mutex
	ready    []healthCheck
	live     []healthCheck
	draining atomic.Bool
}

type healthCheck struct {
	name  string
	check func() error
}

// CheckResult is one check as /readyz and /livez report it.
type CheckResult struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// NewHealth returns a Health with only the shutdown readiness check.
func NewHealth() *Health { return &Health{} }

// Add adds a readiness check: check returns nil when name is ready, or an
// error that names the cause (it is shown as the check's detail). Checks
// run on every /readyz request, so they must be cheap.
func (h *Health) Add(name string, check func() error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ready = append(h.ready, healthCheck{name, check})
}

// AddLiveness adds a liveness check: check returns an error only when name
// has failed in a way the process cannot recover from without a restart.
// Checks run on every /livez request, so they must be cheap.
func (h *Health) AddLiveness(name string, check func() error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.live = append(h.live, healthCheck{name, check})
}

// Drain makes /readyz fail from now on: the process is shutting down.
// /livez is not affected.
func (h *Health) Drain() { h.draining.Store(true) }

// Check runs every readiness check.
func (h *Health) Check() (ready bool, results []CheckResult) {
	h.mu.Lock()
	checks := slices.Clone(h.ready)
	h.mu.Unlock()
	ready, results = runChecks(checks)
	shutdown := CheckResult{Name: "shutdown", OK: !h.draining.Load()}
	if !shutdown.OK {
		shutdown.Detail, ready = "shutting down", false
	}
	return ready, append(results, shutdown)
}

// CheckLiveness runs every liveness check.
func (h *Health) CheckLiveness() (live bool, results []CheckResult) {
	h.mu.Lock()
	checks := slices.Clone(h.live)
	h.mu.Unlock()
	return runChecks(checks)
}

func runChecks(checks []healthCheck) (ok bool, results []CheckResult) {
	ok = true
	for _, c := range checks {
		r := CheckResult{Name: c.name, OK: true}
		if err := c.check(); err != nil {
			r.OK, r.Detail, ok = false, err.Error(), false
		}
		results = append(results, r)
	}
	return ok, results
}

func (h *Health) serveLivez(w http.ResponseWriter, r *http.Request) {
	live, results := h.CheckLiveness()
	if live {
		writeHealth(w, http.StatusOK, map[string]bool{"live": true})
		return
	}
	writeHealth(w, http.StatusServiceUnavailable, struct {
		Live   bool          `json:"live"`
		Checks []CheckResult `json:"checks"`
	}{false, results})
}

func (h *Health) serveReadyz(w http.ResponseWriter, r *http.Request) {
	ready, results := h.Check()
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
	}
	writeHealth(w, status, struct {
		Ready  bool          `json:"ready"`
		Checks []CheckResult `json:"checks"`
	}{ready, results})
}

func writeHealth(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		panic("BUG: cannot encode a health report: " + err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

// StartingHandler answers while a process is still starting, before
// NewHandler's handler can: /livez 200 (the process is up, so a liveness
// probe must not kill a long recovery), /readyz 503 naming the current
// step, and 503 for everything else.
func StartingHandler(step func() string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/livez":
			writeHealth(w, http.StatusOK, map[string]bool{"live": true})
		case "/readyz":
			writeHealth(w, http.StatusServiceUnavailable, struct {
				Ready  bool          `json:"ready"`
				Checks []CheckResult `json:"checks"`
			}{false, []CheckResult{{Name: "startup", Detail: step()}}})
		default:
			w.Header().Set("Retry-After", "1")
			writeProblem(w, problem{
				Type:   problemAboutBlank,
				Status: http.StatusServiceUnavailable,
				Detail: "the server is starting (" + step() + "); retry shortly",
			})
		}
	})
}
