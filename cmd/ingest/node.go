package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/cmd/internal/httpapi"
	"github.com/eventide/eventide/fanout"
	"github.com/eventide/eventide/internal/natsconn"
	"github.com/eventide/eventide/internal/natsembed"
	"github.com/eventide/eventide/internal/queryrpc"
	"github.com/eventide/eventide/internal/tail"
	"github.com/eventide/eventide/reader"
	"github.com/eventide/eventide/storage"
	"github.com/eventide/eventide/writer"
)

// node is one running ingest process: what start built, for shutdown to
// take down in dependency order. Fields are nil for parts not started.
type node struct {
	cfg    *config
	logger *slog.Logger
	health *httpapi.Health

	dataLock *dataDirLock

	httpLn, adminLn   net.Listener
	httpSrv, adminSrv *http.Server

	db          *storage.DB
	storageOpen atomic.Bool
	ns          *natsserver.Server // nil with --nats-url
	nc          *nats.Conn

	writerCancel context.CancelFunc
	writerDone   chan struct{} // closed when Writer.Run returned

	shards *shardWriters // with --shards above 1, instead of the one writer
	// snapshotsCancel stops the periodic shard snapshots
	// (--snapshot-interval); snapshotsDone is closed when they stopped.
	snapshotsCancel context.CancelFunc
	snapshotsDone   chan struct{}
	ownership       *ownership // who owns which shard: static or the KV bucket

	fanoutCancel context.CancelFunc
	fanoutDone   chan struct{} // closed when fanout.Worker.Run returned
	fanout       *fanout.Worker
	// tail is the live tail the writer feeds; closed at shutdown, after
	// the writer stops and before the HTTP server, so streams end with a
	// reason instead of holding the server's shutdown.
	tail *tail.Broadcaster

	rpc *queryrpc.Server // the storage read service

	// step is what start is doing, for /readyz while starting.
	step atomic.Pointer[string]
	// failed receives the first failure of a running part.
	failed chan error
}

// setStep logs a start-up step and shows it on /readyz.
func (n *node) setStep(step string, attrs ...any) {
	n.step.Store(&step)
	n.logger.Info(step, attrs...)
}

