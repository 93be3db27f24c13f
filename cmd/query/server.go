package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/cmd/internal/httpapi"
	"github.com/eventide/eventide/internal/natsconn"
	"github.com/eventide/eventide/internal/queryrpc"
	"github.com/eventide/eventide/internal/tail"
	"github.com/eventide/eventide/reader"
)

// server is one running query process.
type server struct {
	cfg     *config
	logger  *slog.Logger
	health  *httpapi.Health
	httpLn  net.Listener
	httpSrv *http.Server
	nc      *nats.Conn
	client  *queryrpc.Client
	// stopOwnersWatch ends the watch of the owners bucket (owners_watch.go).
	stopOwnersWatch func()
	// positions caches the nodes' consumer positions for freshness.
	positions *nodePositions
	// debug serves --pprof; nil without it.
	debug *debugServer
	// tail is the live tail, fed by relay with the events the storage
	// nodes store.
	tail   *tail.Broadcaster
	relay  *queryrpc.TailRelay
	step   atomic.Pointer[string]
	failed chan error
}

func (s *server) setStep(step string, attrs ...any) {
	s.step.Store(&step)
	s.logger.Info(step, attrs...)
}

// typesRetry is the pause between two attempts to read the event type
// settings while no storage node answers.
const typesRetry = 500 * time.Millisecond

