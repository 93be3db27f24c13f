package fanout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventide/eventide/storage"
	"github.com/eventide/eventide/writer"
	"github.com/eventide/eventide/writer/consumer"
)

// DefaultConsumer is the durable consumer name of the fan-out worker.
const DefaultConsumer = "eventide-fanout"

// SkipRejectedPrefix starts the skip reason of a message the writer
// rejects (it dead-letters it; the fan-out skips it): the rest is the
// writer's rejection reason, e.g. "rejected_malformed_json".
const SkipRejectedPrefix = "rejected_"

// WorkerConfig configures a Worker.
type WorkerConfig struct {
	// Writer is the writer's configuration: the stream, its subjects and
	// the event rules (types, payload size, skew) are the writer's, so the
	// worker parses every message into the event the writer stores, with
	// the same id.
	Writer writer.Config
	// Consumer is the worker's durable consumer name, default
	// DefaultConsumer. It must differ from the writer's.
	Consumer string
	// FetchBatch, FetchWait, FetchLinger, FetchMaxBytes: as in consumer.Config
	// (defaults there).
	FetchBatch    int
	FetchWait     time.Duration
	FetchLinger   time.Duration
	FetchMaxBytes int
	// ResetCheckpoint: as in consumer.Config.
	ResetCheckpoint bool
	Logger          *slog.Logger          // nil = slog.Default()
	Registerer      prometheus.Registerer // the consumer's metrics (eventide_fanout_ beside the worker's own, as the writer's are eventide_writer_); nil = none
}

// Worker feeds a Fanout from the event stream through its own durable
// JetStream consumer (package writer/consumer: effects applied exactly
// once per stream message, with the consumer's checkpoint in the same
// storage batch) and runs its chunk workers. Create it with NewWorker,
// then call Run.
type Worker struct {
	f      *Fanout
	c      *consumer.Consumer
	parser *writer.Parser
	log    *slog.Logger
	warn   *consumer.RateLimitedLogger
}

// NewWorker creates (or updates) the worker's durable consumer on the
// writer's stream, which must exist (writer.New creates it), filtered to
// the subjects of f's event types when the stream's subjects allow it,
// and reads the worker's checkpoint.
func NewWorker(ctx context.Context, nc *nats.Conn, db *storage.DB, f *Fanout, cfg WorkerConfig) (*Worker, error) {
	if nc == nil || db == nil || f == nil {
		return nil, errors.New("fan-out: NewWorker needs a NATS connection, a storage DB and a Fanout")
	}
	if cfg.Consumer == "" {
		cfg.Consumer = DefaultConsumer
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	wcfg := cfg.Writer
	if cfg.Consumer == wcfg.Consumer || (wcfg.Consumer == "" && cfg.Consumer == writer.DefaultConsumer) {
		return nil, fmt.Errorf("fan-out: consumer name %q is the writer's; the fan-out needs its own", cfg.Consumer)
	}
	parser, err := writer.NewParser(wcfg)
	if err != nil {
		return nil, fmt.Errorf("fan-out: %w", err)
	}
	w := &Worker{f: f, parser: parser, log: cfg.Logger, warn: consumer.NewRateLimitedLogger(cfg.Logger, 10*time.Second)}
	// JetStream refuses overlapping filters: each type once.
	types := append([]string{f.opts.FollowType, f.opts.UnfollowType, f.opts.DeleteType}, f.opts.PostTypes...)
	slices.Sort(types)
	types = slices.Compact(types)
	filter := parser.TypeSubjects(types)
	if filter == nil {
		cfg.Logger.Info("fan-out: the stream's subjects do not name event types; the fan-out consumer reads every message")
	}
	m := consumer.NewMetrics("eventide_fanout")
	w.c, err = consumer.New(ctx, nc, db, consumer.Config{
		Stream:          parser.Stream(),
		Durable:         cfg.Consumer,
		Description:     "eventide fan-out: follow graph and timelines",
		FilterSubjects:  filter,
		FetchBatch:      cfg.FetchBatch,
		FetchMaxBytes:   cfg.FetchMaxBytes,
		FetchWait:       cfg.FetchWait,
		FetchLinger:     cfg.FetchLinger,
		ResetCheckpoint: cfg.ResetCheckpoint,
		Logger:          cfg.Logger,
		Metrics:         m,
	}, w)
	if err != nil {
		return nil, fmt.Errorf("fan-out: %w", err)
	}
	if cfg.Registerer != nil {
		for _, c := range m.Collectors() {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("fan-out: cannot register consumer metrics: %w", err)
			}
		}
	}
	return w, nil
}