// start builds and starts every part. On error it stops what it started.
func start(ctx context.Context, cfg *config, build buildInfo, logger *slog.Logger) (n *node, err error) {
	n = &node{cfg: cfg, logger: logger, health: httpapi.NewHealth(), failed: make(chan error, 1)}
	defer func() {
		if err != nil {
			if serr := n.shutdown(); serr != nil {
				err = errors.Join(err, serr)
			}
			n = nil
		}
	}()

	// The data directory's lock before anything else: a second process on
	// the same --data must stop before it opens the NATS store or storage
	// (and before its listeners, whose errors would hide the real cause).
	if n.dataLock, err = lockDataDir(cfg.DataDir); err != nil {
		return n, err
	}

	// Listeners next: a port in use fails before anything heavier. Until
	// the API is wired, HTTP answers /livez and says "starting" elsewhere.
	if n.httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return n, fmt.Errorf("cannot listen for HTTP (--http): %w", err)
	}
	n.setStep("starting")
	var root switchHandler
	root.set(httpapi.StartingHandler(func() string { return *n.step.Load() }))
	n.httpSrv = newHTTPServer(&root, logger)
	n.serve("HTTP", n.httpSrv, n.httpLn)
	if cfg.AdminAddr != "" {
		if n.adminLn, err = net.Listen("tcp", cfg.AdminAddr); err != nil {
			return n, fmt.Errorf("cannot listen for admin (--admin): %w", err)
		}
		if cfg.MutexProfileFraction > 0 {
			runtime.SetMutexProfileFraction(cfg.MutexProfileFraction)
		}
	}

	storageDir := filepath.Join(cfg.DataDir, "storage")
	// Before the NATS pipeline, ingest kept the store in --data itself.
	for _, name := range []string{"MANIFEST", "LOCK"} {
		if _, err := os.Stat(filepath.Join(cfg.DataDir, name)); err == nil {
			return n, fmt.Errorf("%s holds a store in the old layout (its files directly in the data directory): move them into %s", cfg.DataDir, storageDir)
		}
	}
	// NATS before storage: the embedded server's port is checked at once,
	// while opening storage may replay a long WAL.
	if err := n.connectNATS(ctx); err != nil {
		return n, err
	}

	reg := httpapi.NewRegistry()
	if err := httpapi.RegisterBuildInfo(reg, build.Version, build.Revision, build.GoVersion); err != nil {
		return n, err
	}
	if err := registerNATSMetrics(reg, n.nc); err != nil {
		return n, err
	}
	if err := registerOpsMetrics(reg, n.health, cfg.DataDir); err != nil {
		return n, err
	}
	if n.ns != nil {
		if err := reg.Register(natsembed.NewStoreCollector(filepath.Join(cfg.DataDir, "nats"))); err != nil {
			return n, fmt.Errorf("cannot register the NATS store metric: %w", err)
		}
	}
	restored := false
	if sc := cfg.Shard; sc.RestoreFrom != "" {
		n.setStep("restoring storage from a snapshot", "snapshot", sc.RestoreFrom, "dir", storageDir)
		if restored, err = restoreSnapshot(sc.RestoreFrom, storageDir, logger); err != nil {
			return n, err
		}
	}
	n.setStep("opening storage", "dir", storageDir)
	opts := storage.DefaultOptions()
	opts.Logger = logger.With("component", "storage")
	opts.Registerer = reg
	opts.WALSyncMode = cfg.WALSync
	opts.CompactionThroughput = int64(cfg.CompactionThroughputMiB) << 20
	opts.CompactionNice = cfg.CompactionNice
	if n.db, err = storage.Open(storageDir, opts); err != nil {
		return n, fmt.Errorf("cannot open storage: %w", err) // storage names the directory
	}
	n.storageOpen.Store(true)
	if err := catalog.EnsureBuiltinTables(n.db); err != nil {
		return n, err
	}
	if sc := cfg.Shard; restored && sc.RestoreNode != sc.NodeID {
		// The snapshot's data is as far as its node's checkpoints say:
		// this node's consumers resume there (restore.go).
		fromFanout := ""
		if cfg.Fanout.Enabled {
			fromFanout = fanout.DefaultConsumer + "-" + sc.RestoreNode
		}
		if err := adoptCheckpoints(n.db, sc.Shards, writer.DefaultConsumer+"-"+sc.RestoreNode, cfg.Writer.Consumer,
			fromFanout, cfg.Fanout.Consumer, logger); err != nil {
			return n, err
		}
	}
	// The writer and the reader share one settings history, so every hour
	// is read with the sub-partitions and TTL it was written with.
	skew := cfg.Writer.MaxSkew
	if skew <= 0 {
		skew = writer.DefaultMaxSkew
	}
	types, changed, err := catalog.RecordEventTypes(n.db, cfg.Writer.Types, time.Now(), skew)
	if err != nil {
		return n, err
	}
	if changed && types.Previous != nil {
		logger.Info("event type settings changed; they apply from the hour bucket shown on, earlier hours keep the settings they were written with",
			"from", types.Since.Format(time.RFC3339), "settings", types.String(), "previous", types.Previous.String())
	}

	ropts := cfg.Reader
	ropts.Types = types
	ropts.Logger = logger.With("component", "reader")
	ropts.Registerer = reg
	rd, err := reader.New(n.db, ropts)
	if err != nil {
		return n, fmt.Errorf("cannot create reader: %w", err)
	}

	wcfg := cfg.Writer
	// The live tail is made once the writer has read its checkpoint, and
	// before it runs, the only time it calls OnStored.
	var publish func([]writer.StoredEvent)
	wcfg.OnStored = func(evs []writer.StoredEvent) { publish(evs) }
	wcfg.Types = types
	wcfg.Logger = logger.With("component", "writer")
	wcfg.Registerer = reg
	// w is what /readyz, freshness and the read service ask about the
	// writing: the one writer, or every shard's writer of this node.
	var w writerView
	if sc := cfg.Shard; sc.Shards > 1 {
		// The stream is sharded by JetStream's partitioning: one writer,
		// consumer and checkpoint per owned shard.
		wcfg.Shards = sc.Shards
		n.setStep("starting the shard writers", "stream", wcfg.Stream, "shards", sc.Shards, "own", sc.ownSpec)
		// The streams first: a node may own no shard yet, and its fan-out
		// worker reads the stream all the same.
		if err := writer.EnsureStreams(ctx, n.nc, wcfg); err != nil {
			return n, fmt.Errorf("cannot start writer: %w", err)
		}
		// Shards apply in their own order, so the tail sees stream
		// sequences out of order: live events are complete, a resume
		// (Last-Event-ID) is not exact on a node of several shards
		// (docs/http-api.md says so).
		n.tail = tail.New(cfg.Tail, 0)
		publish = n.tailPublish(logger)
		n.shards = newShardWriters(n.nc, n.db, wcfg, reg, logger.With("component", "writer"), n.fail)
		if n.shards.restoreDir = sc.RestoreShardsFrom; n.shards.restoreDir != "" {
			if n.shards.imports, err = newSnapshotImports(reg); err != nil {
				return n, err
			}
		}
		if err := reg.Register(newRebuildCollector(n.shards)); err != nil {
			return n, fmt.Errorf("cannot register the shard rebuild metrics: %w", err)
		}
		if err := n.startOwnership(ctx); err != nil {
			return n, err
		}
		if sc.SnapshotInterval > 0 {
			n.startSnapshots(sc.SnapshotInterval)
		}
		w = n.shards
	} else {
		n.setStep("starting the writer", "stream", wcfg.Stream, "consumer", wcfg.Consumer)
		one, err := writer.New(ctx, n.nc, n.db, wcfg)
		if err != nil {
			return n, fmt.Errorf("cannot start writer: %w", err)
		}
		// It starts where storage stands: a client resuming from before
		// this position is told its events are not held for replay.
		n.tail = tail.New(cfg.Tail, one.Stats().LastAppliedSeq)
		publish = n.tailPublish(logger)
		// The writer stops when shutdown cancels it, not at the signal: by
		// then /readyz has turned 503.
		wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		n.writerCancel, n.writerDone = cancel, make(chan struct{})
		go func() {
			defer close(n.writerDone)
			err := one.Run(wctx)
			if wctx.Err() == nil {
				n.fail(fmt.Errorf("writer stopped: %w", errOrUnexpected(err)))
			} else if err != nil {
				logger.Error("writer stopped with an error", "err", err)
			}
		}()
		w = one
	}

	if cfg.Fanout.Enabled {
		if err := n.startFanout(ctx, wcfg, reg, fanout.WriterBacklog(w)); err != nil {
			return n, err
		}
	}

	n.health.Add("nats", func() error {
		if s := n.nc.Status(); s != nats.CONNECTED {
			return fmt.Errorf("NATS connection is %s", s)
		}
		return nil
	})
	n.health.Add("storage", func() error {
		_, err := n.storageHealth()
		return err
	})
	n.health.AddLiveness("storage", func() error {
		if permanent, err := n.storageHealth(); permanent {
			return fmt.Errorf("storage failed and cannot recover without a restart: %w", err)
		}
		return nil
	})
	if ns := n.ns; ns != nil {
		// A stream of the embedded server that hit a write error (its
		// store shares --data's disk, so a full disk does it) refuses
		// every message until the process restarts, even after space is
		// back: only a restart recovers, so it fails liveness too.
		n.health.Add("nats-store", func() error { return natsembed.StreamsHealth(ns) })
		n.health.AddLiveness("nats-store", func() error { return natsembed.StreamsHealth(ns) })
	}
	// The writer's Health names what stops it: not running, no NATS
	// connection, a failing storage batch, or acknowledged messages that
	// storage lost and the stream no longer holds.
	n.health.Add("writer", w.Health)
	if n.shards != nil {
		// Ready only once every owned shard has caught up with the
		// stream: a node rebuilding from an empty store is not.
		n.health.Add("shards", n.shards.Ready)
	}
	if n.fanout != nil {
		// Running, connected, storing (its chunks retry on their own).
		n.health.Add("fanout", n.fanout.Health)
	}

	js, err := jetstream.New(n.nc)
	if err != nil {
		return n, fmt.Errorf("cannot use JetStream: %w", err)
	}
	dl, err := httpapi.NewDeadLetters(js, wcfg.DLQStream, reg)
	if err != nil {
		return n, err
	}
	var tl *reader.Timelines
	if cfg.Fanout.Enabled {
		// Reads bounded by the fan-out's own timeline TTL.
		if tl, err = reader.NewTimelines(n.db, reader.TimelineOptions{
			TimelineTTL:    cfg.Fanout.Options.TimelineTTL,
			TimelineCap:    cfg.Fanout.Options.TimelineCap,
			FailTombstones: cfg.Reader.FailTombstones,
			Logger:         logger.With("component", "reader"),
			Registerer:     reg,
		}); err != nil {
			return n, fmt.Errorf("cannot create the timeline reader: %w", err)
		}
	}
	// This node is one shard, shard 0: the writer's consumer is what
	// events and counts reflect, the fan-out's what timelines reflect.
	hcfg := httpapi.Config{Reader: rd, Timelines: tl, DeadLetters: dl, Health: n.health, Registry: reg, Logger: logger.With("component", "http"),
		Token: cfg.HTTP.Token, CORSOrigins: cfg.HTTP.CORSOrigins, MaxQueryTimeout: cfg.HTTP.MaxQueryTimeout, Tail: n.tail,
		Freshness: httpapi.FreshnessFunc(func() []httpapi.ShardFreshness {
			st := w.Stats()
			return []httpapi.ShardFreshness{{AppliedSeq: st.LastAppliedSeq, AppliedTime: st.LastAppliedTime, Pending: st.Pending, PendingKnown: st.PendingKnown}}
		})}
	if fw := n.fanout; fw != nil {
		hcfg.TimelineFreshness = httpapi.FreshnessFunc(func() []httpapi.ShardFreshness {
			st := fw.Stats()
			return []httpapi.ShardFreshness{{AppliedSeq: st.LastAppliedSeq, AppliedTime: st.LastAppliedTime, Pending: st.Pending, PendingKnown: st.PendingKnown}}
		})
	}
	hcfg.Stats = httpapi.StatsFunc(func(context.Context) (httpapi.Stats, error) {
		st := httpapi.Stats{Storage: httpapi.StorageStatsOf(n.db.Metrics()), Tail: httpapi.TailStatsOf(n.tail.Stats())}
		for _, src := range []struct {
			name string
			f    httpapi.FreshnessSource
		}{{"writer", hcfg.Freshness}, {"fanout", hcfg.TimelineFreshness}} {
			if src.f != nil {
				for _, sh := range src.f.Freshness() {
					st.Consumers = append(st.Consumers, httpapi.ConsumerStatsOf(src.name, sh))
				}
			}
		}
		return st, nil
	})
	h, err := httpapi.NewHandler(hcfg)
	if err != nil {
		return n, err
	}
	root.set(h)
	if err := n.serveReads(w, build.Version); err != nil {
		return n, err
	}
	if n.adminLn != nil {
		mux := adminHandler()
		if n.cfg.Shard.SnapshotDir != "" {
			mux.HandleFunc("/admin/shards/{shard}/snapshot", n.shardSnapshotHandler)
		}
		n.adminSrv = newHTTPServer(mux, logger)
		n.serve("admin", n.adminSrv, n.adminLn)
	}
	logger.Info("eventide started", "http", n.httpLn.Addr().String(), "nats", n.natsURL())
	return n, nil
}