// start connects, reads the event type settings from a storage node and
// serves the API. Until then HTTP answers /livez and says "starting".
func start(ctx context.Context, cfg *config, build buildInfo, logger *slog.Logger) (s *server, err error) {
	s = &server{cfg: cfg, logger: logger, health: httpapi.NewHealth(), failed: make(chan error, 1)}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.shutdown())
			s = nil
		}
	}()
	if s.httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return s, fmt.Errorf("cannot listen for HTTP (--http): %w", err)
	}
	s.setStep("starting")
	var root switchHandler
	root.set(httpapi.StartingHandler(func() string { return *s.step.Load() }))
	s.httpSrv = &http.Server{Handler: &root, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(logger.With("component", "http").Handler(), slog.LevelWarn),
		// Large answers leave in one write (httpapi/sendonce.go).
		ConnContext: httpapi.ConnContext}
	go func() {
		if err := s.httpSrv.Serve(httpapi.HoldingListener(s.httpLn)); !errors.Is(err, http.ErrServerClosed) {
			s.fail(fmt.Errorf("HTTP server stopped: %w", err))
		}
	}()

	if cfg.PprofAddr != "" {
		if s.debug, err = startDebugServer(cfg.PprofAddr, logger.With("component", "pprof")); err != nil {
			return s, err
		}
	}
	s.setStep("connecting to NATS", "url", natsconn.Redact(cfg.NATSURL))
	s.nc, err = natsconn.Connect(ctx, cfg.NATS, nats.Name("eventide-query"), nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if !nc.IsClosed() {
				logger.Warn("NATS disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { logger.Info("NATS reconnected", "url", nc.ConnectedUrlRedacted()) }),
		// Asynchronous errors, such as a permission the server refuses a
		// subscription (the live tail's), are otherwise silent.
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			logger.Error("NATS error", "subject", subject, "err", err)
		}))
	if err != nil {
		return s, fmt.Errorf("%w (--nats-url)", err) // natsconn names the URL, redacted
	}
	reg := httpapi.NewRegistry()
	if err := httpapi.RegisterBuildInfo(reg, build.Version, build.Revision, build.GoVersion); err != nil {
		return s, err
	}
	if s.client, err = queryrpc.NewClient(s.nc, queryrpc.ClientConfig{Owners: cfg.Owners, NodeTimeout: cfg.NodeTimeout, Registerer: reg}); err != nil {
		return s, err
	}
	if s.stopOwnersWatch, err = s.watchOwners(ctx); err != nil {
		return s, err
	}
	s.positions = newNodePositions(s.client)
	// Every hour bucket is read with the settings it was written with:
	// the history the storage nodes recorded (replicated on each).
	s.setStep("reading the event type settings from a storage node", "nodes", s.client.Nodes())
	ropts := cfg.Reader
	for attempt := 0; ; attempt++ {
		ropts.Types, err = catalog.LoadEventTypesFrom(ctx, s.client.Slice)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return s, err
		}
		if attempt == 0 {
			logger.Warn("no storage node answers yet; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return s, err
		case <-time.After(typesRetry):
		}
	}
	// Each slice is a round trip: where the nodes cannot run a count
	// query's walk (an older release), its hours go in parallel.
	ropts.ParallelHours = reader.RemoteParallelHours
	ropts.Logger = logger.With("component", "reader")
	ropts.Registerer = reg
	rd, err := reader.New(s.client, ropts)
	if err != nil {
		return s, fmt.Errorf("cannot create reader: %w", err)
	}
	var tl *reader.Timelines
	if cfg.Timelines {
		if tl, err = reader.NewTimelines(s.client, reader.TimelineOptions{TimelineTTL: cfg.TimelineTTL, TimelineCap: cfg.TimelineCap, FailTombstones: cfg.Reader.FailTombstones,
			Logger: logger.With("component", "reader"), Registerer: reg}); err != nil {
			return s, fmt.Errorf("cannot create the timeline reader: %w", err)
		}
	}
	js, err := jetstream.New(s.nc)
	if err != nil {
		return s, fmt.Errorf("cannot use JetStream: %w", err)
	}
	dl, err := httpapi.NewDeadLetters(js, cfg.DLQStream, reg)
	if err != nil {
		return s, err
	}
	s.health.Add("nats", func() error {
		if st := s.nc.Status(); st != nats.CONNECTED {
			return fmt.Errorf("NATS connection is %s", st)
		}
		return nil
	})
	s.health.Add("storage-nodes", func() error { return s.client.Health(context.Background()) })

	// The live tail: subscribe to the nodes' stored events first, then
	// start the Broadcaster at the newest position a node has applied,
	// so that a client resuming from before it is told of the gap.
	if s.relay, err = queryrpc.StartTailRelay(s.nc, 0, logger.With("component", "tail")); err != nil {
		return s, err
	}
	var startSeq uint64
	for _, f := range s.client.Freshness(ctx) {
		if f.Writer != nil {
			startSeq = max(startSeq, f.Writer.AppliedSeq)
		}
	}
	s.tail = tail.New(cfg.Tail, startSeq)
	s.relay.Feed(s.tail)

	h, err := httpapi.NewHandler(httpapi.Config{Reader: rd, Timelines: tl, DeadLetters: dl, Health: s.health, Registry: reg,
		Logger: logger.With("component", "http"), Token: cfg.HTTP.Token, CORSOrigins: cfg.HTTP.CORSOrigins, MaxQueryTimeout: cfg.HTTP.MaxQueryTimeout,
		Partial:           queryrpc.TrackMisses,
		Freshness:         s.freshness(func(f *queryrpc.NodeFreshness) *queryrpc.ConsumerPosition { return f.Writer }),
		TimelineFreshness: s.freshness(func(f *queryrpc.NodeFreshness) *queryrpc.ConsumerPosition { return f.Fanout }),
		Stats:             &remoteStats{client: s.client, owners: cfg.Owners, tail: s.tail},
		Tail:              s.tail,
	})
	if err != nil {
		return s, err
	}
	root.set(h)
	logger.Info("eventide query started", "http", s.httpLn.Addr().String(), "shards", cfg.Shards, "nodes", s.client.Nodes())
	return s, nil
}

// freshnessMaxAge is how old the nodes' positions a data answer reports
// may be. An older position is still true of the answer ("holds at least
// this much"), and asking every node on every request would add a round
// trip to each one (and, while a node hangs, a whole --node-timeout).
const freshnessMaxAge = 250 * time.Millisecond

