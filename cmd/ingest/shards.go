package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventide/eventide/internal/queryrpc"
	"github.com/eventide/eventide/storage"
	"github.com/eventide/eventide/writer"
)

// shardWriters runs one writer per shard this node owns, on a stream
// sharded by JetStream's partitioning (writer.Config.Shards): each is its
// own durable consumer, filtered to its shard's subjects, with its own
// checkpoint. Shards start and stop while the node runs when ownership
// moves (ownership.go); stop returns only once the shard's writer has
// finished its in-flight batch and will apply nothing more, which is what
// makes a hand-over safe.
type shardWriters struct {
	nc     *nats.Conn
	db     *storage.DB
	base   writer.Config // Consumer is the base name, "<consumer>-s<shard>" each
	reg    prometheus.Registerer
	logger *slog.Logger
	// onFail is called when a shard's writer stops on its own.
	onFail func(error)

	// restoreDir, when set, is where a shard's writer looks for a
	// snapshot of its shard to import before it starts
	// (shardsnapshot.go).
	restoreDir string
	// imports counts the imports by result (nil: not counted).
	imports *prometheus.CounterVec

	// transition serialises starting, stopping and pausing shards, so a
	// shard paused for a snapshot cannot be started again after ownership
	// stopped it meanwhile.
	transition sync.Mutex

	mu      sync.Mutex
	running map[int]*shardWriter
	// importing holds the shards whose snapshot is being imported.
	importing map[int]bool
	// observe, for tests, is told after a shard's writer started
	// (running) or stopped.
	observe func(shard int, running bool)
}

func (sw *shardWriters) setObserver(f func(shard int, running bool)) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.observe = f
}

func (sw *shardWriters) notify(s int, running bool) {
	sw.mu.Lock()
	f := sw.observe
	sw.mu.Unlock()
	if f != nil {
		f(s, running)
	}
}

type shardWriter struct {
	w      *writer.Writer
	cancel context.CancelFunc
	done   chan struct{}
	// caughtUp latches once the writer was first within one fetch of the
	// end of its shard (rebuild.go).
	caughtUp atomic.Bool
}

func newShardWriters(nc *nats.Conn, db *storage.DB, base writer.Config, reg prometheus.Registerer, logger *slog.Logger, onFail func(error)) *shardWriters {
	return &shardWriters{nc: nc, db: db, base: base, reg: reg, logger: logger, onFail: onFail, running: map[int]*shardWriter{}, importing: map[int]bool{}}
}

// shardConsumer names the durable consumer (and so the checkpoint) of
// shard s.
func shardConsumer(base string, s int) string { return base + "-s" + strconv.Itoa(s) }

// start starts the writer of shard s, if it is not running. It replays
// the shard from the stream from the shard's checkpoint in this node's
// store (from the stream's first message in an empty store), after
// importing a snapshot of the shard when there is one to import.
func (sw *shardWriters) start(ctx context.Context, s int) error {
	sw.transition.Lock()
	defer sw.transition.Unlock()
	return sw.startLocked(ctx, s, true)
}