// writerView is what the node asks of its writing: *writer.Writer, or
// *shardWriters for every shard it owns.
type writerView interface {
	Health() error
	Stats() writer.Stats
}

// startFanout starts the fan-out worker: its own durable consumer on the
// writer's stream (which writer.New created), writing timelines to n.db,
// checked by /readyz after the writer. shutdown stops it right after the
// writer. Its chunk workers yield to the writer while writerBusy reports
// a backlog (fanout.Options.WriterBusy).
func (n *node) startFanout(ctx context.Context, wcfg writer.Config, reg prometheus.Registerer, writerBusy func() bool) error {
	fc := n.cfg.Fanout
	opts := fc.Options
	opts.WriterBusy = writerBusy
	opts.Logger = n.logger.With("component", "fanout")
	opts.Registerer = reg
	f, err := fanout.Open(n.db, opts)
	if err != nil {
		return fmt.Errorf("cannot open the fan-out: %w", err)
	}
	n.setStep("starting the fan-out worker", "stream", wcfg.Stream, "consumer", fc.Consumer)
	w, err := fanout.NewWorker(ctx, n.nc, n.db, f, fanout.WorkerConfig{
		Writer:          wcfg,
		Consumer:        fc.Consumer,
		FetchBatch:      wcfg.FetchBatch,
		FetchWait:       wcfg.FetchWait,
		FetchLinger:     wcfg.FetchLinger,
		FetchMaxBytes:   wcfg.FetchMaxBytes,
		ResetCheckpoint: wcfg.ResetCheckpoint,
		Logger:          opts.Logger,
		Registerer:      reg,
	})
	if err != nil {
		return fmt.Errorf("cannot start the fan-out worker: %w", err)
	}
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.fanoutCancel, n.fanoutDone = cancel, make(chan struct{})
	go func() {
		defer close(n.fanoutDone)
		err := w.Run(fctx)
		if fctx.Err() == nil {
			n.fail(fmt.Errorf("fan-out worker stopped: %w", errOrUnexpected(err)))
		} else if err != nil {
			n.logger.Error("fan-out worker stopped with an error", "err", err)
		}
	}()
	n.fanout = w
	return nil
}

