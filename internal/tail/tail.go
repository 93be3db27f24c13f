// Package tail is the live tail of stored events: a Broadcaster that the
// writer feeds, after each batch is durably applied, with the batch's
// events (writer.Config.OnStored), and that hands them to subscribers
// (the SSE route /v1/events/stream), each filtered by event type.
//
// Positions are stream sequences: an event's Seq is the JetStream
// sequence of the message that carried it, so they grow in stream order
// and a client that saw Seq s resumes after s. The Broadcaster keeps the
// newest events in a ring bounded by count and bytes (Options.Replay,
// ReplayBytes) to replay a resuming client's missed events; older
// positions are reported as a gap (Subscription.Gap), never silently
// skipped.
//
// Memory is bounded. Publish never blocks: each subscriber has a queue
// bounded by count and bytes of live events (ClientBuffer,
// ClientBufferBytes); a subscriber whose queue would pass either is
// dropped at once (its queue freed, Take returns ErrSlowClient), never
// waited for. An event is copied once, into the ring, and shared
// read-only by every subscriber; its JSON form is encoded once, by the
// first subscriber that needs it. At most MaxClients subscribe at once.
//
// Use:
//
//	b := tail.New(tail.Options{}, checkpoint) // checkpoint: the writer's applied sequence at start
//	wcfg.OnStored = b.WriterHook() // b.Publish(events), on the writer's goroutine, in stream order
//	sub, err := b.Subscribe([]string{"click"}, after, resume)
//	defer sub.Close()
//	for { select { case <-sub.Ready(): evs, err := sub.Take(evs[:0]) ... } }
//	b.Close() // at shutdown: every subscription ends with ErrClosed
package tail

import (
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/writer"
)

// ErrTooManyClients is returned by Subscribe when MaxClients
// subscriptions are open.
var ErrTooManyClients = errors.New("too many live tail clients")

// ErrSlowClient is returned by Take when the subscriber did not take its
// events fast enough and its queue filled: it was dropped.
var ErrSlowClient = errors.New("the client did not keep up: its buffer of events filled")

// ErrClosed is returned by Take and Subscribe once the Broadcaster is
// closed (the process is shutting down).
var ErrClosed = errors.New("the live tail is shutting down")

// Defaults of Options.
const (
	DefaultReplay            = 10000
	DefaultReplayBytes       = 32 << 20
	DefaultClientBuffer      = 1024
	DefaultClientBufferBytes = 4 << 20
	DefaultMaxClients        = 100
)

// Options bound a Broadcaster. The zero value of each field means its
// default.
type Options struct {
	// Replay and ReplayBytes bound the ring of the newest events kept to
	// replay to resuming clients: at most this many, holding at most this
	// many bytes of data (the newest event is always kept).
	Replay, ReplayBytes int
	// ClientBuffer and ClientBufferBytes bound the live events queued for
	// one client; past either, the client is dropped (ErrSlowClient).
	ClientBuffer, ClientBufferBytes int
	// MaxClients bounds the open subscriptions.
	MaxClients int
}

func (o *Options) fillDefaults() {
	if o.Replay <= 0 {
		o.Replay = DefaultReplay
	}
	if o.ReplayBytes <= 0 {
		o.ReplayBytes = DefaultReplayBytes
	}
	if o.ClientBuffer <= 0 {
		o.ClientBuffer = DefaultClientBuffer
	}
	if o.ClientBufferBytes <= 0 {
		o.ClientBufferBytes = DefaultClientBufferBytes
	}
	if o.MaxClients <= 0 {
		o.MaxClients = DefaultMaxClients
	}
}

// Event is one stored event. Publish copies what it is given; the
// Broadcaster's events are shared and must not be modified.
type Event struct {
	// Seq is the stream sequence of the message that carried the event.
	Seq          uint64
	ID           uuid.UUID
	Type         string
	User, Author string
	// Data is the event's JSON object.
	Data []byte

	// enc is the JSON form, set up by Publish, encoded once on demand.
	enc *encoded
}

type encoded struct {
	once sync.Once
	json []byte
}

// size is what the event holds in memory, roughly.
func (e *Event) size() int { return len(e.Data) + len(e.Type) + len(e.User) + len(e.Author) + 96 }

