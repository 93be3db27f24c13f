package consumer

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

	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

// ErrCheckpointAhead is returned by New when the stored checkpoint is past
// the stream's last sequence: the stream was deleted and recreated, and its
// sequence numbers no longer mean what the checkpoint says.
var ErrCheckpointAhead = errors.New("checkpoint is past the end of the stream")

// ErrAckedNotStored is wrapped by Health's error when messages were
// acknowledged to JetStream but are not in storage, and the stream no
// longer holds them to redeliver.
var ErrAckedNotStored = errors.New("messages acknowledged to JetStream are not in storage and no longer in the stream")

// Defaults of Config.
const (
	DefaultFetchBatch = 1000
	DefaultFetchWait  = 100 * time.Millisecond
	DefaultFetchBytes = 16 << 20
	// DefaultFetchLinger is how long a fetch under load waits for its
	// batch to fill (Config.FetchLinger).
	DefaultFetchLinger = 5 * time.Millisecond
	// DefaultAckWait is how long JetStream waits for an ack before it
	// redelivers. Generous, because a batch can wait on a storage stall;
	// the loop also sends InProgress every AckWait/3 while a batch is not
	// yet applied.
	DefaultAckWait = 60 * time.Second
)

// idleCheckInterval is how often an idle consumer asks the server about
// itself: for the lag gauge, and to catch deliveries that never arrived.
const idleCheckInterval = 2 * time.Second

// Config configures a Consumer. The zero value of a field with a default
// means the default.
type Config struct {
	Stream      string // the stream, which must exist
	Durable     string // durable consumer name; also names the checkpoint
	Description string // of the durable consumer
	// FilterSubjects, when not empty, are the only subjects the consumer
	// is delivered (JetStream's FilterSubjects): a consumer that needs a
	// few event types skips the rest server-side. The stream sequences it
	// sees then have gaps, which the checkpoint covers like any other.
	FilterSubjects []string

	FetchBatch    int           // most messages per fetch (and per storage batch), default 1000
	FetchMaxBytes int           // most bytes per fetch (a larger message is fetched alone), default 16 MiB
	FetchWait     time.Duration // longest wait for a first message when none is ready, default 100ms
	// FetchLinger is how long a fetch waits for its batch to fill
	// (FetchBatch messages or FetchMaxBytes bytes) while messages keep
	// coming (the fetch before brought some): one pull request that ends
	// when the batch is full or the linger is over, whichever is first.
	// It trades up to this much latency for larger batches under load
	// (fewer pull requests, acks, storage batches and fsyncs per
	// message). When it brings nothing, the next fetch waits for a first
	// message as before (FetchWait). Default 5ms; negative: never wait
	// for a batch to fill.
	FetchLinger time.Duration
	AckWait     time.Duration // the consumer's AckWait, default 60s

	// ResetCheckpoint lets New start over from the beginning of the
	// stream when the stored checkpoint is past the stream's last
	// sequence (the stream was deleted and recreated). It has no effect
	// otherwise.
	ResetCheckpoint bool

	// NoConsumerReset makes the loop recreate the consumer where it would
	// reset it, as it must on NATS servers before 2.14 (New detects
	// those); it lets tests run that path on a newer server.
	NoConsumerReset bool

	Logger  *slog.Logger // nil = slog.Default()
	Metrics *Metrics     // nil = unregistered metrics named "eventide_consumer_*"
}

func (cfg Config) withDefaults() (Config, error) {
	if cfg.Stream == "" || cfg.Durable == "" {
		return cfg, errors.New("consumer config: Stream and Durable are required")
	}
	if cfg.FetchBatch <= 0 {
		cfg.FetchBatch = DefaultFetchBatch
	}
	if cfg.FetchMaxBytes <= 0 {
		cfg.FetchMaxBytes = DefaultFetchBytes
	}
	if cfg.FetchWait <= 0 {
		cfg.FetchWait = DefaultFetchWait
	}
	if cfg.FetchLinger == 0 {
		cfg.FetchLinger = DefaultFetchLinger
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = DefaultAckWait
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics("eventide_consumer")
	}
	return cfg, nil
}