// Run consumes the stream and works fan-out chunks until ctx is
// cancelled; then it finishes the batch in hand and the chunks in flight
// and returns nil. It returns an error only when the consumer cannot go
// on (see consumer.Consumer.Run); the chunk workers are stopped then too.
func (w *Worker) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var runErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		runErr = w.f.Run(ctx)
	}()
	err := w.c.Run(ctx)
	cancel()
	wg.Wait()
	if err != nil {
		return fmt.Errorf("fan-out: %w", err)
	}
	if runErr != nil {
		return fmt.Errorf("fan-out: %w", runErr)
	}
	return nil
}

// Health returns nil while the consumer runs and is healthy
// (consumer.Consumer.Health: running, connected, storing); otherwise what
// is wrong.
func (w *Worker) Health() error {
	if err := w.c.Health(); err != nil {
		return fmt.Errorf("fan-out: %w", err)
	}
	return nil
}

// LastAppliedSeq is the worker's checkpoint: the stream sequence up to
// which every message's effects are stored (fan-out chunks may still be
// pending).
func (w *Worker) LastAppliedSeq() uint64 { return w.c.Stats().LastAppliedSeq }

// Stats are the worker's consumer's: its checkpoint, the stream time of
// the message there, and its lag in messages. The timelines and follow
// graph reflect them (fan-out chunks may still be pending).
func (w *Worker) Stats() consumer.Stats { return w.c.Stats() }

// workerBatch is one fetch, parsed.
type workerBatch struct {
	w        *Worker
	msgs     []Message
	rejected map[string]int
	p        Prepared
}

// Prepare parses deliveries with the writer's rules (consumer.Handler).
// The fan-out's reads of the store wait for Write: they must see the
// batch before this one applied. The time checks use the message's
// stream time, not the clock, so a redelivery parses the same way.
func (w *Worker) Prepare(ds []consumer.Delivery, epoch uint64) consumer.Batch {
	wb := &workerBatch{w: w, msgs: make([]Message, 0, len(ds))}
	for _, d := range ds {
		ev, reason, msg := w.parser.Parse(d.Msg.Subject(), d.Msg.Data(), epoch, d.Seq, d.Time)
		if reason != "" {
			if wb.rejected == nil {
				wb.rejected = map[string]int{}
			}
			wb.rejected[SkipRejectedPrefix+reason]++
			w.warn.Log(slog.LevelInfo, "fan-out: skipping a message the writer rejects (dead-lettered by the writer)",
				"seq", d.Seq, "subject", d.Msg.Subject(), "reason", reason, "error", msg)
			continue
		}
		wb.msgs = append(wb.msgs, Message{Pos: Position{Epoch: epoch, Seq: d.Seq}, Event: ev})
	}
	return wb
}

// Write adds the batch's fan-out effects to b, retrying a failed read of
// the store until it succeeds or ctx ends.
func (wb *workerBatch) Write(ctx context.Context, b *storage.Batch) error {
	w := wb.w
	for attempt := 0; ; attempt++ {
		b.Reset()
		p, err := w.f.Prepare(ctx, b, wb.msgs)
		if err == nil {
			wb.p = p
			break
		}
		b.Reset()
		w.warn.Warn("fan-out: cannot prepare a batch; retrying", "attempt", attempt+1, "err", err)
		if !consumer.Backoff(ctx, attempt) {
			return err
		}
	}
	if len(wb.rejected) > 0 {
		if wb.p.Skipped == nil {
			wb.p.Skipped = map[string]int{}
		}
		for r, n := range wb.rejected {
			wb.p.Skipped[r] += n
		}
	}
	return nil
}

// Stored counts the batch's skips and wakes the chunk workers.
func (wb *workerBatch) Stored() { wb.w.f.Committed(wb.p) }

// WriterBacklog returns an Options.WriterBusy for the writer w (a
// *writer.Writer, or anything reporting writer.Stats, such as a node's
// shard writers together): busy while its consumer saw messages pending
// behind the batch it last stored (writer.Stats.Pending, at most one
// batch stale). A writer keeping up with its producers has none, and the
// fan-out then takes the engine's spare capacity at full speed.
func WriterBacklog(w interface{ Stats() writer.Stats }) func() bool {
	return func() bool {
		s := w.Stats()
		return s.PendingKnown && s.Pending > 0
	}
}
