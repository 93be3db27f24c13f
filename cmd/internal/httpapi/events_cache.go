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
	cur, old map[uuid.UUID]*encodedEvent
}

// encodedEvent is one event's fields as read and its JSON.
type encodedEvent struct {
	typ, user, author string
	data, json        []byte
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

// appendEvent appends the JSON of e as a.appendEvent does, from the
// remembered encoding when e is unchanged since it was made.
func (c *encodedEvents) appendEvent(dst []byte, a *api, e *schema.Event) []byte {
	if len(e.Data) > maxEncodedEventData {
		return a.appendEvent(dst, e)
	}
	c.mu.Lock()
	ee := c.cur[e.ID]
	if ee == nil {
		if ee = c.old[e.ID]; ee != nil && ee.matches(e) {
			c.putLocked(e.ID, ee)
		}
	}
	c.mu.Unlock()
	if ee != nil && ee.matches(e) {
		return append(dst, ee.json...)
	}
	start := len(dst)
	dst = a.appendEvent(dst, e)
	// One allocation holds the data and the JSON.
	buf := make([]byte, 0, len(e.Data)+len(dst)-start)
	buf = append(buf, e.Data...)
	buf = append(buf, dst[start:]...)
	ee = &encodedEvent{typ: e.Type, user: e.User, author: e.Author, data: buf[:len(e.Data):len(e.Data)], json: buf[len(e.Data):]}
	c.mu.Lock()
	c.putLocked(e.ID, ee)
	c.mu.Unlock()
	return dst
}

func (c *encodedEvents) putLocked(id uuid.UUID, ee *encodedEvent) {
	if len(c.cur) >= maxEncodedEvents || c.cur == nil {
		c.old, c.cur = c.cur, make(map[uuid.UUID]*encodedEvent, maxEncodedEvents)
	}
	c.cur[id] = ee
}

func (ee *encodedEvent) matches(e *schema.Event) bool {
	return ee.typ == e.Type && ee.user == e.User && ee.author == e.Author && bytes.Equal(ee.data, e.Data)
}
