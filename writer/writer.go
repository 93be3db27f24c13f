package writer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/storage"
)

// ErrCheckpointAhead is returned by New when the stored checkpoint is past
// the stream's last sequence: the stream was deleted and recreated, and its
// sequence numbers no longer mean what the checkpoint says.
var ErrCheckpointAhead = errors.New("writer: checkpoint is past the end of the stream")

// ErrAckedNotStored is wrapped by Health's error when messages were
// acknowledged to JetStream but are not in storage, and the stream no
// longer holds them to redeliver (see checkAckFloor).
var ErrAckedNotStored = errors.New("writer: messages acknowledged to JetStream are not in storage and no longer in the stream")

// idleCheckInterval is how often an idle writer asks the server about its
// consumer: for the lag gauge, and to catch deliveries that never arrived.
const idleCheckInterval = 2 * time.Second

// Writer consumes the event stream into storage. Create it with New, then
// call Run.
type Writer struct {
	cfg       Config
	nc        *nats.Conn
	js        jetstream.JetStream
	cons      jetstream.Consumer
	db        *storage.DB
	log       *slog.Logger
	warn      *rateLimitedLog
	m         *metrics
	validator *validator
	// consumerResetSupported: the server can reset a consumer to a
	// sequence (2.14 and later); otherwise it is recreated.
	consumerResetSupported bool
	// ackWait is the consumer's AckWait (the const ackWait; tests shorten
	// it).
	ackWait time.Duration

	// State of the Run goroutine.
	ckpt checkpoint
	// nextDeliverySeq is the consumer sequence the next delivery must
	// carry. Every delivery of the consumer, to anyone, takes the next
	// one, so a jump means deliveries this writer never saw.
	nextDeliverySeq uint64
	lastIdleCheck   time.Time

	// storeBatch is the storage batch of the batch being committed; one
	// commit runs at a time.
	storeBatch storage.Batch

	// lost is the range of messages acked but not stored that the stream
	// no longer holds; zero when none.
	lostMu sync.Mutex
	lost   ackedUnstored

	running, draining, storageFailing      atomic.Bool
	ingested, rejected, skipped, lastSeqAt atomic.Uint64
}

// Stats are running totals since New.
type Stats struct {
	Ingested uint64 // events stored
	Rejected uint64 // messages dead-lettered
	Skipped  uint64 // redelivered messages acked without being applied again
	// LastAppliedSeq is the checkpoint: the stream sequence up to which
	// every message has been stored or dead-lettered.
	LastAppliedSeq uint64
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
		cfg:                    cfg,
		nc:                     nc,
		js:                     js,
		db:                     db,
		log:                    cfg.Logger,
		warn:                   &rateLimitedLog{logger: cfg.Logger, every: 10 * time.Second},
		m:                      newMetrics(),
		validator:              newValidator(cfg),
		consumerResetSupported: serverAtLeast(nc.ConnectedServerVersion(), 2, 14),
		ackWait:                ackWait,
	}
	if !w.consumerResetSupported && cfg.Retention != "" && cfg.Retention != "limits" {
		// Without a consumer reset the writer recreates its consumer, and
		// deleting the only consumer of an interest or work-queue stream
		// deletes the messages it has not acked yet.
		return nil, fmt.Errorf("writer: %s retention needs NATS server 2.14 or later (consumer reset); the server is %s",
			cfg.Retention, nc.ConnectedServerVersion())
	}
	if err := schema.EnsureBuiltinTables(db); err != nil {
		return nil, fmt.Errorf("writer: %w", err)
	}
	ckpt, err := readCheckpoint(db, cfg.Consumer)
	if err != nil {
		return nil, fmt.Errorf("writer: %w", err)
	}
	state, err := w.ensureStreams(ctx)
	if err != nil {
		return nil, fmt.Errorf("writer: %w", err)
	}
	switch {
	case ckpt.seq > state.LastSeq && !cfg.ResetCheckpoint:
		return nil, fmt.Errorf("%w: consumer %s has stored everything up to sequence %d, but stream %s ends at sequence %d. "+
			"The stream was most likely deleted and recreated, so its sequence numbers start again at 1 and would be "+
			"mistaken for messages already stored. Nothing has been skipped. To store the new stream from its start, "+
			"restart once with ResetCheckpoint set (events already stored are kept)",
			ErrCheckpointAhead, cfg.Consumer, ckpt.seq, cfg.Stream, state.LastSeq)
	case ckpt.seq > state.LastSeq:
		old := ckpt
		if ckpt, err = startNewEpoch(db, cfg.Consumer, ckpt); err != nil {
			return nil, fmt.Errorf("writer: %w", err)
		}
		w.log.Warn("writer: checkpoint was past the end of the stream; starting over from the stream's first message",
			"consumer", cfg.Consumer, "stream", cfg.Stream, "old_checkpoint", old.seq, "stream_last_seq", state.LastSeq,
			"epoch", ckpt.epoch)
	case cfg.ResetCheckpoint:
		w.log.Info("writer: ResetCheckpoint has no effect: the checkpoint is within the stream",
			"checkpoint", ckpt.seq, "stream_last_seq", state.LastSeq)
	}
	if state.Msgs > 0 && state.FirstSeq > ckpt.seq+1 {
		w.log.Warn("writer: messages after the checkpoint are no longer in the stream (max age, limits or purge) and cannot be stored",
			"stream", cfg.Stream, "first_missing_seq", ckpt.seq+1, "stream_first_seq", state.FirstSeq)
	}
	w.ckpt = ckpt
	if err := w.ensureConsumer(ctx); err != nil {
		return nil, fmt.Errorf("writer: %w", err)
	}
	if cfg.Registerer != nil {
		if err := w.m.register(cfg.Registerer); err != nil {
			return nil, fmt.Errorf("writer: %w", err)
		}
	}
	w.lastSeqAt.Store(ckpt.seq)
	w.m.lastApplied.Set(float64(ckpt.seq))
	return w, nil
}