// Handler turns fetched messages into storage mutations: the part of a
// consumer that knows what its messages mean.
type Handler interface {
	// Prepare is called on Run's goroutine, in stream order, with the
	// deliveries of one fetch that are above the checkpoint (never
	// empty), while the batch before may still be being stored. epoch is
	// the checkpoint epoch, for ids derived from stream sequences.
	Prepare(ds []Delivery, epoch uint64) Batch
}

// Batch is one prepared fetch.
type Batch interface {
	// Write does what must be durable before the batch is acked and
	// adds the batch's mutations to b, which the loop then applies with
	// the checkpoint. It is called once, on the committing goroutine. An
	// error leaves every delivery of the batch unacked; when ctx has
	// ended it means the batch was abandoned (Run returns nil), otherwise
	// Run returns the error.
	Write(ctx context.Context, b *storage.Batch) error
	// Stored is called once the batch is applied and its deliveries acked.
	Stored()
}

// Consumer is the loop. Create it with New, then call Run.
type Consumer struct {
	cfg     Config
	nc      *nats.Conn
	js      jetstream.JetStream
	cons    jetstream.Consumer
	pull    *puller
	db      *storage.DB
	h       Handler
	log     *slog.Logger
	warn    *RateLimitedLogger
	m       *Metrics
	resetOK bool // the server can reset a consumer to a sequence (2.14 and later)
	// ackAll: the durable consumer acks cumulatively (AckAll) and a
	// stored batch is acked with one ack, of its highest delivery; else
	// every delivery is acked (AckExplicit). See ackPolicy.
	ackAll bool

	// State of the Run goroutine.
	ckpt Checkpoint
	// nextDeliverySeq is the consumer sequence the next delivery must
	// carry. Every delivery of the consumer, to anyone, takes the next
	// one, so a jump means deliveries this consumer never saw.
	nextDeliverySeq uint64
	lastIdleCheck   time.Time
	// loaded: the last fetch brought messages, so the next one lingers
	// for a full batch (Config.FetchLinger).
	loaded bool

	// storeBatch is the storage batch of the batch being committed; one
	// commit runs at a time.
	storeBatch storage.Batch

	// lost is the range of messages acked but not stored that the stream
	// no longer holds; zero when none.
	lostMu sync.Mutex
	lost   ackedUnstored

	running, draining, storageFailing atomic.Bool
	skipped, lastSeqAt                atomic.Uint64
	// appliedTimeNanos is the stream time (unix ns) of the message at
	// lastSeqAt; 0 when unknown.
	appliedTimeNanos atomic.Int64
	// pending is the consumer's NumPending as last counted (the last
	// stored batch's last delivery, or an idle check); pendingKnown says
	// whether it has been counted since New.
	pending      atomic.Uint64
	pendingKnown atomic.Bool
}

// Stats are running totals since New.
type Stats struct {
	Skipped uint64 // redelivered messages acked without reaching the Handler again
	// LastAppliedSeq is the checkpoint: the stream sequence up to which
	// every message has been stored.
	LastAppliedSeq uint64
	// LastAppliedTime is when the stream stored the message at
	// LastAppliedSeq: what the stored data reflects, in the stream's
	// clock. Zero when unknown (nothing applied yet, or after New the
	// stream no longer holds the checkpoint's message).
	LastAppliedTime time.Time
	// Pending is how many messages of the consumer's subjects follow the
	// ones it holds, as JetStream counted them at the last fetch whose
	// batch is now stored, or at the last idle check (every 2s while
	// idle): the consumer lag in messages, at most one batch stale.
	// Meaningful only when PendingKnown.
	Pending      uint64
	PendingKnown bool
}