// serveReads registers the node's storage read service, which cmd/query
// calls: slices of this node's store, the writer's and fan-out's
// positions, and readiness.
func (n *node) serveReads(w writerView, version string) error {
	position := func(st writer.Stats) queryrpc.ConsumerPosition {
		return queryrpc.ConsumerPosition{AppliedSeq: st.LastAppliedSeq, AppliedTime: st.LastAppliedTime, Pending: st.Pending, PendingKnown: st.PendingKnown}
	}
	scfg := queryrpc.ServerConfig{
		Node: n.cfg.Shard.NodeID, Store: n.db, Metrics: n.db.Metrics, Shards: n.cfg.Shard.Shards, Owned: n.cfg.Shard.Own,
		Writer: func() queryrpc.ConsumerPosition { return position(w.Stats()) },
		Ready: func() error {
			if ready, results := n.health.Check(); !ready {
				var errs []error
				for _, r := range results {
					if !r.OK {
						errs = append(errs, fmt.Errorf("%s: %s", r.Name, r.Detail))
					}
				}
				return errors.Join(errs...)
			}
			return nil
		},
		Version: version,
		Logger:  n.logger.With("component", "storage-service"),
	}
	if sw := n.shards; sw != nil {
		scfg.OwnedNow = sw.owned
	}
	if fw := n.fanout; fw != nil {
		scfg.Fanout = func() queryrpc.ConsumerPosition {
			st := fw.Stats()
			return queryrpc.ConsumerPosition{AppliedSeq: st.LastAppliedSeq, AppliedTime: st.LastAppliedTime, Pending: st.Pending, PendingKnown: st.PendingKnown}
		}
	}
	srv, err := queryrpc.Serve(n.nc, scfg)
	if err != nil {
		return err
	}
	n.rpc = srv
	n.logger.Info("storage read service registered", "node", scfg.Node, "subjects", queryrpc.DefaultSubjectPrefix+"."+scfg.Node+".>",
		"shards", n.cfg.Shard.Shards, "own", n.cfg.Shard.ownSpec)
	return nil
}