func (sw *shardWriters) startLocked(ctx context.Context, s int, importSnapshot bool) error {
	sw.mu.Lock()
	_, ok := sw.running[s]
	sw.mu.Unlock()
	if ok {
		return nil
	}
	cfg := sw.base
	cfg.Shard = s
	cfg.Consumer = shardConsumer(sw.base.Consumer, s)
	if sw.restoreDir != "" && importSnapshot {
		sw.mu.Lock()
		sw.importing[s] = true
		sw.mu.Unlock()
		result, err := importShardSnapshot(sw.db, sw.restoreDir, s, cfg.Shards, cfg.Stream, eventSubjectPrefix(cfg), cfg.Consumer, sw.logger)
		if sw.imports != nil {
			sw.imports.WithLabelValues(result).Inc()
		}
		sw.mu.Lock()
		delete(sw.importing, s)
		sw.mu.Unlock()
		if err != nil {
			sw.logger.Error("cannot import the snapshot of the shard; replaying it from the stream instead", "shard", s, "err", err)
		}
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	cfg.NoDeadLetters = false // each shard's writer dead-letters its own rejects
	shards, prefix := cfg.Shards, eventSubjectPrefix(cfg)
	// Every mutation of the shard's writer is of its shard; the filter
	// guards that routing and storage keep agreeing.
	cfg.StoresPartition = func(table string, p []byte) bool {
		return !queryrpc.IsSharded(table) || queryrpc.ShardOf(table, p, shards, prefix) == s
	}
	cfg.Logger = sw.logger.With("shard", s)
	if sw.reg != nil {
		cfg.Registerer = replacingRegisterer{prometheus.WrapRegistererWith(prometheus.Labels{"shard": strconv.Itoa(s)}, sw.reg)}
	}
	w, err := writer.New(ctx, sw.nc, sw.db, cfg)
	if err != nil {
		return fmt.Errorf("cannot start the writer of shard %d: %w", s, err)
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &shardWriter{w: w, cancel: cancel, done: make(chan struct{})}
	sw.running[s] = r
	go func() {
		defer close(r.done)
		err := w.Run(wctx)
		if wctx.Err() == nil {
			sw.onFail(fmt.Errorf("writer of shard %d stopped: %w", s, errOrUnexpected(err)))
		} else if err != nil {
			sw.logger.Error("writer stopped with an error", "shard", s, "err", err)
		}
	}()
	sw.logger.Info("shard writer started", "shard", s, "consumer", cfg.Consumer, "checkpoint", w.Stats().LastAppliedSeq)
	if f := sw.observe; f != nil {
		f(s, true) // under mu: a stop cannot overtake it
	}
	return nil
}

// stop stops the writer of shard s and waits until it has stored and
// acked its in-flight batch: after stop returns, this node applies
// nothing more of s.
func (sw *shardWriters) stop(s int) {
	sw.transition.Lock()
	defer sw.transition.Unlock()
	sw.stopLocked(s)
}

// paused runs f with the writer of shard s stopped, if it runs, and
// starts it again after: f sees the shard's data and checkpoint still.
func (sw *shardWriters) paused(s int, f func() error) error {
	sw.transition.Lock()
	defer sw.transition.Unlock()
	sw.mu.Lock()
	r, running := sw.running[s]
	sw.mu.Unlock()
	if !running {
		return f()
	}
	sw.stopLocked(s)
	// Ready latches caughtUp only when asked: ask as it would, once the
	// writer has stopped. Stop waits for the batch being stored, whose
	// commit records the pending count after its data is readable; asked
	// before, a shard whose first batch was still committing counted as
	// not caught up and restarted as rebuilding.
	caughtUp := r.caughtUp.Load() || shardBehind(s, r.w.Stats(), sw.fetchBatch()) == nil
	err := f()
	// Its context is the node's: the writer runs until stop.
	if serr := sw.startLocked(context.Background(), s, false); serr != nil {
		return errors.Join(err, serr)
	}
	// A pause does not make a caught-up shard rebuild: /readyz stays as
	// it was.
	sw.mu.Lock()
	if r := sw.running[s]; r != nil && caughtUp {
		r.caughtUp.Store(true)
	}
	sw.mu.Unlock()
	return err
}

func (sw *shardWriters) stopLocked(s int) {
	sw.mu.Lock()
	r, ok := sw.running[s]
	delete(sw.running, s)
	sw.mu.Unlock()
	if !ok {
		return
	}
	r.cancel()
	<-r.done
	sw.logger.Info("shard writer stopped", "shard", s)
	sw.notify(s, false)
}

// stopAll stops every shard's writer.
func (sw *shardWriters) stopAll() {
	for _, s := range sw.owned() {
		sw.stop(s)
	}
}

// owned lists the shards whose writers run, sorted.
func (sw *shardWriters) owned() []int {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	out := make([]int, 0, len(sw.running))
	for s := range sw.running {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func (sw *shardWriters) writers() map[int]*writer.Writer {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	out := make(map[int]*writer.Writer, len(sw.running))
	for s, r := range sw.running {
		out[s] = r.w
	}
	return out
}

// Health joins the health of every shard's writer.
func (sw *shardWriters) Health() error {
	var errs []error
	for s, w := range sw.writers() {
		if err := w.Health(); err != nil {
			errs = append(errs, fmt.Errorf("shard %d: %w", s, err))
		}
	}
	return errors.Join(errs...)
}

// Stats sums the shards' writers: the counters and the pending messages;
// the applied position is the least advanced shard's (what every shard
// reflects at least).
func (sw *shardWriters) Stats() writer.Stats {
	var out writer.Stats
	first := true
	for _, w := range sw.writers() {
		st := w.Stats()
		out.Ingested += st.Ingested
		out.Rejected += st.Rejected
		out.Skipped += st.Skipped
		out.Pending += st.Pending
		if first || st.LastAppliedSeq < out.LastAppliedSeq {
			out.LastAppliedSeq = st.LastAppliedSeq
		}
		if first || st.LastAppliedTime.Before(out.LastAppliedTime) {
			out.LastAppliedTime = st.LastAppliedTime
		}
		out.PendingKnown = (first || out.PendingKnown) && st.PendingKnown
		first = false
	}
	return out
}

// replacingRegisterer registers a collector in place of an earlier one
// with the same descriptors: a shard's writer registers its metrics
// again when the shard comes back to this node.
type replacingRegisterer struct{ prometheus.Registerer }

func (r replacingRegisterer) Register(c prometheus.Collector) error {
	err := r.Registerer.Register(c)
	if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
		r.Registerer.Unregister(c) // by its descriptors, which are the existing one's
		return r.Registerer.Register(c)
	}
	return err
}

func (r replacingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// eventSubjectPrefix is the prefix of the stream's one "<prefix>>"
// subject (what the sharded stream hashes), or the default.
func eventSubjectPrefix(cfg writer.Config) string {
	if len(cfg.Subjects) == 1 && len(cfg.Subjects[0]) > 0 && cfg.Subjects[0][len(cfg.Subjects[0])-1] == '>' {
		return cfg.Subjects[0][:len(cfg.Subjects[0])-1]
	}
	return writer.DefaultSubject[:len(writer.DefaultSubject)-1]
}