// New prepares the loop: it creates the built-in tables, creates or updates
// the durable consumer on cfg.Stream (which must exist), and reads the
// checkpoint. It fails with ErrCheckpointAhead if the checkpoint is past
// the end of the stream, unless cfg.ResetCheckpoint is set.
func New(ctx context.Context, nc *nats.Conn, db *storage.DB, cfg Config, h Handler) (*Consumer, error) {
	if nc == nil || db == nil || h == nil {
		return nil, errors.New("consumer: New needs a NATS connection, a storage DB and a Handler")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("consumer: cannot use JetStream: %w", err)
	}
	c := &Consumer{
		cfg:     cfg,
		nc:      nc,
		js:      js,
		db:      db,
		h:       h,
		log:     cfg.Logger,
		warn:    NewRateLimitedLogger(cfg.Logger, 10*time.Second),
		m:       cfg.Metrics,
		resetOK: serverAtLeast(nc.ConnectedServerVersion(), 2, 14) && !cfg.NoConsumerReset,
		pull:    newPuller(nc, cfg.Stream, cfg.Durable),
	}
	s, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		return nil, fmt.Errorf("consumer: cannot read stream %s: %w", cfg.Stream, err)
	}
	info := s.CachedInfo()
	if !serverAtLeast(nc.ConnectedServerVersion(), 2, 14) && info.Config.Retention != jetstream.LimitsPolicy {
		// Without a consumer reset the loop recreates its consumer, and
		// deleting the only consumer of an interest or work-queue stream
		// deletes the messages it has not acked yet.
		return nil, fmt.Errorf("consumer: %s retention needs NATS server 2.14 or later (consumer reset); the server is %s",
			info.Config.Retention, nc.ConnectedServerVersion())
	}
	c.ackAll = info.Config.Retention == jetstream.LimitsPolicy
	if err := catalog.EnsureBuiltinTables(db); err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	ckpt, err := ReadCheckpoint(db, cfg.Durable)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	state := info.State
	switch {
	case ckpt.Seq > state.LastSeq && !cfg.ResetCheckpoint:
		return nil, fmt.Errorf("%w: consumer %s has stored everything up to sequence %d, but stream %s ends at sequence %d. "+
			"The stream was most likely deleted and recreated, so its sequence numbers start again at 1 and would be "+
			"mistaken for messages already stored. Nothing has been skipped. To store the new stream from its start, "+
			"restart once with ResetCheckpoint set (what is already stored is kept)",
			ErrCheckpointAhead, cfg.Durable, ckpt.Seq, cfg.Stream, state.LastSeq)
	case ckpt.Seq > state.LastSeq:
		old := ckpt
		if ckpt, err = startNewEpoch(db, cfg.Durable, ckpt); err != nil {
			return nil, fmt.Errorf("consumer: %w", err)
		}
		c.log.Warn("consumer: checkpoint was past the end of the stream; starting over from the stream's first message",
			"consumer", cfg.Durable, "stream", cfg.Stream, "old_checkpoint", old.Seq, "stream_last_seq", state.LastSeq,
			"epoch", ckpt.Epoch)
	case cfg.ResetCheckpoint:
		c.log.Info("consumer: ResetCheckpoint has no effect: the checkpoint is within the stream",
			"consumer", cfg.Durable, "checkpoint", ckpt.Seq, "stream_last_seq", state.LastSeq)
	}
	if state.Msgs > 0 && state.FirstSeq > ckpt.Seq+1 {
		c.log.Warn("consumer: messages after the checkpoint are no longer in the stream (max age, limits or purge) and cannot be stored",
			"consumer", cfg.Durable, "stream", cfg.Stream, "first_missing_seq", ckpt.Seq+1, "stream_first_seq", state.FirstSeq)
	}
	c.ckpt = ckpt
	if err := c.ensureConsumer(ctx); err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	c.lastSeqAt.Store(ckpt.Seq)
	c.m.LastApplied.Set(float64(ckpt.Seq))
	if ckpt.Seq > 0 {
		// Best effort: a checkpoint's message the stream no longer
		// holds leaves the time unknown until the next batch is stored.
		if m, err := s.GetMsg(ctx, ckpt.Seq); err == nil {
			c.appliedTimeNanos.Store(m.Time.UnixNano())
		}
	}
	return c, nil
}