// storageHealth says whether storage can take work (err nil) and, when it
// cannot, whether only a restart can fix it (permanent): /readyz shows
// err, /livez fails when permanent. A store closed by shutdown is not
// ready but not a reason for an orchestrator to restart the process.
func (n *node) storageHealth() (permanent bool, err error) {
	if !n.storageOpen.Load() {
		return false, errors.New("storage is closed")
	}
	h := n.db.Health()
	if errors.Is(h.Err, storage.ErrClosed) {
		// Closed by shutdown between the check above and here.
		return false, errors.New("storage is closed")
	}
	if h.Err != nil {
		return h.Permanent, fmt.Errorf("storage: %w", h.Err)
	}
	return false, nil
}

func errOrUnexpected(err error) error {
	if err == nil {
		return errors.New("Run returned before it was cancelled")
	}
	return err
}

// connectNATS starts the embedded server (unless --nats-url) and connects;
// to --nats-url, with the authentication and TLS of natsconn's flags.
func (n *node) connectNATS(ctx context.Context) error {
	cfg, logger := n.cfg, n.logger
	opts := []nats.Option{
		nats.Name("eventide-ingest"),
		nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if nc.IsClosed() {
				return // our own Close at shutdown
			}
			logger.Warn("NATS disconnected", "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			logger.Info("NATS reconnected", "url", nc.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			logger.Error("NATS error", "subject", subject, "err", err)
		}),
	}
	if cfg.NATSURL != "" {
		n.setStep("connecting to NATS", "url", natsconn.Redact(cfg.NATSURL))
		nc, err := natsconn.Connect(ctx, cfg.NATS, opts...)
		if err != nil {
			return fmt.Errorf("%w (--nats-url)", err) // natsconn names the URL, redacted
		}
		n.nc = nc
		return nil
	}
	storeDir := filepath.Join(cfg.DataDir, "nats")
	n.setStep("starting embedded NATS", "listen", cfg.NATSListen, "store", storeDir)
	ns, err := natsembed.Start(natsembed.Config{Listen: cfg.NATSListen, StoreDir: storeDir, Logger: logger})
	if err != nil {
		return fmt.Errorf("%w (--nats-listen)", err)
	}
	n.ns = ns
	// In-process: the writer's traffic skips TCP.
	nc, err := nats.Connect("", append(opts, nats.InProcessServer(ns))...)
	if err != nil {
		return fmt.Errorf("cannot connect to the embedded NATS server: %w", err)
	}
	n.nc = nc
	return nil
}

