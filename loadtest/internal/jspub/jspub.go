// Package jspub publishes to JetStream asynchronously over core NATS, for
// the load-testing harness's open-loop workloads: a publish does not hold
// a goroutine (nor a context, a timer or nats.go's request mux) until its
// ack.
//
// A Publisher owns one wildcard subscription on a fresh inbox,
// <inbox>.*. Publish sends each message with the reply subject
// <inbox>.<token>, a token unique within the Publisher, and records the
// operation in a pending table; the reply handler takes the token's entry
// out of the table, reads the reply (ParseAck: an ack, a JetStream API
// error, or invalid; a reply with no body and header "Status: 503" is
// "no responders", no stream takes the subject) and reports the outcome.
// A sweeper reports the publishes still pending Timeout after they were
// sent as ErrTimeout, and when the Publisher's context ends it reports
// every pending publish as ErrCancelled.
//
// Invariant: every publish given to Publish gets exactly one outcome,
// through Config.Done: an entry leaves the pending table once, and a
// reply whose entry has left (it came after the timeout) is ignored and
// counted in LateReplies. Outcomes are reported on the reply handler's
// goroutine, the sweeper's, or Publish's own (an error at once), so Done
// must be safe for concurrent use.
//
// Publisher does not bound its own in-flight publishes; its callers do
// (arrival.RunAsync's permits, released from Done).
package jspub

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// Errors reported through Config.Done, besides *AckError, ErrInvalidAck
// and the errors of nats.Conn.PublishMsg.
var (
	// ErrTimeout is reported for a publish with no reply within Timeout.
	ErrTimeout = errors.New("jetstream publish: no ack within the timeout")
	// ErrNoResponders is reported when no stream takes the subject: the
	// server answered "503 no responders".
	ErrNoResponders = errors.New("jetstream publish: no responders (no stream for the subject)")
	// ErrCancelled is reported for publishes pending when the
	// Publisher's context ends, and for publishes after it.
	ErrCancelled = errors.New("jetstream publish: cancelled")
)

// Config is a Publisher's settings.
type Config[T any] struct {
	// Timeout is how long a publish waits for its reply; > 0.
	Timeout time.Duration
	// Done receives each publish's outcome: its operation, its intended
	// start, when the outcome was known, the stream sequence and a nil
	// error for an ack, or the error.
	Done func(op T, intended, at time.Time, seq uint64, err error)
}

// Publisher sends JetStream publishes and matches their replies.
type Publisher[T any] struct {
	nc      *nats.Conn
	cfg     Config[T]
	prefix  string // "<inbox>."
	sub     *nats.Subscription
	pending *pendingTable[T]
	ctx     context.Context
	cancel  context.CancelFunc

	// next is the last token handed out.
	next atomic.Uint64
	// reply is the reusable buffer reply subjects are built in.
	reply []byte

	lateReplies atomic.Int64
	stopped     chan struct{}
}

// sweepInterval is how often the sweeper looks for timed-out publishes:
// a tenth of the timeout, within [1 ms, 100 ms].
func sweepInterval(timeout time.Duration) time.Duration {
	return min(max(timeout/10, time.Millisecond), 100*time.Millisecond)
}

// New subscribes to a fresh inbox on nc and starts the sweeper. When ctx
// ends, pending publishes are reported as ErrCancelled. Close releases
// the subscription and the sweeper.
func New[T any](ctx context.Context, nc *nats.Conn, cfg Config[T]) (*Publisher[T], error) {
	if cfg.Timeout <= 0 || cfg.Done == nil {
		return nil, fmt.Errorf("BUG: jspub.New needs a positive timeout (got %s) and Done", cfg.Timeout)
	}
	p := &Publisher[T]{
		nc: nc, cfg: cfg, prefix: nc.NewInbox() + ".", pending: newPendingTable[T](),
		stopped: make(chan struct{}),
	}
	p.ctx, p.cancel = context.WithCancel(ctx)
	sub, err := nc.Subscribe(p.prefix+"*", p.onReply)
	if err != nil {
		p.cancel()
		return nil, fmt.Errorf("cannot subscribe to the publish inbox %s*: %w", p.prefix, err)
	}
	// Acks come as fast as publishes go: no slow-consumer limit on them
	// (the in-flight bound is the caller's).
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		p.cancel()
		return nil, fmt.Errorf("cannot lift the publish inbox's pending limits: %w", err)
	}
	p.sub = sub
	go p.sweep()
	return p, nil
}