// Run fetches, prepares and stores batches until ctx is cancelled; then it
// finishes the batches in hand (stores and acks them) and returns nil. It
// rides out NATS disconnections and storage errors, retrying, and returns
// an error only when it cannot go on: the NATS connection is closed for
// good, a Handler error, or a bug.
//
// Batches go through two stages: Run's goroutine fetches and prepares
// batch N+1 while another goroutine stores and acks batch N. At most one
// batch is being stored at a time, and batches are stored in fetch order,
// each with the checkpoint its predecessor left; a storage stall therefore
// stops the fetching after one batch. Before the consumer is repositioned
// after the checkpoint, or asked about deliveries this process does not
// hold, the batch being stored is waited for, so the checkpoint is final.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("consumer: Run is already running")
	}
	defer c.running.Store(false)
	defer c.pull.close()
	c.draining.Store(false)
	c.log.Info("consumer: running", "stream", c.cfg.Stream, "consumer", c.cfg.Durable,
		"checkpoint", c.ckpt.Seq, "epoch", c.ckpt.Epoch)

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
	queued := c.ckpt.Seq

	needReset := true // whatever was delivered before this Run is unknown
	attempt := 0
	for {
		if ctx.Err() != nil {
			c.draining.Store(true)
			if err := waitCommit(); err != nil && !errors.Is(err, errAbandoned) {
				return err
			}
			if err := c.nc.FlushTimeout(time.Second); err != nil && c.nc.IsConnected() {
				c.log.Warn("consumer: cannot flush the last acks; their messages will be redelivered and skipped", "err", err)
			}
			c.log.Info("consumer: stopped", "checkpoint", c.ckpt.Seq)
			return nil
		}
		if c.nc.IsClosed() {
			_ = waitCommit()
			return errors.New("consumer: the NATS connection is closed")
		}
		if needReset {
			if err := waitCommit(); err != nil {
				if errors.Is(err, errAbandoned) {
					continue // only when ctx is done: the loop's top returns
				}
				return err
			}
			queued = c.ckpt.Seq
			if err := c.repositionConsumer(ctx); err != nil {
				if ctx.Err() == nil {
					c.warn.Warn("consumer: cannot reposition the consumer after the checkpoint; retrying", "err", err)
					Backoff(ctx, attempt)
					attempt++
				}
				continue
			}
			needReset = false
		}

		msgs, fetchErr := c.fetch(ctx)
		if len(msgs) > 0 {
			ds, pending, complete := c.deliveries(msgs)
			if !complete {
				// Applying past a delivery we never saw would let the
				// checkpoint cover a message that was not stored.
				needReset = true
				c.warn.Warn("consumer: the consumer delivered messages this process did not receive (lost on the wire, or is "+
					"another client pulling from it?); repositioning after the checkpoint", "consumer", c.cfg.Durable)
			}
			if len(ds) > 0 {
				pb := c.prepare(ds, queued)
				pb.pending = pending
				// While it waits behind a long storage stall, pb must not be
				// redelivered either.
				stopKeepAlive := c.keepAlive(pb.ds)
				err := waitCommit()
				stopKeepAlive()
				if err != nil {
					if errors.Is(err, errAbandoned) {
						// Only when ctx is done. pb is dropped unacked:
						// its checkpoint would cover the abandoned batch.
						c.log.Info("consumer: stopping with batches not stored; JetStream will redeliver them", "err", err)
						continue
					}
					return err
				}
				queued = pb.handled
				if !pb.oldest.IsZero() {
					c.m.setOldestUnstored(pb.oldest)
				}
				committing = make(chan error, 1)
				go func(done chan<- error) { done <- c.commit(ctx, pb) }(committing)
			}
		}
		switch {
		case fetchErr == nil, ctx.Err() != nil:
			attempt = 0
		case errors.Is(fetchErr, context.DeadlineExceeded):
			// The fetch outlived its wait: normal while NATS is away.
			if !c.nc.IsConnected() {
				c.warn.Warn("consumer: NATS is not connected; waiting", "status", c.nc.Status().String())
			}
		default:
			needReset = true
			c.warn.Warn("consumer: cannot fetch from the consumer; retrying", "err", fetchErr)
			Backoff(ctx, attempt)
			attempt++
		}
		if len(msgs) == 0 && fetchErr == nil && !needReset {
			if committing != nil {
				// Idle, with a batch being stored: it has had FetchWait to
				// finish. The server is asked about deliveries this process
				// does not hold only on a later idle round, once its acks
				// have arrived.
				if err := waitCommit(); err != nil && !errors.Is(err, errAbandoned) {
					return err
				}
			} else {
				needReset = c.idleCheck(ctx)
			}
		}
	}
}