func (n *node) natsURL() string {
	if n.ns != nil {
		return n.ns.ClientURL()
	}
	return natsconn.Redact(n.cfg.NATSURL)
}

func newHTTPServer(h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.With("component", "http").Handler(), slog.LevelWarn),
		// With serve's HoldingListener: a large answer leaves in one
		// write, as cmd/query's do (httpapi's sendonce.go).
		ConnContext: httpapi.ConnContext,
	}
}

func (n *node) serve(name string, srv *http.Server, ln net.Listener) {
	go func() {
		if err := srv.Serve(httpapi.HoldingListener(ln)); !errors.Is(err, http.ErrServerClosed) {
			n.fail(fmt.Errorf("%s server stopped: %w", name, err))
		}
	}()
}

// switchHandler serves the handler last set.
type switchHandler struct{ h atomic.Pointer[http.Handler] }

func (s *switchHandler) set(h http.Handler) { s.h.Store(&h) }

func (s *switchHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}

// adminHandler serves pprof, and only on the admin listener; start adds
// the shard snapshot route to it with --snapshot-dir.
func adminHandler() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

func (n *node) fail(err error) {
	select {
	case n.failed <- err:
	default: // the first failure is already shutting the process down
	}
}

// shutdown stops every running part, in order, logging each step.
func (n *node) shutdown() error {
	var errs []error
	log := n.logger
	n.health.Drain()
	log.Info("shutdown: /readyz now answers 503")

	if n.snapshotsCancel != nil {
		n.snapshotsCancel()
		<-n.snapshotsDone
	}
	if n.ownership != nil {
		n.ownership.stop()
	}
	if n.shards != nil {
		log.Info("shutdown: stopping the shard writers (finishing their in-flight batches)")
		n.shards.stopAll()
		log.Info("shutdown: shard writers stopped")
	}
	if n.writerCancel != nil {
		log.Info("shutdown: stopping the writer (finishing its in-flight batch)")
		n.writerCancel()
		<-n.writerDone
		log.Info("shutdown: writer stopped")
	}
	if n.fanoutCancel != nil {
		log.Info("shutdown: stopping the fan-out worker (finishing its in-flight batch and chunks)")
		n.fanoutCancel()
		<-n.fanoutDone
		log.Info("shutdown: fan-out worker stopped")
	}

	if n.tail != nil {
		n.tail.Close()
		log.Info("shutdown: live tail streams ended")
	}
	if n.rpc != nil {
		// Before storage closes: cmd/query then sees the node as gone
		// (its shards missing) rather than failing reads.
		if err := n.rpc.Stop(); err != nil {
			log.Warn("shutdown: cannot stop the storage read service", "err", err)
		}
		log.Info("shutdown: storage read service stopped")
	}

	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ShutdownTimeout)
	defer cancel()
	for _, s := range []struct {
		name string
		srv  *http.Server
		ln   net.Listener
	}{{"HTTP", n.httpSrv, n.httpLn}, {"admin", n.adminSrv, n.adminLn}} {
		switch {
		case s.srv != nil:
			log.Info("shutdown: stopping "+s.name+" server", "timeout", n.cfg.ShutdownTimeout.String())
			if err := s.srv.Shutdown(ctx); err != nil {
				log.Warn("shutdown: "+s.name+" requests still running at the timeout; closing them", "err", err)
				s.srv.Close()
			}
		case s.ln != nil:
			s.ln.Close() // listening, not yet serving
		}
	}

	if n.nc != nil {
		// Push out the writer's last acks before closing.
		if err := n.nc.FlushTimeout(n.cfg.ShutdownTimeout); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			log.Warn("shutdown: cannot flush the NATS connection", "err", err)
		}
		n.nc.Close()
		log.Info("shutdown: NATS connection closed")
	}

	if n.db != nil {
		log.Info("shutdown: flushing storage")
		if err := n.db.Flush(); err != nil {
			errs = append(errs, fmt.Errorf("cannot flush storage: %w", err))
		}
		n.storageOpen.Store(false)
		if err := n.db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("cannot close storage: %w", err))
		}
		log.Info("shutdown: storage closed")
	}

	if n.ns != nil {
		log.Info("shutdown: stopping embedded NATS")
		natsembed.Stop(n.ns)
	}
	if n.dataLock != nil {
		if err := n.dataLock.unlock(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		log.Error("shutdown finished with errors", "err", err)
		return err
	}
	log.Info("shutdown complete")
	return nil
}

