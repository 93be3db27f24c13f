package jspub

import (
	"sync"
	"time"
)

// pendingTable holds the publishes awaiting their reply, by token. The
// publishing goroutine adds, the reply handler takes, the sweeper
// expires; an entry leaves the table exactly once, so each publish has
// exactly one outcome whatever races between its reply and its timeout.
type pendingTable[T any] struct {
	mu  sync.Mutex
	ops map[uint64]pendingOp[T]
	// closed is set when expire took everything for good: add refuses
	// from then on, so no publish is left pending with no one to end it.
	closed bool
}

type pendingOp[T any] struct {
	op       T
	intended time.Time
	deadline time.Time // a reply after it no longer counts
}

func newPendingTable[T any]() *pendingTable[T] {
	return &pendingTable[T]{ops: map[uint64]pendingOp[T]{}}
}

// add records token's publish; false if the table is closed.
func (t *pendingTable[T]) add(token uint64, p pendingOp[T]) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.ops[token] = p
	return true
}

// take removes and returns token's publish; false if it is not pending
// (already expired, or a reply for someone else's token).
func (t *pendingTable[T]) take(token uint64) (pendingOp[T], bool) {
	t.mu.Lock()
	p, ok := t.ops[token]
	if ok {
		delete(t.ops, token)
	}
	t.mu.Unlock()
	return p, ok
}

// expire removes the publishes whose deadline is not after now and
// appends them to dst; with closing set it removes all of them and closes
// the table.
func (t *pendingTable[T]) expire(dst []pendingOp[T], now time.Time, closing bool) []pendingOp[T] {
	t.mu.Lock()
	all := closing
	t.closed = t.closed || closing
	for tok, p := range t.ops {
		if all || !p.deadline.After(now) {
			dst = append(dst, p)
			delete(t.ops, tok)
		}
	}
	t.mu.Unlock()
	return dst
}

func (t *pendingTable[T]) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.ops)
}
