package consumer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// puller pulls from the durable consumer over one inbox subscription that
// lasts from one reposition to the next, sending a pull request (JetStream's
// CONSUMER.MSG.NEXT) per fetch. jetstream's Fetch subscribes and
// unsubscribes an inbox, starts a goroutine and makes channels of the
// batch's size for every call: at a pull every few milliseconds per shard
// that was a tenth of a storage node's ingest CPU, and a SUB and an UNSUB
// for the server to process each time.
//
// Each request replies to its own subject (the inbox and the request's
// number), so the status that ends an earlier request (408 after it
// expired, 409 when its byte bound was reached) is told apart and ignored.
// Messages are delivered with their own subjects, so one delivered late for
// an earlier request is taken by the current one: deliveries stay in
// consumer order either way, and Consumer.deliveries checks that order.
type puller struct {
	nc      *nats.Conn
	subject string // $JS.API.CONSUMER.MSG.NEXT.<stream>.<durable>
	inbox   string // "<inbox>.": request n replies to inbox + n
	sub     *nats.Subscription
	n       uint64
}

// pullStatusTimeout is how long after a request's expiry the client waits
// for the server to end it, before giving up on it (a lost status, or a
// disconnection).
const pullStatusTimeout = time.Second

func newPuller(nc *nats.Conn, stream, durable string) *puller {
	return &puller{nc: nc, subject: "$JS.API.CONSUMER.MSG.NEXT." + stream + "." + durable}
}

// reset replaces the inbox subscription: deliveries made for requests sent
// before it are dropped with the old one, as they must be after the
// consumer is repositioned.
func (p *puller) reset() error {
	p.close()
	inbox := p.nc.NewInbox() + "."
	sub, err := p.nc.SubscribeSync(inbox + "*")
	if err != nil {
		return fmt.Errorf("cannot subscribe to the pull inbox: %w", err)
	}
	// A pull is bounded by its request (messages and bytes); the client's
	// default limits could otherwise drop a large batch as a slow consumer.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("cannot lift the pull inbox's pending limits: %w", err)
	}
	p.inbox, p.sub = inbox, sub
	return nil
}

// close unsubscribes the inbox, if any.
func (p *puller) close() {
	if p.sub != nil {
		_ = p.sub.Unsubscribe()
		p.sub = nil
	}
}

// pull sends one pull request for up to batch messages and maxBytes bytes
// (0: no byte bound) that the server holds up to expires, and appends what
// it delivers to msgs. It returns when the batch is full, when the server
// ends the request (expired, nothing more to deliver, byte bound), when ctx
// ends, or with an error wrapping context.DeadlineExceeded when the server
// did not end it within pullStatusTimeout after it expired.
//
// With fill (a lingering pull), the deliveries queue in the subscription
// while the request is open and are taken when it expires or holds a full
// batch (see awaitFill), instead of one by one as they arrive; unless the
// batch might not fit in the subscription's queue (canQueue).
func (p *puller) pull(ctx context.Context, msgs []jetstream.Msg, batch, maxBytes int, expires time.Duration, fill bool) ([]jetstream.Msg, error) {
	if p.sub == nil {
		return msgs, errors.New("BUG: pull before the consumer was positioned")
	}
	p.n++
	reply := p.inbox + strconv.FormatUint(p.n, 10)
	if err := p.nc.PublishRequest(p.subject, reply, appendPullRequest(nil, batch, maxBytes, expires)); err != nil {
		return msgs, fmt.Errorf("cannot send a pull request to %s: %w", p.subject, err)
	}
	if fill && p.canQueue(batch) {
		if err := p.awaitFill(ctx, batch, expires); err != nil {
			return msgs, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, expires+pullStatusTimeout)
	defer cancel()
	var got, bytes int
	for got < batch && (maxBytes == 0 || bytes < maxBytes) {
		m, err := p.sub.NextMsgWithContext(wctx)
		if err != nil {
			if ctx.Err() != nil {
				return msgs, ctx.Err()
			}
			if errors.Is(err, context.DeadlineExceeded) {
				return msgs, fmt.Errorf("pull request to %s: the server did not end it within %s of its expiry: %w",
					p.subject, pullStatusTimeout, context.DeadlineExceeded)
			}
			return msgs, fmt.Errorf("cannot read the pull inbox: %w", err)
		}
		if m.Reply == "" {
			// A status, not a delivery (deliveries carry their ack subject).
			if m.Subject != reply {
				continue // the end of an earlier request
			}
			if done, err := pullEnded(m.Header); done {
				return msgs, err
			}
			continue
		}
		msgs = append(msgs, pulledMsg{m})
		got++
		if maxBytes > 0 {
			bytes += m.Size()
		}
	}
	return msgs, nil
}

// canQueue reports whether a pull of batch messages can wait in the inbox
// subscription: nats.go holds a synchronous subscription's messages in a
// channel of SubChanLen (64 Ki by default) and drops what does not fit as
// a slow consumer, so a request whose whole batch (and its status) might
// not fit is read as it arrives instead.
func (p *puller) canQueue(batch int) bool {
	return batch < p.nc.Opts.SubChanLen
}

// fillPollInterval is how often a lingering pull looks whether its batch
// is full before the request expires: a batch that fills early waits at
// most this long more.
const fillPollInterval = time.Millisecond

// awaitFill waits until the pull request just sent expires, or until the
// subscription holds batch messages (a full batch), or until ctx ends. A
// status that ends the request early (409 at the byte bound, an error) is
// not told apart from a delivery here, so such a request waits out its
// expiry, at most the linger. A goroutine blocked on the subscription is woken by
// every delivery: at 70,000 events/s and a 5 ms linger, some 350 wake-ups
// per pull, each a hand-off between the connection's read loop and this
// goroutine (and often a futex wake of an idle thread); queued, the
// deliveries are taken in one pass.
func (p *puller) awaitFill(ctx context.Context, batch int, expires time.Duration) error {
	deadline := time.Now().Add(expires)
	t := time.NewTimer(min(fillPollInterval, expires))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		n, _, err := p.sub.Pending()
		if err != nil {
			return fmt.Errorf("cannot read the pull inbox: %w", err)
		}
		left := time.Until(deadline)
		if n >= batch || left <= 0 {
			return nil
		}
		t.Reset(min(fillPollInterval, left))
	}
}