// JSON returns the event as the HTTP API's Event object (id, type, time,
// user, author, data), encoded once and shared: do not modify it.
func (e *Event) JSON() []byte {
	if e.enc == nil {
		e.enc = &encoded{} // an Event not published: its own
	}
	e.enc.once.Do(func() {
		t, _ := bucket.TimeOf(e.ID)
		v := struct {
			ID     string          `json:"id"`
			Type   string          `json:"type"`
			Time   string          `json:"time"`
			User   string          `json:"user,omitempty"`
			Author string          `json:"author,omitempty"`
			Data   json.RawMessage `json:"data"`
		}{e.ID.String(), e.Type, t.UTC().Format(time.RFC3339Nano), e.User, e.Author, e.Data}
		if !json.Valid(e.Data) {
			v.Data, _ = json.Marshal(string(e.Data))
		}
		e.enc.json, _ = json.Marshal(v)
	})
	return e.enc.json
}

// Stats is a Broadcaster's state.
type Stats struct {
	// Clients are the subscriptions not yet closed (a dropped one counts
	// until its owner closes it).
	Clients, MaxClients int
	// ReplayEvents are held in the ring, from OldestSeq to NewestSeq (0
	// when empty).
	ReplayEvents         int
	OldestSeq, NewestSeq uint64
	// SlowDisconnects counts the clients dropped for not keeping up.
	SlowDisconnects uint64
}

// Broadcaster fans stored events out to subscribers. It is safe for
// concurrent use; Publish is meant to be called from one goroutine, in
// stream order.
type Broadcaster struct {
	opts Options

	mu sync.Mutex
	// ring holds the newest events, oldest first, from ring[start]
	// (wrapping); n of them, ringBytes in all.
	ring      []*Event
	start, n  int
	ringBytes int
	floor     uint64 // every event with Seq <= floor is out of the ring
	newest    uint64
	subs      map[*Subscription]struct{}
	// open counts the subscriptions not yet Closed, dropped ones
	// included: their owners may still hold what was taken.
	open             int
	closed           bool
	slowDisconnected atomic.Uint64
}

// New returns a Broadcaster. startSeq is the stream sequence up to which
// events were stored before it (the writer's checkpoint when it starts):
// a client resuming from before it is told of the gap.
func New(opts Options, startSeq uint64) *Broadcaster {
	opts.fillDefaults()
	return &Broadcaster{opts: opts, ring: make([]*Event, opts.Replay), floor: startSeq, newest: startSeq,
		subs: map[*Subscription]struct{}{}}
}

// Publish adds events, stored and in stream order, to the ring and to the
// queue of every subscriber whose filter they pass. It copies them (one
// allocation for all their data) and never blocks on a subscriber.
func (b *Broadcaster) Publish(events []Event) {
	if len(events) == 0 {
		return
	}
	total := 0
	for i := range events {
		total += len(events[i].Data)
	}
	arena := make([]byte, 0, total)
	copies := make([]Event, len(events))
	encs := make([]encoded, len(events))
	ptrs := make([]*Event, len(events))
	for i := range events {
		e := &events[i]
		c := &copies[i]
		c.Seq, c.ID, c.Type, c.User, c.Author, c.enc = e.Seq, e.ID, e.Type, e.User, e.Author, &encs[i]
		start := len(arena)
		arena = append(arena, e.Data...)
		c.Data = arena[start:len(arena):len(arena)]
		ptrs[i] = c
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	for _, e := range ptrs {
		b.push(e)
		for s := range b.subs {
			if s.wants(e.Type) {
				s.offer(e, b.opts)
			}
		}
	}
}

// push adds e to the ring, evicting the oldest events past the bounds.
func (b *Broadcaster) push(e *Event) {
	for b.n > 0 && (b.n == len(b.ring) || b.ringBytes+e.size() > b.opts.ReplayBytes) {
		old := b.ring[b.start]
		b.ring[b.start] = nil
		b.start = (b.start + 1) % len(b.ring)
		b.n--
		b.ringBytes -= old.size()
		b.floor = old.Seq
	}
	b.ring[(b.start+b.n)%len(b.ring)] = e
	b.n++
	b.ringBytes += e.size()
	b.newest = e.Seq
}

// Subscribe opens a subscription to the events of types (every type when
// empty). With resume, the events after sequence after that the ring
// holds are queued first; if the ring no longer holds every event after
// it, Gap says so. It fails with ErrTooManyClients past MaxClients, and
// ErrClosed once closed.
func (b *Broadcaster) Subscribe(types []string, after uint64, resume bool) (*Subscription, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	// A dropped subscriber counts until it is Closed: its owner may
	// still be writing what it took, so MaxClients bounds that memory too.
	if b.open >= b.opts.MaxClients {
		return nil, ErrTooManyClients
	}
	s := &Subscription{b: b, types: slices.Clone(types), ready: make(chan struct{}, 1)}
	if resume {
		if after < b.floor {
			s.gap = true
			s.oldest = b.floor + 1
		}
		for i := range b.n {
			e := b.ring[(b.start+i)%len(b.ring)]
			if e.Seq > after && s.wants(e.Type) {
				s.queue = append(s.queue, e)
			}
		}
		if len(s.queue) > 0 {
			s.ready <- struct{}{}
		}
	}
	b.subs[s] = struct{}{}
	b.open++
	return s, nil
}

// Close ends every subscription with ErrClosed and refuses new ones.
func (b *Broadcaster) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for s := range b.subs {
		s.end(ErrClosed)
		delete(b.subs, s)
	}
}