// Run fetches, validates and stores batches until ctx is cancelled; then it
// finishes the batches in hand (stores and acks them) and returns nil. It
// rides out NATS disconnections and storage errors, retrying, and returns
// an error only when it cannot go on: the NATS connection is closed for
// good, or a bug.
//
// Batches go through two stages: Run's goroutine fetches and validates
// batch N+1 while another goroutine stores and acks batch N. At most one
// batch is being stored at a time, and batches are stored in fetch order,
// each with the checkpoint its predecessor left; a storage stall therefore
// stops the fetching after one batch. Before the consumer is repositioned
// after the checkpoint, or asked about deliveries this writer does not
// hold, the batch being stored is waited for, so the checkpoint is final.
func (w *Writer) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return errors.New("writer: Run is already running")
	}
	defer w.running.Store(false)
	w.draining.Store(false)
	w.log.Info("writer: running", "stream", w.cfg.Stream, "consumer", w.cfg.Consumer,
		"checkpoint", w.ckpt.seq, "epoch", w.ckpt.epoch)

	var committing chan error // the batch being stored reports here; nil when none is
	// waitCommit waits for the batch being stored, if any.
	waitCommit := func() error {
		if committing == nil {
			return nil
		}
		err := <-committing
		committing = nil
		return err
	}
	// queued is what the checkpoint will be once the batch being stored is.
	queued := w.ckpt.seq

	needReset := true // whatever was delivered before this Run is unknown
	attempt := 0
	for {
		if ctx.Err() != nil {
			w.draining.Store(true)
			if err := waitCommit(); err != nil && !errors.Is(err, errAbandoned) {
				return err
			}
			if err := w.nc.FlushTimeout(time.Second); err != nil && w.nc.IsConnected() {
				w.log.Warn("writer: cannot flush the last acks; their messages will be redelivered and skipped", "err", err)
			}
			w.log.Info("writer: stopped", "checkpoint", w.ckpt.seq)
			return nil
		}
		if w.nc.IsClosed() {
			_ = waitCommit()
			return errors.New("writer: the NATS connection is closed")
		}
		if needReset {
			if err := waitCommit(); err != nil {
				if errors.Is(err, errAbandoned) {
					continue // only when ctx is done: the loop's top returns
				}
				return err
			}
			queued = w.ckpt.seq
			if err := w.repositionConsumer(ctx); err != nil {
				if ctx.Err() == nil {
					w.warn.log("writer: cannot reposition the consumer after the checkpoint; retrying", "err", err)
					sleepBackoff(ctx, attempt)
					attempt++
				}
				continue
			}
			needReset = false
		}

		msgs, fetchErr := w.fetch(ctx)
		if len(msgs) > 0 {
			ds, complete := w.deliveries(msgs)
			if !complete {
				// Applying past a delivery we never saw would let the
				// checkpoint cover a message that was not stored.
				needReset = true
				w.warn.log("writer: the consumer delivered messages this writer did not receive (lost on the wire, or is "+
					"another client pulling from it?); repositioning after the checkpoint", "consumer", w.cfg.Consumer)
			}
			if len(ds) > 0 {
				pb := w.prepare(ds, queued)
				// While it waits behind a long storage stall, pb must not be
				// redelivered either.
				stopKeepAlive := w.keepAlive(pb.ds)
				err := waitCommit()
				stopKeepAlive()
				if err != nil {
					if errors.Is(err, errAbandoned) {
						// Only when ctx is done. pb is dropped unacked:
						// its checkpoint would cover the abandoned batch.
						w.log.Info("writer: stopping with batches not stored; JetStream will redeliver them", "err", err)
						continue
					}
					return err
				}
				queued = pb.handled
				committing = make(chan error, 1)
				go func(done chan<- error) { done <- w.commit(ctx, pb) }(committing)
			}
		}
		switch {
		case fetchErr == nil, ctx.Err() != nil:
			attempt = 0
		case errors.Is(fetchErr, context.DeadlineExceeded):
			// The fetch outlived its wait: normal while NATS is away.
			if !w.nc.IsConnected() {
				w.warn.log("writer: NATS is not connected; waiting", "status", w.nc.Status().String())
			}
		default:
			needReset = true
			w.warn.log("writer: cannot fetch from the consumer; retrying", "err", fetchErr)
			sleepBackoff(ctx, attempt)
			attempt++
		}
		if len(msgs) == 0 && fetchErr == nil && !needReset {
			if committing != nil {
				// Idle, with a batch being stored: it has had FetchWait to
				// finish. The server is asked about deliveries this writer
				// does not hold only on a later idle round, once its acks
				// have arrived.
				if err := waitCommit(); err != nil && !errors.Is(err, errAbandoned) {
					return err
				}
			} else {
				needReset = w.idleCheck(ctx)
			}
		}
	}
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
	w.lostMu.Lock()
	lost := w.lost
	w.lostMu.Unlock()
	switch {
	case lost.last != 0:
		return fmt.Errorf("%w: stream %s sequences %s (consumer %s); see the error log", ErrAckedNotStored, w.cfg.Stream, lost, w.cfg.Consumer)
	case !w.running.Load():
		return errors.New("writer is not running")
	case w.draining.Load():
		return errors.New("writer is stopping")
	case w.storageFailing.Load():
		return errors.New("writer cannot apply batches to storage; retrying")
	case !w.nc.IsConnected():
		return fmt.Errorf("writer has no NATS connection (%s)", w.nc.Status())
	}
	return nil
}