// nodePositions caches the storage nodes' freshness answers. A request
// finding them older than freshnessMaxAge starts a refresh in the
// background and answers with the previous positions: no request waits
// for one but the very first, which has nothing to report yet. (Waiting
// for the refresh put a freshness round trip to every node, two more NATS
// messages each, into one request of every 250 ms.)
type nodePositions struct {
	fetch      func(context.Context) map[string]*queryrpc.NodeFreshness // the client's Freshness
	now        func() time.Time
	mu         sync.Mutex
	nodes      map[string]*queryrpc.NodeFreshness
	gen        uint64 // counts the replacements of nodes (never changed in place)
	at         time.Time
	refreshing bool
}

func newNodePositions(client *queryrpc.Client) *nodePositions {
	return &nodePositions{fetch: client.Freshness, now: time.Now}
}

func (p *nodePositions) get() map[string]*queryrpc.NodeFreshness {
	nodes, _ := p.getGen()
	return nodes
}

// getGen is get with the generation of the answer: the same generation,
// the same map.
func (p *nodePositions) getGen() (map[string]*queryrpc.NodeFreshness, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nodes != nil && p.now().Sub(p.at) <= freshnessMaxAge {
		return p.nodes, p.gen
	}
	if p.nodes != nil {
		if !p.refreshing {
			p.refreshing = true
			go p.refresh()
		}
		return p.nodes, p.gen
	}
	// Nothing yet: this request waits (and so do those arriving
	// meanwhile, behind the lock), once.
	nodes := p.fetch(context.Background())
	p.nodes, p.at = nodes, p.now()
	p.gen++
	return nodes, p.gen
}

func (p *nodePositions) refresh() {
	nodes := p.fetch(context.Background())
	p.mu.Lock()
	p.nodes, p.at, p.refreshing = nodes, p.now(), false
	p.gen++
	p.mu.Unlock()
}

// freshness reports, per shard, the position of one consumer (picked by
// which) of the shard's owner; shards whose owner did not answer the last
// refresh are left out.
// The list is built once per refresh of the positions and shared by the
// requests until the next: every data response asks for it.
func (s *server) freshness(which func(*queryrpc.NodeFreshness) *queryrpc.ConsumerPosition) httpapi.FreshnessSource {
	type built struct {
		gen    uint64
		shards []httpapi.ShardFreshness
	}
	var last atomic.Pointer[built]
	return httpapi.FreshnessFunc(func() []httpapi.ShardFreshness {
		nodes, gen := s.positions.getGen()
		if b := last.Load(); b != nil && b.gen == gen {
			return b.shards
		}
		var out []httpapi.ShardFreshness
		for shard, owner := range s.cfg.Owners {
			f := nodes[owner]
			if f == nil {
				continue
			}
			if p := which(f); p != nil {
				out = append(out, httpapi.ShardFreshness{Shard: shard, AppliedSeq: p.AppliedSeq, AppliedTime: p.AppliedTime,
					Pending: p.Pending, PendingKnown: p.PendingKnown})
			}
		}
		last.Store(&built{gen: gen, shards: out})
		return out
	})
}

func (s *server) fail(err error) {
	select {
	case s.failed <- err:
	default:
	}
}

// shutdown stops what start started, in order.
func (s *server) shutdown() error {
	s.health.Drain()
	var errs []error
	if s.relay != nil {
		if err := s.relay.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	// Live tail streams end with a shutdown event rather than hold the
	// HTTP drain until its timeout.
	if s.tail != nil {
		s.tail.Close()
	}
	if s.httpSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		defer cancel()
		if err := s.httpSrv.Shutdown(ctx); err != nil {
			s.logger.Warn("shutdown: HTTP requests still running at the timeout; closing them", "err", err)
			s.httpSrv.Close()
		}
	} else if s.httpLn != nil {
		s.httpLn.Close()
	}
	if s.stopOwnersWatch != nil {
		s.stopOwnersWatch()
	}
	if s.nc != nil {
		s.nc.Close()
	}
	if s.debug != nil {
		s.debug.close()
	}
	s.logger.Info("shutdown complete")
	return errors.Join(errs...)
}

// switchHandler serves the handler last set.
type switchHandler struct{ h atomic.Pointer[http.Handler] }

func (sw *switchHandler) set(h http.Handler) { sw.h.Store(&h) }

func (sw *switchHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*sw.h.Load()).ServeHTTP(w, r)
}