// Stats returns the Broadcaster's state.
func (b *Broadcaster) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := Stats{Clients: b.open, MaxClients: b.opts.MaxClients, ReplayEvents: b.n, SlowDisconnects: b.slowDisconnected.Load()}
	if b.n > 0 {
		st.OldestSeq = b.ring[b.start].Seq
		st.NewestSeq = b.newest
	}
	return st
}

// Subscription is one client's view of the tail.
type Subscription struct {
	b     *Broadcaster
	types []string

	// Guarded by b.mu.
	queue       []*Event
	live        int // live (not replayed) events in queue
	liveBytes   int
	err         error
	ready       chan struct{} // holds a token when queue or err changed
	gap         bool
	oldest      uint64
	unsubscribe sync.Once
}

func (s *Subscription) wants(eventType string) bool {
	return len(s.types) == 0 || slices.Contains(s.types, eventType)
}

// offer queues e, or drops the subscription when its queue is full.
// b.mu is held.
func (s *Subscription) offer(e *Event, o Options) {
	if s.err != nil {
		return
	}
	if s.live+1 > o.ClientBuffer || s.liveBytes+e.size() > o.ClientBufferBytes {
		s.b.slowDisconnected.Add(1)
		s.end(ErrSlowClient)
		delete(s.b.subs, s)
		return
	}
	s.queue = append(s.queue, e)
	s.live++
	s.liveBytes += e.size()
	s.signal()
}

// end records err and frees the queue. b.mu is held.
func (s *Subscription) end(err error) {
	s.err = err
	clear(s.queue)
	s.queue = s.queue[:0]
	s.live, s.liveBytes = 0, 0
	s.signal()
}

func (s *Subscription) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Gap reports whether the resume position was older than what the ring
// holds, and the oldest sequence the subscription can deliver.
func (s *Subscription) Gap() (gap bool, oldestSeq uint64) { return s.gap, s.oldest }

// Ready receives a value when Take has something: events, or the end.
func (s *Subscription) Ready() <-chan struct{} { return s.ready }

// Take appends the queued events to dst, oldest first, and empties the
// queue. Once the subscription has ended it returns the reason
// (ErrSlowClient, ErrClosed) and no events.
func (s *Subscription) Take(dst []*Event) ([]*Event, error) {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if s.err != nil {
		return dst, s.err
	}
	dst = append(dst, s.queue...)
	clear(s.queue)
	s.queue = s.queue[:0]
	s.live, s.liveBytes = 0, 0
	return dst, nil
}

// Close ends the subscription; it is idempotent.
func (s *Subscription) Close() {
	s.unsubscribe.Do(func() {
		s.b.mu.Lock()
		defer s.b.mu.Unlock()
		delete(s.b.subs, s)
		s.b.open--
		if s.err == nil {
			s.end(ErrClosed)
		}
	})
}

// WriterHook returns the function to set as writer.Config.OnStored: it
// publishes each stored batch, converting it in a buffer reused from
// batch to batch (the writer calls it from one goroutine).
func (b *Broadcaster) WriterHook() func([]writer.StoredEvent) {
	var buf []Event
	return func(stored []writer.StoredEvent) {
		buf = buf[:0]
		for i := range stored {
			e := &stored[i].Event
			buf = append(buf, Event{Seq: stored[i].Seq, ID: e.ID, Type: e.Type, User: e.User, Author: e.Author, Data: e.Data})
		}
		b.Publish(buf)
		clear(buf)
	}
}