// pullEnded reads the status message that ends (or not) a pull request:
// 404 (nothing to deliver) and 408 (expired) end it normally, as does 409
// Message Size Exceeds MaxBytes (the next message would pass the byte
// bound); 100 (a heartbeat) does not end it; any other status ends it with
// an error (the consumer was deleted, its leader changed...).
func pullEnded(h nats.Header) (done bool, err error) {
	status, desc := h.Get("Status"), h.Get("Description")
	switch {
	case status == "100":
		return false, nil
	case status == "404" || status == "408":
		return true, nil
	case status == "409" && desc == "Message Size Exceeds MaxBytes":
		return true, nil
	case status == "":
		return true, errors.New("pull request ended by a message with neither a status nor an ack subject")
	}
	return true, fmt.Errorf("pull request ended by the server: %s %s", status, desc)
}

// appendPullRequest appends the JSON of a pull request.
func appendPullRequest(dst []byte, batch, maxBytes int, expires time.Duration) []byte {
	dst = append(dst, `{"batch":`...)
	dst = strconv.AppendInt(dst, int64(batch), 10)
	if maxBytes > 0 {
		dst = append(dst, `,"max_bytes":`...)
		dst = strconv.AppendInt(dst, int64(maxBytes), 10)
	}
	dst = append(dst, `,"expires":`...)
	dst = strconv.AppendInt(dst, int64(expires), 10)
	return append(dst, '}')
}

// pulledMsg is a delivery read from the pull inbox, as a jetstream.Msg:
// nats.go's JetStream methods of a core message (ack subject parsing,
// acks) do the work.
type pulledMsg struct{ m *nats.Msg }

func (p pulledMsg) Metadata() (*jetstream.MsgMetadata, error) {
	md, err := p.m.Metadata()
	if err != nil {
		return nil, err
	}
	return &jetstream.MsgMetadata{
		Sequence:     jetstream.SequencePair{Consumer: md.Sequence.Consumer, Stream: md.Sequence.Stream},
		NumDelivered: md.NumDelivered,
		NumPending:   md.NumPending,
		Timestamp:    md.Timestamp,
		Stream:       md.Stream,
		Consumer:     md.Consumer,
		Domain:       md.Domain,
	}, nil
}

func (p pulledMsg) Data() []byte                           { return p.m.Data }
func (p pulledMsg) Headers() nats.Header                   { return p.m.Header }
func (p pulledMsg) Subject() string                        { return p.m.Subject }
func (p pulledMsg) Reply() string                          { return p.m.Reply }
func (p pulledMsg) Ack() error                             { return p.m.Ack() }
func (p pulledMsg) DoubleAck(ctx context.Context) error    { return p.m.AckSync(nats.Context(ctx)) }
func (p pulledMsg) Nak() error                             { return p.m.Nak() }
func (p pulledMsg) NakWithDelay(delay time.Duration) error { return p.m.NakWithDelay(delay) }
func (p pulledMsg) InProgress() error                      { return p.m.InProgress() }
func (p pulledMsg) Term() error                            { return p.m.Term() }

// TermWithReason sends what jetstream's does: "+TERM <reason>".
func (p pulledMsg) TermWithReason(reason string) error { return p.m.Respond([]byte("+TERM " + reason)) }
