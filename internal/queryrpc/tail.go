package queryrpc

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/eventide/eventide/internal/tail"
	"github.com/eventide/eventide/writer"
)

// The live tail across processes. Each storage node publishes the events
// it stores, once their batch is durably applied (writer.Config.OnStored,
// which on a sharded node holds only the events of its shards), on the
// core NATS subject <tail prefix>.<node>: fire and forget, no JetStream.
// A query service subscribes to <tail prefix>.*, puts the nodes' events
// back in stream order (TailRelay) and feeds its own tail.Broadcaster,
// whose ring serves Last-Event-ID resumes exactly as a node's does: an
// event's id is its stream sequence, global to the stream, so it orders
// events of every node.
//
// Tail batch (node -> query services, subject <tail prefix>.<node>):
//
//	u8      version = tailBatchV1
//	uvarint event count (at least 1)
//	count x event, in stream order:
//	    uvarint seq, the stream sequence of the message that carried it
//	    16 x u8 event id (a UUID)
//	    bytes   type
//	    bytes   user
//	    bytes   author
//	    bytes   data, the event's JSON object
//
// A stored batch larger than maxTailBatchBytes goes out as several
// messages, each a batch, so that none passes NATS' default 1 MiB
// payload limit.

// DefaultTailSubjectPrefix is the first tokens of the subjects the
// storage nodes publish their stored events on.
const DefaultTailSubjectPrefix = "eventide.tail"

const tailBatchV1 = 1

// maxTailBatchBytes bounds one tail message.
const maxTailBatchBytes = 512 << 10

// minTailEventBytes is the least an encoded event takes: a decoder
// believes no count that the message could not hold.
const minTailEventBytes = 1 + 16 + 4

func appendTailEvent(dst []byte, e *tail.Event) []byte {
	dst = binary.AppendUvarint(dst, e.Seq)
	dst = append(dst, e.ID[:]...)
	dst = appendBytes(dst, []byte(e.Type))
	dst = appendBytes(dst, []byte(e.User))
	dst = appendBytes(dst, []byte(e.Author))
	return appendBytes(dst, e.Data)
}

// appendTailBatch appends one tail message of evs (at least one).
func appendTailBatch(dst []byte, evs []tail.Event) []byte {
	dst = append(dst, tailBatchV1)
	dst = binary.AppendUvarint(dst, uint64(len(evs)))
	for i := range evs {
		dst = appendTailEvent(dst, &evs[i])
	}
	return dst
}

// decodeTailBatch decodes a tail message, appending its events to dst;
// their data aliases src. Anything but a version 1 batch of at least one
// event, in increasing sequence order, is an error wrapping ErrBadMessage.
// types, when not nil, gives each event's type string (typeNames.name),
// so that a relay does not allocate one per event.
func decodeTailBatch(dst []tail.Event, src []byte, types *typeNames) ([]tail.Event, error) {
	d := decoder{b: src, what: "tail batch"}
	d.version(tailBatchV1)
	n := d.int("event count")
	if d.err == nil && (n == 0 || n > len(d.b)/minTailEventBytes) {
		d.fail("event count %d for %d bytes", n, len(d.b))
	}
	var prev uint64
	for i := 0; i < n && d.err == nil; i++ {
		var e tail.Event
		e.Seq = d.uvarint("seq")
		if d.err == nil && (e.Seq == 0 || e.Seq < prev) {
			d.fail("event %d: seq %d after %d", i, e.Seq, prev)
		}
		prev = e.Seq
		if d.err == nil && len(d.b) < len(e.ID) {
			d.fail("event %d: truncated id", i)
		}
		if d.err == nil {
			copy(e.ID[:], d.b)
			d.b = d.b[len(e.ID):]
		}
		e.Type = types.name(d.bytes("type"))
		e.User = string(d.bytes("user"))
		e.Author = string(d.bytes("author"))
		e.Data = d.bytes("data")
		if d.err == nil {
			dst = append(dst, e)
		}
	}
	if err := d.end(); err != nil {
		return dst, err
	}
	return dst, nil
}

