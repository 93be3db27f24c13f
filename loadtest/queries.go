package main

import (
	"context"
	"errors"
	"maps"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventide/eventide/loadtest/internal/arrival"
	"github.com/eventide/eventide/loadtest/internal/hist"
	"github.com/eventide/eventide/loadtest/internal/workload"
)

// queryLoad runs the query mix: one arrival.Run whose operations are HTTP
// GETs read to the end.
type queryLoad struct {
	cfg     *config
	api     *apiClient
	gen     *workload.QueryGen
	lat     *hist.Set // kinds query.*
	workers []*queryWorker
	dropped map[string]int64 // by kind, on the scheduler goroutine

	ok     atomic.Int64
	failed atomic.Int64
}

type queryWorker struct {
	lastErr error
	ok      map[string]int64
	errors  map[string]int64
}

func newQueryLoad(cfg *config, api *apiClient, types []string, weights []float64, lat *hist.Set) (*queryLoad, error) {
	qc := cfg.Query
	qc.Seed, qc.Types, qc.Weights, qc.Mix = cfg.Seed, types, weights, cfg.QueryMix
	gen, err := workload.NewQueryGen(qc)
	if err != nil {
		return nil, err
	}
	l := &queryLoad{cfg: cfg, api: api, gen: gen, lat: lat, dropped: map[string]int64{}}
	for range cfg.QueryWorkers {
		l.workers = append(l.workers, &queryWorker{ok: map[string]int64{}, errors: map[string]int64{}})
	}
	return l, nil
}

func (l *queryLoad) run(ctx context.Context) (arrival.Stats, error) {
	return arrival.Run(ctx, arrival.Config[workload.Query]{
		Rate: l.cfg.QueryRate, Duration: l.cfg.Duration, Workers: l.cfg.QueryWorkers,
		MaxLateness: l.cfg.MaxLateness,
		Next:        l.gen.Next,
		Do: func(ctx context.Context, w int, q workload.Query, intended time.Time) {
			wk := l.workers[w]
			qctx, cancel := context.WithTimeout(ctx, l.cfg.QueryTimeout)
			wk.lastErr = l.api.get(qctx, q.Path(intended), nil)
			cancel()
			if wk.lastErr != nil {
				l.failed.Add(1)
				wk.errors[q.Kind+"."+apiErrorCause(wk.lastErr)]++
				return
			}
			l.ok.Add(1)
			wk.ok[q.Kind]++
		},
		Done: func(w int, q workload.Query, intended time.Time, latency time.Duration) {
			if l.workers[w].lastErr == nil {
				l.lat.Record(w, q.Kind, latency)
			}
		},
		Dropped: func(q workload.Query, intended time.Time) { l.dropped[q.Kind]++ },
	})
}

func (l *queryLoad) totals() (ok, errs map[string]int64) {
	ok, errs = map[string]int64{}, map[string]int64{}
	for _, w := range l.workers {
		for k, v := range w.ok {
			ok[k] += v
		}
		for k, v := range w.errors {
			errs[k] += v
		}
	}
	return ok, errs
}

// apiErrorCause names an HTTP failure: http_<status>, timeout,
// connection or other.
func apiErrorCause(err error) string {
	var st *httpStatusError
	var netErr net.Error
	switch {
	case errors.As(err, &st):
		return "http_" + strconv.Itoa(st.Status)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.As(err, &netErr):
		return "connection"
	}
	return "other"
}

// errorCounts counts errors by cause from many goroutines.
type errorCounts struct {
	mu sync.Mutex
	m  map[string]int64
}

func (e *errorCounts) add(cause string) {
	e.mu.Lock()
	if e.m == nil {
		e.m = map[string]int64{}
	}
	e.m[cause]++
	e.mu.Unlock()
}

func (e *errorCounts) snapshot() map[string]int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.m)
}
