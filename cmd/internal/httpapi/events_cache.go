package httpapi

import (
	"bytes"
	"sync"

	"github.com/google/uuid"

	"github.com/eventide/eventide/bucket/schema"
)

// encodedEvents remembers the JSON of the events /v1/events answered
// last, so a dashboard polling "the latest 50 of a type" encodes only the
// events that are new since its last poll: consecutive answers share most
// of their events, and encoding one (its data checked and escaped, its id
// and time formatted) was about a fifth of the all-in-one's CPU per
// latest-50 request (BENCHMARKS.md, session s11-query).
//
// An entry is used only when the event read now is the one it was made
// from, byte for byte (type, user, author and data; the id carries the
// time), so an event rewritten under the same id is encoded again, and
// the answer is always exactly appendEvent's. Nothing is served from it
// that storage did not return for this request: it holds encodings, not
// answers.
//
// Two generations of at most maxEncodedEvents entries bound its memory:
// when the current one fills, it becomes the old one and the old one is
// dropped; an entry found in the old one moves to the current one.
type encodedEvents struct {
	mu       sync.Mutex
	cur, old map[uuid.UUID]encodedEvent
}

// encodedEvent is one event's fields as read and its JSON, in one buffer:
// type, user, author, data, then the JSON. A lookup reads the map's slot
// and this buffer, one after the other in memory: with the fields in
// allocations of their own (the strings were the decoded reply's), a
// remembered event cost about as much as encoding it again, in cache
// misses (BENCHMARKS.md, session s12-split).
type encodedEvent struct {
	buf                              []byte // nil: none
	userAt, authorAt, dataAt, jsonAt uint32
}

const (
	// maxEncodedEvents is the most entries of one generation: two hold
	// the latest 50 of some 160 types, about 3 MiB at 350-byte events
	// (at most about 20 MiB, every event with 1 KiB of data).
	maxEncodedEvents = 4096
	// maxEncodedEventData is the largest event data remembered: a rare
	// big event is encoded each time rather than held.
	maxEncodedEventData = 1 << 10
)

// appendEvents appends the JSON of events, comma-separated, as
// a.appendEvent does each, from the remembered encodings of those
// unchanged since they were made. It looks every event up under one lock
// and remembers the new encodings under a second: taking the lock twice
// per event, as a 50-event answer did, was a third of this cache's cost
// (BENCHMARKS.md, session s12-split).
func (c *encodedEvents) appendEvents(dst []byte, a *api, events []schema.Event) []byte {
	var stack [64]encodedEvent
	found := stack[:0]
	if len(events) > len(stack) {
		found = make([]encodedEvent, 0, len(events))
	}
	c.mu.Lock()
	for i := range events {
		e := &events[i]
		var ee encodedEvent
		if len(e.Data) <= maxEncodedEventData {
			ok := false
			if ee, ok = c.cur[e.ID]; !ok {
				if ee, ok = c.old[e.ID]; ok && ee.matches(e) {
					c.putLocked(e.ID, ee)
				}
			}
		}
		found = append(found, ee)
	}
	c.mu.Unlock()
	made := 0
	for i := range events {
		if i > 0 {
			dst = append(dst, ',')
		}
		e := &events[i]
		if ee := &found[i]; ee.buf != nil && ee.matches(e) {
			dst = append(dst, ee.json()...)
			ee.buf = nil
			continue
		}
		start := len(dst)
		dst = a.appendEvent(dst, e)
		found[i] = encodedEvent{}
		if len(e.Data) <= maxEncodedEventData {
			found[i] = newEncodedEvent(e, dst[start:])
			made++
		}
	}
	if made > 0 {
		c.mu.Lock()
		for i := range found {
			if found[i].buf != nil {
				c.putLocked(events[i].ID, found[i])
			}
		}
		c.mu.Unlock()
	}
	return dst
}

// newEncodedEvent remembers e and its JSON, in one allocation.
func newEncodedEvent(e *schema.Event, json []byte) encodedEvent {
	buf := make([]byte, 0, len(e.Type)+len(e.User)+len(e.Author)+len(e.Data)+len(json))
	buf = append(buf, e.Type...)
	ee := encodedEvent{userAt: uint32(len(buf))}
	buf = append(buf, e.User...)
	ee.authorAt = uint32(len(buf))
	buf = append(buf, e.Author...)
	ee.dataAt = uint32(len(buf))
	buf = append(buf, e.Data...)
	ee.jsonAt = uint32(len(buf))
	ee.buf = append(buf, json...)
	return ee
}

func (c *encodedEvents) putLocked(id uuid.UUID, ee encodedEvent) {
	if len(c.cur) >= maxEncodedEvents || c.cur == nil {
		c.old, c.cur = c.cur, make(map[uuid.UUID]encodedEvent, maxEncodedEvents)
	}
	c.cur[id] = ee
}

func (ee *encodedEvent) matches(e *schema.Event) bool {
	b := ee.buf
	return string(b[:ee.userAt]) == e.Type && string(b[ee.userAt:ee.authorAt]) == e.User &&
		string(b[ee.authorAt:ee.dataAt]) == e.Author && bytes.Equal(b[ee.dataAt:ee.jsonAt], e.Data)
}

func (ee *encodedEvent) json() []byte { return ee.buf[ee.jsonAt:] }