// typeNames interns the event types of tail messages: a deployment has
// few, and a relay decodes tens of thousands of events a second. At most
// maxTypeNames are kept; past that, names are allocated each time. Not
// safe for concurrent use (a relay decodes on its subscription's
// goroutine).
type typeNames struct{ m map[string]string }

const maxTypeNames = 4096

// name returns b as a string; a nil *typeNames allocates it.
func (t *typeNames) name(b []byte) string {
	if t == nil {
		return string(b)
	}
	if s, ok := t.m[string(b)]; ok {
		return s
	}
	s := string(b)
	if t.m == nil {
		t.m = make(map[string]string)
	}
	if len(t.m) < maxTypeNames {
		t.m[s] = s
	}
	return s
}

// DefaultTailCoalesce is how long a TailPublisher gathers stored
// batches into one message. A node's writers store small batches (one
// per fetch of each shard's consumer: hundreds a second at a few
// thousand events/s), and each message costs a NATS server hop and a
// wake-up of every relay, more than its events; a few milliseconds is
// small beside the relay's hold (DefaultTailHold) and the live tail's
// 250 ms target.
const DefaultTailCoalesce = 5 * time.Millisecond

// TailPublisher returns the function a storage node chains into
// writer.Config.OnStored: it publishes the stored events on
// <DefaultTailSubjectPrefix>.<node>, gathering what is stored within
// DefaultTailCoalesce into one message (or several, each at most
// maxTailBatchBytes), its events in sequence order. It never blocks the
// writer on a subscriber (core NATS publishes into the connection's
// buffer); a publish that fails (the connection closed, its buffer full
// while reconnecting) is counted and logged once per failure streak, and
// those events are missing from the remote tails (their clients can read
// them with /v1/events). It may be called from several goroutines; it
// copies what it is given before it returns.
func TailPublisher(nc *nats.Conn, node string, logger *slog.Logger) func([]writer.StoredEvent) {
	return newTailPublisher(nc, node, logger, DefaultTailCoalesce, nil).add
}

// ListenedTailPublisher is TailPublisher for a node that can ask its NATS
// server whether any subscription matches a subject (the all-in-one, whose
// server runs in its process: natsembed.Interest). Stored events that
// arrive while nothing subscribes to the node's tail subject are neither
// encoded nor published: core NATS would drop them at the server, so no
// subscriber can tell the difference, and a node with no query service
// attached (the all-in-one's usual case) stops spending a copy of every
// event through its NATS connection and server. A query service's relay
// subscribes before it reads the nodes' positions (StartTailRelay), and
// the server registers a subscription before it routes the client's next
// message, so every event stored after that position finds the interest.
func ListenedTailPublisher(nc *nats.Conn, node string, logger *slog.Logger, interest func(subject string) bool) func([]writer.StoredEvent) {
	return newTailPublisher(nc, node, logger, DefaultTailCoalesce, interest).add
}

// tailPublisher gathers stored events, encoded, until its timer publishes
// them.
type tailPublisher struct {
	nc       *nats.Conn
	subject  string
	logger   *slog.Logger
	coalesce time.Duration
	// interest reports whether anything subscribes to subject; nil when
	// the connection cannot tell (then every event is published).
	interest func(subject string) bool

	mu      sync.Mutex
	events  []tailPending // encoded events waiting, in arrival order
	data    []byte        // their encodings, one after the other
	armed   bool          // a publish is scheduled
	buf     []byte        // the message being built
	failing bool
}

// tailPending is one encoded event of tailPublisher.data.
type tailPending struct {
	seq        uint64
	start, end int
}

func newTailPublisher(nc *nats.Conn, node string, logger *slog.Logger, coalesce time.Duration, interest func(string) bool) *tailPublisher {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &tailPublisher{nc: nc, subject: DefaultTailSubjectPrefix + "." + node, logger: logger, coalesce: coalesce, interest: interest}
}