// Health returns nil when the loop is running, connected to NATS, not
// shutting down, not retrying a failed storage Apply, and has found no
// messages acknowledged to JetStream but missing from storage; otherwise an
// error saying which. The last (wrapping ErrAckedNotStored, naming the
// sequence range) lasts until the process restarts: an operator has to
// look at it.
func (c *Consumer) Health() error {
	c.lostMu.Lock()
	lost := c.lost
	c.lostMu.Unlock()
	switch {
	case lost.last != 0:
		return fmt.Errorf("%w: stream %s sequences %s (consumer %s); see the error log", ErrAckedNotStored, c.cfg.Stream, lost, c.cfg.Durable)
	case !c.running.Load():
		return errors.New("not running")
	case c.draining.Load():
		return errors.New("stopping")
	case c.storageFailing.Load():
		return errors.New("cannot apply batches to storage; retrying")
	case !c.nc.IsConnected():
		return fmt.Errorf("no NATS connection (%s)", c.nc.Status())
	}
	return nil
}

// Stats returns running totals and what the stored data reflects. Safe
// to call from any goroutine.
func (c *Consumer) Stats() Stats {
	st := Stats{
		Skipped:        c.skipped.Load(),
		LastAppliedSeq: c.lastSeqAt.Load(),
		Pending:        c.pending.Load(),
		PendingKnown:   c.pendingKnown.Load(),
	}
	if ns := c.appliedTimeNanos.Load(); ns != 0 {
		st.LastAppliedTime = time.Unix(0, ns).UTC()
	}
	return st
}

// setPending records the consumer's NumPending for Stats.
func (c *Consumer) setPending(n uint64) {
	c.pending.Store(n)
	c.pendingKnown.Store(true)
}

// fetch returns the next messages to process, up to FetchBatch messages
// and FetchMaxBytes bytes. Under load (the last fetch brought messages) it
// is one pull request that lingers up to FetchLinger for the batch to
// fill. Otherwise it takes whatever the consumer has ready without
// waiting; when nothing is ready, it waits up to FetchWait for the first
// message and then takes whatever else is ready within the bounds. A
// batch is therefore large under load (few pull requests, acks and
// fsyncs per message), and a message that arrives after a quiet spell is
// not held back to fill one.
//
// The byte bound is the server's (a pull request's max_bytes), so a burst
// of large messages is never pushed at the client faster than it stores
// them (the server cuts off a slow consumer). A message larger than the
// bound ends a bounded pull without being delivered (409 Message Size
// Exceeds MaxBytes); the wait for a first message is therefore unbounded
// in bytes (one message is at most the server's max_payload), so a large
// message at the head of the stream is fetched alone instead of wedging
// the writer.
func (c *Consumer) fetch(ctx context.Context) ([]jetstream.Msg, error) {
	msgs, err := c.fetchPending(ctx)
	c.loaded = len(msgs) > 0 && c.cfg.FetchLinger > 0
	return msgs, err
}

func (c *Consumer) fetchPending(ctx context.Context) ([]jetstream.Msg, error) {
	if c.loaded {
		msgs, err := c.pull.pull(ctx, nil, c.cfg.FetchBatch, c.cfg.FetchMaxBytes, c.cfg.FetchLinger, true)
		if len(msgs) > 0 || err != nil {
			return msgs, err
		}
		// Nothing came within the linger: wait for a first message.
	}
	msgs, err := c.pull.pull(ctx, nil, c.cfg.FetchBatch, c.cfg.FetchMaxBytes, readyPullExpiry, false)
	if len(msgs) > 0 || err != nil {
		return msgs, err
	}
	if msgs, err = c.pull.pull(ctx, msgs, 1, 0, c.cfg.FetchWait, false); len(msgs) == 0 || err != nil {
		return msgs, err
	}
	if left := c.cfg.FetchMaxBytes - msgSize(msgs[0]); left > 0 && c.cfg.FetchBatch > 1 {
		// An error here is reported by the next fetch; the one in hand is
		// processed.
		msgs, _ = c.pull.pull(ctx, msgs, c.cfg.FetchBatch-1, left, readyPullExpiry, false)
	}
	return msgs, nil
}

// readyPullExpiry is how long a pull for what is ready stays open: it
// expires almost at once, so the server delivers what it has and then
// ends the pull.
const readyPullExpiry = time.Millisecond

// msgSize is the size of m as the server counts it against a pull's
// max_bytes.
func msgSize(m jetstream.Msg) int {
	n := len(m.Subject()) + len(m.Reply()) + len(m.Data())
	if h := m.Headers(); len(h) > 0 {
		n += HeaderSize(h)
	}
	return n
}

