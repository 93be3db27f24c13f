package fanout

import (
	"math/bits"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// lengths remembers, for a bounded number of timelines, an upper bound
// of how many rows each holds, so that chunks read a timeline to trim it
// only once it has grown Options.TrimEvery rows past its cap, not at
// every post (a trim check reads the cap's worth of rows: with full
// timelines, checking one in 64 copies doubled the fan-out's CPU per
// row).
//
// It is memory only, and only ever an optimization: a timeline it does
// not know (not pushed to since the process started, or evicted) starts
// from a made-up bound between 1 and TimelineCap+TrimEvery
// (Fanout.untrackedStart), so it is checked within that many copies, and
// that check teaches the table its length. From then on the
// bound stays an upper bound as long as every row added to a timeline is
// counted: chunks count each copy they push (a redone chunk's copies
// twice, which only overestimates), follows count their backfill (into
// an untracked timeline, whose earlier length is unknown, a backfill sets
// the bound to one copy short of a check: Fanout.follow); rows
// removed (deletes, unfollows, expiry) are not subtracted, which only
// makes a check come sooner. A check whose batch is never applied is
// forgotten (Fanout.discardChunk), so the table never believes in a trim
// that did not happen.
//
// The table is a fixed array of 2-way buckets of 8-byte slots (a 32-bit
// fingerprint of the user's xxhash and the bound), updated with atomics:
// Options.TrimTracked slots, allocated once, whatever the number of
// timelines. A timeline whose bucket is full evicts one of its two
// occupants, which then counts as unknown.
//
// Where the platform has anonymous mmap (lengths_mmap.go), the slots are
// mapped from the OS, outside the Go heap, and unmapped once the table
// is unreachable (runtime.AddCleanup): on the heap, the collector counted
// the 4 MiB table in the live heap, and its goal (twice the live heap,
// GOGC=100) gave the rest of the process 4 MiB more to grow into. Its
// pages are resident once chunks have touched them (a 1,000,000-follower
// post touches them all), as before. Every method keeps the table
// reachable until its last use of a slot (runtime.KeepAlive).
type lengths struct {
	slots []atomic.Uint64
	mask  uint64 // bucket index mask (len(slots)/2 - 1)
}

// maxLength caps a stored bound (it only grows past the threshold when
// checks fail).
const maxLength = 1<<31 - 1

func newLengths(n int) *lengths {
	if n < 2 {
		n = 2
	}
	n = 1 << bits.Len(uint(n-1)) // a power of two
	t := &lengths{mask: uint64(n/2 - 1)}
	if m := mapTable(n * 8); m != nil {
		// Page-aligned, so every slot is 8-byte aligned for its atomics.
		t.slots = unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(unsafe.SliceData(m))), n)
		runtime.AddCleanup(t, unmapTable, m)
	} else {
		t.slots = make([]atomic.Uint64, n)
	}
	return t
}

// fingerprint is the slot tag of hash h: never 0, which marks an empty
// slot.
func fingerprint(h uint64) uint64 {
	fp := h >> 32
	if fp == 0 {
		fp = 1
	}
	return fp
}

func (t *lengths) bucket(h uint64) (*atomic.Uint64, *atomic.Uint64) {
	i := (h & t.mask) * 2
	return &t.slots[i], &t.slots[i+1]
}

// add counts n rows added to the timeline of hash h and returns the new
// bound; known is false (and nothing is counted) if the table does not
// know the timeline.
func (t *lengths) add(h uint64, n uint32) (bound uint32, known bool) {
	fp := fingerprint(h)
	a, b := t.bucket(h)
	for _, s := range [2]*atomic.Uint64{a, b} {
		for {
			v := s.Load()
			if v>>32 != fp {
				break
			}
			l := min(uint64(uint32(v))+uint64(n), maxLength)
			if s.CompareAndSwap(v, fp<<32|l) {
				runtime.KeepAlive(t)
				return uint32(l), true
			}
		}
	}
	runtime.KeepAlive(t)
	return 0, false
}

// touchSink keeps touch's loads from being optimized away.
var touchSink atomic.Uint64

// touch loads the buckets of hashes, so that the adds that follow find
// them in the cache: independent loads overlap their cache misses, an
// add's compare-and-swap does not.
func (t *lengths) touch(hashes []uint64) {
	var x uint64
	for _, h := range hashes {
		a, _ := t.bucket(h)
		x ^= a.Load()
	}
	runtime.KeepAlive(t)
	touchSink.Store(x)
}

// set records that the timeline of hash h holds at most bound rows.
func (t *lengths) set(h uint64, bound uint32) {
	defer runtime.KeepAlive(t)
	fp := fingerprint(h)
	v := fp<<32 | uint64(min(bound, maxLength))
	a, b := t.bucket(h)
	for _, s := range [2]*atomic.Uint64{a, b} {
		if s.Load()>>32 == fp {
			s.Store(v)
			return
		}
	}
	for _, s := range [2]*atomic.Uint64{a, b} {
		if s.CompareAndSwap(0, v) {
			return
		}
	}
	// Both taken by others: evict one, chosen by a bit of the hash the
	// bucket index does not use.
	if h&(1<<31) == 0 {
		a.Store(v)
	} else {
		b.Store(v)
	}
}

// forget makes the timeline of hash h unknown.
func (t *lengths) forget(h uint64) {
	defer runtime.KeepAlive(t)
	fp := fingerprint(h)
	a, b := t.bucket(h)
	for _, s := range [2]*atomic.Uint64{a, b} {
		if v := s.Load(); v>>32 == fp {
			s.CompareAndSwap(v, 0)
		}
	}
}