func (p *tailPublisher) add(stored []writer.StoredEvent) {
	if len(stored) == 0 || p.interest != nil && !p.interest(p.subject) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range stored {
		e := &stored[i].Event
		start := len(p.data)
		p.data = appendTailEvent(p.data, &tail.Event{Seq: stored[i].Seq, ID: e.ID, Type: e.Type, User: e.User, Author: e.Author, Data: e.Data})
		p.events = append(p.events, tailPending{seq: stored[i].Seq, start: start, end: len(p.data)})
	}
	switch {
	case p.coalesce <= 0 || len(p.data) >= maxTailBatchBytes:
		p.publishLocked()
	case !p.armed:
		p.armed = true
		time.AfterFunc(p.coalesce, p.flush)
	}
}

func (p *tailPublisher) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = false
	if p.nc.IsClosed() {
		// The node is shutting down: no one is left to tell.
		p.events, p.data = p.events[:0], p.data[:0]
		return
	}
	p.publishLocked()
}

// publishLocked publishes every waiting event, in sequence order (the
// shards' writers interleave), in messages of at most maxTailBatchBytes
// of events (a larger event goes alone).
func (p *tailPublisher) publishLocked() {
	if len(p.events) == 0 {
		return
	}
	slices.SortStableFunc(p.events, func(a, b tailPending) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	var err error
	for start := 0; start < len(p.events) && err == nil; {
		end, size := start, 0
		for end < len(p.events) && (end == start || size < maxTailBatchBytes) {
			size += p.events[end].end - p.events[end].start
			end++
		}
		p.buf = append(p.buf[:0], tailBatchV1)
		p.buf = binary.AppendUvarint(p.buf, uint64(end-start))
		for _, e := range p.events[start:end] {
			p.buf = append(p.buf, p.data[e.start:e.end]...)
		}
		err = p.nc.Publish(p.subject, p.buf)
		start = end
	}
	p.events, p.data = p.events[:0], p.data[:0]
	if cap(p.buf) > 4*maxTailBatchBytes {
		p.buf = nil
	}
	if cap(p.data) > 4*maxTailBatchBytes {
		p.data = nil
	}
	switch {
	case err != nil && !p.failing:
		p.failing = true
		p.logger.Warn("cannot publish stored events to the remote live tails; they miss them until it works again", "subject", p.subject, "err", err)
	case err == nil && p.failing:
		p.failing = false
		p.logger.Info("publishing stored events to the remote live tails again", "subject", p.subject)
	}
}

// DefaultTailHold is how long a TailRelay holds an event for the other
// nodes' events of lower sequences that may still be on their way.
const DefaultTailHold = 20 * time.Millisecond

// TailRelay feeds a query service's tail.Broadcaster with the events the
// storage nodes publish, in stream order. Each node's messages arrive in
// its order, but two nodes' interleave arbitrarily; the relay holds each
// event for a short time (the hold) and publishes, in sequence order,
// every held event up to the highest sequence that has been held that
// long. An event arriving after one of a higher sequence went out (a node
// later than the hold) is still published, out of order: a client
// connected gets it; one resuming from a later position does not.
type TailRelay struct {
	b      *tail.Broadcaster
	hold   time.Duration
	logger *slog.Logger
	sub    *nats.Subscription

	// decoded and types are receive's: NATS calls it on one goroutine.
	decoded []tail.Event
	types   typeNames

	mu sync.Mutex
	// pending are the held events in arrival order (each node's in its
	// order, the nodes' interleaved); release sorts those it publishes.
	pending []heldEvent
	order   []heldOrder // release's scratch
	late    uint64      // events published out of order
	bad     uint64      // messages refused as malformed
	stop    chan struct{}
	done    chan struct{}
}

type heldEvent struct {
	e  tail.Event
	at time.Time
}

// heldOrder is a pending event's place in the release order: by sequence,
// then by arrival.
type heldOrder struct {
	seq uint64
	i   int
}

// StartTailRelay subscribes to every node's tail subject. It holds what
// arrives until Feed names the Broadcaster to publish to: the caller
// subscribes first, then reads the nodes' positions for the
// Broadcaster's start, so that no event falls between the two unnoticed.
// hold is DefaultTailHold when zero. Stop it before closing nc or the
// Broadcaster.
func StartTailRelay(nc *nats.Conn, hold time.Duration, logger *slog.Logger) (*TailRelay, error) {
	if hold <= 0 {
		hold = DefaultTailHold
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &TailRelay{hold: hold, logger: logger, stop: make(chan struct{}), done: make(chan struct{})}
	sub, err := nc.Subscribe(DefaultTailSubjectPrefix+".*", r.receive)
	if err != nil {
		return nil, fmt.Errorf("cannot subscribe to the storage nodes' live tails (%s.*): %w", DefaultTailSubjectPrefix, err)
	}
	// A burst must not make NATS drop the subscription's messages: the
	// relay only decodes and appends in its callback.
	if err := sub.SetPendingLimits(-1, 256<<20); err != nil {
		sub.Unsubscribe()
		return nil, fmt.Errorf("cannot set the live tail subscription's limits: %w", err)
	}
	r.sub = sub
	return r, nil
}

// Feed starts publishing to b, in stream order, what arrived and what
// arrives. Call it once.
func (r *TailRelay) Feed(b *tail.Broadcaster) {
	r.b = b
	go r.run()
}

func (r *TailRelay) receive(msg *nats.Msg) {
	evs, err := decodeTailBatch(r.decoded[:0], msg.Data, &r.types)
	r.decoded = evs
	// The events alias msg.Data: drop them once pending holds them.
	defer clear(r.decoded)
	if err != nil {
		r.mu.Lock()
		r.bad++
		first := r.bad == 1
		r.mu.Unlock()
		if first {
			r.logger.Warn("refusing a malformed live tail message (logged once)", "subject", msg.Subject, "err", err)
		}
		return
	}
	now := time.Now()
	r.mu.Lock()
	for _, e := range evs {
		r.pending = append(r.pending, heldEvent{e: e, at: now})
	}
	r.mu.Unlock()
}

func (r *TailRelay) run() {
	defer close(r.done)
	tick := time.NewTicker(r.hold / 2)
	defer tick.Stop()
	var out []tail.Event
	for {
		select {
		case <-r.stop:
			return
		case now := <-tick.C:
			out = r.release(now, out[:0])
			if len(out) > 0 {
				r.b.Publish(out)
				clear(out)
			}
		}
	}
}

// release moves to out, in sequence order, the held events up to the
// highest sequence held at least the hold.
func (r *TailRelay) release(now time.Time, out []tail.Event) []tail.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pending) == 0 {
		return out
	}
	var cutoff uint64
	for _, h := range r.pending {
		if now.Sub(h.at) >= r.hold && h.e.Seq > cutoff {
			cutoff = h.e.Seq
		}
	}
	if cutoff == 0 {
		return out
	}
	// Sort what goes out, not the whole of pending, and by a small key:
	// sorting the held events themselves (120 bytes each) every tick was
	// most of the relay's CPU.
	order := r.order[:0]
	for i := range r.pending {
		if s := r.pending[i].e.Seq; s <= cutoff {
			order = append(order, heldOrder{seq: s, i: i})
		}
	}
	slices.SortFunc(order, func(a, b heldOrder) int {
		if c := cmp.Compare(a.seq, b.seq); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	newest := r.b.Stats().NewestSeq
	for _, o := range order {
		if o.seq < newest {
			r.late++
		}
		out = append(out, r.pending[o.i].e)
	}
	r.order = order
	kept := r.pending[:0]
	for i := range r.pending {
		if r.pending[i].e.Seq > cutoff {
			kept = append(kept, r.pending[i])
		}
	}
	clear(r.pending[len(kept):])
	r.pending = kept
	return out
}

// Late is how many events were published after one of a higher sequence.
func (r *TailRelay) Late() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.late
}

// Stop unsubscribes and stops publishing; it is idempotent.
func (r *TailRelay) Stop() error {
	select {
	case <-r.stop:
		return nil
	default:
	}
	close(r.stop)
	if r.b != nil {
		<-r.done
	}
	if err := r.sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
		return fmt.Errorf("cannot unsubscribe from the live tails: %w", err)
	}
	return nil
}