// Stats returns running totals.
func (w *Writer) Stats() Stats {
	return Stats{
		Ingested:       w.ingested.Load(),
		Rejected:       w.rejected.Load(),
		Skipped:        w.skipped.Load(),
		LastAppliedSeq: w.lastSeqAt.Load(),
	}
}

// fetch returns the next messages to process: whatever the consumer has
// ready, up to FetchBatch messages and FetchMaxBytes bytes, without
// waiting; when nothing is ready, it waits up to FetchWait for the first
// message and then takes whatever else is ready within the bounds. A batch
// is therefore what arrived while the previous one was being stored: large
// under load (few fsyncs), small when traffic is light (low latency), never
// held back to fill up.
//
// The byte bound is the server's (a pull request's max_bytes), so a burst
// of large messages is never pushed at the client faster than it stores
// them (the server cuts off a slow consumer). A message larger than the
// bound ends a bounded pull without being delivered (409 Message Size
// Exceeds MaxBytes); the wait for a first message is therefore unbounded
// in bytes (one message is at most the server's max_payload), so a large
// message at the head of the stream is fetched alone instead of wedging
// the writer.
func (w *Writer) fetch(ctx context.Context) ([]jetstream.Msg, error) {
	msgs, err := w.fetchReady(nil, w.cfg.FetchBatch, w.cfg.FetchMaxBytes)
	if len(msgs) > 0 || err != nil {
		return msgs, err
	}
	fctx, cancel := context.WithTimeout(ctx, w.cfg.FetchWait)
	defer cancel()
	first, err := w.cons.Fetch(1, jetstream.FetchContext(fctx))
	if err != nil {
		return nil, err
	}
	if msgs, err = collect(first, msgs); len(msgs) == 0 || err != nil {
		return msgs, err
	}
	if left := w.cfg.FetchMaxBytes - msgSize(msgs[0]); left > 0 && w.cfg.FetchBatch > 1 {
		// An error here is reported by the next fetch; the one in hand is
		// processed.
		msgs, _ = w.fetchReady(msgs, w.cfg.FetchBatch-1, left)
	}
	return msgs, nil
}

