package writer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
	"github.com/eventide/eventide/writer/consumer"
)

// ErrCheckpointAhead is returned by New when the stored checkpoint is past
// the stream's last sequence: the stream was deleted and recreated, and its
// sequence numbers no longer mean what the checkpoint says.
var ErrCheckpointAhead = consumer.ErrCheckpointAhead

// ErrAckedNotStored is wrapped by Health's error when messages were
// acknowledged to JetStream but are not in storage, and the stream no
// longer holds them to redeliver.
var ErrAckedNotStored = consumer.ErrAckedNotStored

// rejectLogInterval is the least time between two info lines about
// rejections.
const rejectLogInterval = 10 * time.Second

// Writer consumes the event stream into storage. Create it with New, then
// call Run.
type Writer struct {
	cfg       Config
	nc        *nats.Conn
	js        jetstream.JetStream
	db        *storage.DB
	log       *slog.Logger
	warn      *consumer.RateLimitedLogger
	rejectLog *consumer.RateLimitedLogger
	m         *metrics
	validator *validator
	c         *consumer.Consumer

	ingested, rejected atomic.Uint64
	// storedBuf is Config.OnStored's argument, reused (Stored runs on one
	// goroutine).
	storedBuf []StoredEvent
	// storedPerType is Stored's count of a batch's events by type, reused
	// (cleared after each batch) for the same reason.
	storedPerType map[string]int
	// rows builds the events' rows; only batches' Write uses it, and one
	// runs at a time.
	rows catalog.EventRowBuilder
}

// Stats are running totals since New.
type Stats struct {
	Ingested uint64 // events stored
	Rejected uint64 // messages dead-lettered
	Skipped  uint64 // redelivered messages acked without being applied again
	// LastAppliedSeq is the checkpoint: the stream sequence up to which
	// every message has been stored or dead-lettered.
	LastAppliedSeq uint64
	// LastAppliedTime, Pending and PendingKnown: what the stored data
	// reflects, as in consumer.Stats.
	LastAppliedTime time.Time
	Pending         uint64
	PendingKnown    bool
}

// New prepares a writer: it creates the built-in tables, the event and
// dead-letter streams and the durable consumer if they are missing (and
// updates them to cfg if they exist), and reads the checkpoint. It fails
// with ErrCheckpointAhead if the checkpoint is past the end of the stream,
// unless cfg.ResetCheckpoint is set.
func New(ctx context.Context, nc *nats.Conn, db *storage.DB, cfg Config) (*Writer, error) {
	if nc == nil || db == nil {
		return nil, errors.New("writer: New needs a NATS connection and a storage DB")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(dlqPublishTimeout))
	if err != nil {
		return nil, fmt.Errorf("writer: cannot use JetStream: %w", err)
	}
	w := &Writer{
		cfg:       cfg,
		nc:        nc,
		js:        js,
		db:        db,
		log:       cfg.Logger,
		warn:      consumer.NewRateLimitedLogger(cfg.Logger, 10*time.Second),
		rejectLog: consumer.NewRateLimitedLogger(cfg.Logger, rejectLogInterval),
		m:         newMetrics(),
		validator: newValidator(cfg),
	}
	// Errors here already say what failed; the caller adds that the
	// writer could not start.
	if err := catalog.EnsureBuiltinTables(db); err != nil {
		return nil, err
	}
	if err := catalog.CheckEventTypes(db, cfg.Types); err != nil {
		return nil, err
	}
	if err := w.ensureStreams(ctx); err != nil {
		return nil, err
	}
	var filter []string
	if cfg.sharded() {
		prefix, _ := cfg.shardPrefix() // checked by withDefaults
		filter = []string{ShardSubject(prefix, cfg.Shard)}
	}
	w.c, err = consumer.New(ctx, nc, db, consumer.Config{
		Stream:          cfg.Stream,
		FilterSubjects:  filter,
		Durable:         cfg.Consumer,
		Description:     "eventide writer: validates events and stores them",
		FetchBatch:      cfg.FetchBatch,
		FetchMaxBytes:   cfg.FetchMaxBytes,
		FetchWait:       cfg.FetchWait,
		FetchLinger:     cfg.FetchLinger,
		AckWait:         cfg.ackWait,
		ResetCheckpoint: cfg.ResetCheckpoint,
		NoConsumerReset: cfg.noConsumerReset,
		Logger:          cfg.Logger,
		Metrics:         w.m.consumer,
	}, w)
	if err != nil {
		return nil, err
	}
	if cfg.Registerer != nil {
		if err := w.m.register(cfg.Registerer); err != nil {
			return nil, fmt.Errorf("cannot register the writer's metrics: %w", err)
		}
	}
	return w, nil
}

// Run fetches, validates and stores batches until ctx is cancelled; then it
// finishes the batches in hand (stores and acks them) and returns nil. It
// rides out NATS disconnections and storage errors, retrying, and returns
// an error only when it cannot go on: the NATS connection is closed for
// good, or a bug. The loop is package consumer's; the writer is its
// Handler (batch.go).
func (w *Writer) Run(ctx context.Context) error {
	if err := w.c.Run(ctx); err != nil {
		return fmt.Errorf("writer: %w", err)
	}
	return nil
}

// Ready reports whether Health reports nothing wrong.
func (w *Writer) Ready() bool { return w.Health() == nil }

// Health returns nil when the writer is running, connected to NATS, not
// shutting down, not retrying a failed storage Apply, and has found no
// messages acknowledged to JetStream but missing from storage; otherwise an
// error saying which. The last (wrapping ErrAckedNotStored, naming the
// sequence range) lasts until the process restarts: an operator has to
// look at it.
func (w *Writer) Health() error {
	if err := w.c.Health(); err != nil {
		return fmt.Errorf("writer: %w", err)
	}
	return nil
}

// Stats returns running totals.
func (w *Writer) Stats() Stats {
	cs := w.c.Stats()
	return Stats{
		Ingested:       w.ingested.Load(),
		Rejected:       w.rejected.Load(),
		Skipped:        cs.Skipped,
		LastAppliedSeq: cs.LastAppliedSeq,

		LastAppliedTime: cs.LastAppliedTime,
		Pending:         cs.Pending,
		PendingKnown:    cs.PendingKnown,
	}
}