// printBanner tells a person at a terminal where everything is, in one
// write (whoever reads the output sees all of it or none).
func printBanner(w io.Writer, n *node) {
	var b strings.Builder
	httpURL := "http://" + n.httpLn.Addr().String()
	natsLine := n.natsURL() + "  (embedded, JetStream store in " + filepath.Join(n.cfg.DataDir, "nats") + ")"
	if n.ns == nil {
		natsLine = n.natsURL() + "  (external)"
	}
	server := "" // the nats CLI's default is nats://127.0.0.1:4222
	if u := n.natsURL(); u != "nats://127.0.0.1:4222" {
		server = "--server " + u + " "
	}
	curlAuth := ""
	if n.cfg.HTTP.Token != "" {
		// The banner never prints the token itself.
		curlAuth = "-H 'Authorization: Bearer <token>' "
	}
	fmt.Fprintf(&b, `
Eventide is running. Ctrl-C stops it cleanly.
  NATS   %s
  HTTP   %s  (/v1/events, /v1/events/{id}, /v1/events/stream, /v1/counts, /v1/types/top,
         /v1/slice, /v1/stats, /v1/dlq, /v1/timeline/{user}, /v1/users/{user}/followers,
         /v1/users/{user}/following, /readyz, /livez, /metrics, /openapi.yaml)
`, natsLine, httpURL)
	if n.adminLn != nil {
		fmt.Fprintf(&b, "  admin  http://%s/debug/pprof/\n", n.adminLn.Addr())
	}
	fmt.Fprintf(&b, `  data   %s

Publish an event (nats CLI, through JetStream; the subject names the type):
  nats pub --jetstream %sevents.click "{\"time\":\"$(date -u +%%Y-%%m-%%dT%%H:%%M:%%SZ)\",\"data\":{\"button\":\"buy\"}}"
Read it back:
  curl %s'%s/v1/events?type=click'
Or open the dashboard in a browser:
  %s/

`, n.cfg.DataDir, server, curlAuth, httpURL, httpURL)
	io.WriteString(w, b.String())
}

// tailPublish feeds the node's live tail and publishes the same events
// for cmd/query's relay (queryrpc.TailPublisher, on
// eventide.tail.<node-id>): the events this node stored, once durable.
// With the embedded NATS server, whose subscriptions the node can see,
// they are published only while something subscribes
// (queryrpc.ListenedTailPublisher): an all-in-one with no cmd/query
// attached does not copy every event through NATS for nobody.
// Both reuse buffers from call to call, and a node of several shards has a
// writer per shard calling OnStored from its own goroutine: the calls are
// serialised.
func (n *node) tailPublish(logger *slog.Logger) func([]writer.StoredEvent) {
	tailLogger := logger.With("component", "tail")
	remote := queryrpc.TailPublisher(n.nc, n.cfg.Shard.NodeID, tailLogger)
	if n.ns != nil {
		remote = queryrpc.ListenedTailPublisher(n.nc, n.cfg.Shard.NodeID, tailLogger, natsembed.Interest(n.ns))
	}
	local := n.tail.WriterHook()
	var mu sync.Mutex
	return func(evs []writer.StoredEvent) {
		mu.Lock()
		defer mu.Unlock()
		local(evs)
		remote(evs)
	}
}