// readyPullExpiry is how long a pull for what is ready stays open. A pull
// bounded in bytes cannot be a no-wait pull with this client, so it is one
// that expires almost at once: the server delivers what it has and then
// ends the pull.
const readyPullExpiry = time.Millisecond

// msgSize is the size of m as the server counts it against a pull's
// max_bytes.
func msgSize(m jetstream.Msg) int {
	n := len(m.Subject()) + len(m.Reply()) + len(m.Data())
	if h := m.Headers(); len(h) > 0 {
		n += headerSize(h)
	}
	return n
}

// fetchReady appends to msgs what the consumer has ready, up to n messages
// and maxBytes bytes.
func (w *Writer) fetchReady(msgs []jetstream.Msg, n, maxBytes int) ([]jetstream.Msg, error) {
	batch, err := w.cons.Fetch(n, jetstream.FetchMaxBytes(maxBytes), jetstream.FetchMaxWait(readyPullExpiry))
	if err != nil {
		return msgs, err
	}
	return collect(batch, msgs)
}

// collect appends the messages of a pull to msgs.
func collect(batch jetstream.MessageBatch, msgs []jetstream.Msg) ([]jetstream.Msg, error) {
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	err := batch.Error()
	if errors.Is(err, jetstream.ErrNoMessages) {
		err = nil
	}
	return msgs, err
}

// delivery is a received message with its place in the stream.
type delivery struct {
	msg jetstream.Msg
	seq uint64 // stream sequence
}

// deliveries returns the leading messages whose consumer sequences follow
// on from the last delivery seen, and whether that was all of them.
func (w *Writer) deliveries(msgs []jetstream.Msg) ([]delivery, bool) {
	ds := make([]delivery, 0, len(msgs))
	var pending uint64
	for _, m := range msgs {
		md, err := m.Metadata()
		if err != nil || md.Sequence.Consumer != w.nextDeliverySeq {
			if err == nil {
				w.log.Debug("writer: delivery out of sequence", "want_consumer_seq", w.nextDeliverySeq,
					"consumer_seq", md.Sequence.Consumer, "stream_seq", md.Sequence.Stream, "delivered", md.NumDelivered)
			}
			return ds, false
		}
		w.nextDeliverySeq++
		pending = md.NumPending
		ds = append(ds, delivery{msg: m, seq: md.Sequence.Stream})
	}
	if len(ds) > 0 {
		w.m.pending.Set(float64(pending))
	}
	return ds, true
}

// idleCheck refreshes the lag gauge while idle, and reports whether the
// server thinks messages are delivered to this consumer and not acked.
// Holding none, the writer then lost them (or another client took them).
func (w *Writer) idleCheck(ctx context.Context) (needReset bool) {
	if time.Since(w.lastIdleCheck) < idleCheckInterval {
		return false
	}
	w.lastIdleCheck = time.Now()
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := w.cons.Info(ictx)
	if err != nil {
		return false
	}
	w.m.pending.Set(float64(info.NumPending))
	if info.NumAckPending > 0 {
		w.log.Info("writer: consumer has deliveries this writer does not hold; repositioning after the checkpoint",
			"ack_pending", info.NumAckPending)
		return true
	}
	return false
}

// sleepBackoff waits 100ms doubling per attempt up to 2s; false if ctx
// ended first.
func sleepBackoff(ctx context.Context, attempt int) bool {
	d := min(100*time.Millisecond<<min(attempt, 5), 2*time.Second)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// rateLimitedLog logs a warning at most once per interval and counts the
// ones it held back.
type rateLimitedLog struct {
	logger *slog.Logger
	every  time.Duration

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (r *rateLimitedLog) log(msg string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < r.every {
		r.suppressed++
		return
	}
	if r.suppressed > 0 {
		args = append(args, "suppressed_since_last", r.suppressed)
	}
	r.last, r.suppressed = now, 0
	r.logger.Warn(msg, args...)
}