// Publish sends msg (its Reply is overwritten) for op. The outcome comes
// through Done, possibly before Publish returns. msg and its Data may be
// reused once Publish returns. Publish is not safe for concurrent use.
func (p *Publisher[T]) Publish(msg *nats.Msg, op T, intended time.Time) {
	if p.ctx.Err() != nil {
		p.cfg.Done(op, intended, time.Now(), 0, ErrCancelled)
		return
	}
	tok := p.next.Add(1)
	p.reply = strconv.AppendUint(append(p.reply[:0], p.prefix...), tok, 36)
	msg.Reply = string(p.reply)
	now := time.Now()
	if !p.pending.add(tok, pendingOp[T]{op: op, intended: intended, deadline: now.Add(p.cfg.Timeout)}) {
		p.cfg.Done(op, intended, now, 0, ErrCancelled) // the context ended meanwhile
		return
	}
	if err := p.nc.PublishMsg(msg); err != nil {
		if po, ok := p.pending.take(tok); ok {
			p.cfg.Done(po.op, po.intended, time.Now(), 0, fmt.Errorf("jetstream publish to %s: %w", msg.Subject, err))
		}
	}
}

// onReply handles one reply on the inbox.
func (p *Publisher[T]) onReply(m *nats.Msg) {
	tok, err := strconv.ParseUint(m.Subject[len(p.prefix):], 36, 64)
	if err != nil {
		p.lateReplies.Add(1) // not a token of ours
		return
	}
	po, ok := p.pending.take(tok)
	if !ok {
		p.lateReplies.Add(1)
		return
	}
	var seq uint64
	switch {
	case len(m.Data) == 0 && m.Header.Get("Status") == "503":
		err = ErrNoResponders
	default:
		seq, err = ParseAck(m.Data)
	}
	p.cfg.Done(po.op, po.intended, time.Now(), seq, err)
}

// sweep reports timed-out publishes until the context ends, then the
// pending ones as cancelled.
func (p *Publisher[T]) sweep() {
	defer close(p.stopped)
	t := time.NewTicker(sweepInterval(p.cfg.Timeout))
	defer t.Stop()
	var expired []pendingOp[T]
	for {
		select {
		case now := <-t.C:
			expired = p.pending.expire(expired[:0], now, false)
			cause := ErrTimeout
			if p.nc.IsClosed() {
				cause = nats.ErrConnectionClosed
			}
			for _, po := range expired {
				p.cfg.Done(po.op, po.intended, now, 0, cause)
			}
		case <-p.ctx.Done():
			now := time.Now()
			for _, po := range p.pending.expire(expired[:0], now, true) {
				p.cfg.Done(po.op, po.intended, now, 0, ErrCancelled)
			}
			return
		}
	}
}

// Pending returns how many publishes await their reply.
func (p *Publisher[T]) Pending() int { return p.pending.len() }

// LateReplies returns how many replies came for publishes no longer
// pending (already reported as timed out).
func (p *Publisher[T]) LateReplies() int64 { return p.lateReplies.Load() }

// Close stops the sweeper, reports any publish still pending as
// ErrCancelled, and unsubscribes the inbox. Publishes after Close are
// reported as ErrCancelled.
func (p *Publisher[T]) Close() error {
	p.cancel()
	<-p.stopped
	if err := p.sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		return fmt.Errorf("cannot unsubscribe the publish inbox: %w", err)
	}
	return nil
}