// Delivery is a received message with its place in the stream.
type Delivery struct {
	Msg  jetstream.Msg
	Seq  uint64    // stream sequence
	Time time.Time // when the stream stored the message
}

// deliveries returns the leading messages whose consumer sequences follow
// on from the last delivery seen, the consumer's NumPending after the last
// of them, and whether that was all of them.
func (c *Consumer) deliveries(msgs []jetstream.Msg) ([]Delivery, uint64, bool) {
	ds := make([]Delivery, 0, len(msgs))
	var pending uint64
	for _, m := range msgs {
		md, err := deliveryMeta(m)
		if err != nil || md.consumerSeq != c.nextDeliverySeq {
			if err == nil {
				c.log.Debug("consumer: delivery out of sequence", "want_consumer_seq", c.nextDeliverySeq,
					"consumer_seq", md.consumerSeq, "stream_seq", md.streamSeq, "delivered", md.numDelivered)
			}
			return ds, pending, false
		}
		c.nextDeliverySeq++
		pending = md.numPending
		ds = append(ds, Delivery{Msg: m, Seq: md.streamSeq, Time: time.Unix(0, md.timestampNanos)})
	}
	if len(ds) > 0 {
		c.m.Pending.Set(float64(pending))
	}
	return ds, pending, true
}

// deliveryMeta reads m's place in the stream and the consumer from its ack
// subject; the pull inbox's deliveries without an allocation.
func deliveryMeta(m jetstream.Msg) (ackMeta, error) {
	if pm, ok := m.(pulledMsg); ok {
		return parseAckReply(pm.m.Reply)
	}
	md, err := m.Metadata()
	if err != nil {
		return ackMeta{}, err
	}
	return ackMeta{
		numDelivered: md.NumDelivered, streamSeq: md.Sequence.Stream, consumerSeq: md.Sequence.Consumer,
		numPending: md.NumPending, timestampNanos: md.Timestamp.UnixNano(),
	}, nil
}

// idleCheck refreshes the lag gauge while idle, and reports whether the
// server thinks messages are delivered to this consumer and not acked.
// Holding none, this process lost them (or another client took them).
func (c *Consumer) idleCheck(ctx context.Context) (needReset bool) {
	if time.Since(c.lastIdleCheck) < idleCheckInterval {
		return false
	}
	c.lastIdleCheck = time.Now()
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := c.cons.Info(ictx)
	if err != nil {
		return false
	}
	c.m.Pending.Set(float64(info.NumPending))
	// Idle with no batch being stored: everything delivered is applied,
	// so NumPending is exactly how far the checkpoint is behind.
	c.setPending(info.NumPending)
	if info.NumAckPending > 0 {
		c.log.Info("consumer: consumer has deliveries this process does not hold; repositioning after the checkpoint",
			"ack_pending", info.NumAckPending)
		return true
	}
	return false
}

// HeaderSize is the encoded size of h ("NATS/1.0\r\n", "k: v\r\n"...,
// "\r\n"), as the server counts it against max_payload and a pull's
// max_bytes.
func HeaderSize(h nats.Header) int {
	n := len("NATS/1.0\r\n\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n
}

// Backoff waits 100ms doubling per attempt up to 2s; false if ctx ended
// first. It paces the loop's retries; a Handler retrying inside Write
// should use it too.
func Backoff(ctx context.Context, attempt int) bool {
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

// RateLimitedLogger logs a message at most once per interval and counts
// the ones it held back: for conditions that repeat on every retry.
type RateLimitedLogger struct {
	logger *slog.Logger
	every  time.Duration

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// NewRateLimitedLogger logs to logger at most once per every.
func NewRateLimitedLogger(logger *slog.Logger, every time.Duration) *RateLimitedLogger {
	return &RateLimitedLogger{logger: logger, every: every}
}

// Log logs msg at level unless a message was logged less than the interval
// ago, in which case it only counts it.
func (r *RateLimitedLogger) Log(level slog.Level, msg string, args ...any) {
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
	r.logger.Log(context.Background(), level, msg, args...)
}

// Warn is Log at slog.LevelWarn.
func (r *RateLimitedLogger) Warn(msg string, args ...any) { r.Log(slog.LevelWarn, msg, args...) }
