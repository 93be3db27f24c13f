package fanout

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventide/eventide/storage"
	"github.com/eventide/eventide/storage/vfs"
)

// flushHoldFS holds every SSTable's creation (a flush's or a
// compaction's) while held, so a frozen memtable stays frozen.
type flushHoldFS struct {
	vfs.FS
	mu      sync.Mutex
	held    bool
	release chan struct{}
}

func (h *flushHoldFS) Create(name string) (vfs.File, error) {
	h.mu.Lock()
	held := h.held
	h.mu.Unlock()
	if held && strings.Contains(name, ".sst") {
		<-h.release
	}
	return h.FS.Create(name)
}

func (h *flushHoldFS) hold() {
	h.mu.Lock()
	h.held = true
	h.mu.Unlock()
}

func (h *flushHoldFS) unhold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held {
		h.held = false
		close(h.release)
	}
}

// TestChunksWaitForFlush holds the engine's flushes during a post's
// fan-out: the chunks stop, and wait, once a frozen memtable is waiting
// for its flush and the memtables hold more than MaxMemtableBytes,
// instead of filling memtables up to the engine's stall limit (two
// frozen); Run still ends while they wait; once the flushes go on, every
// follower gets the post. MaxMemtableBytes is left at its default, the
// store's own MemtableSize (here 256 KiB, not the engine's default).
func TestChunksWaitForFlush(t *testing.T) {
	const memtableSize = 256 << 10
	const followers = 6000
	o := DefaultOptions()
	o.ChunkSize = 100
	o.LargeThreshold = 1 << 40
	fs := &flushHoldFS{FS: vfs.Default, release: make(chan struct{})}
	e := newEnvStorage(t, o, func(so *storage.Options) {
		so.FS = fs
		so.MemtableSize = memtableSize
	})
	t.Cleanup(fs.unhold) // before the store's Close (cleanups run last first)
	e.followMany("star", followers)
	if err := e.db.Flush(); err != nil {
		t.Fatal(err)
	}
	fs.hold()

	run := func() (context.CancelFunc, chan error) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- e.f.Run(ctx) }()
		return cancel, done
	}
	cancel, done := run()
	defer func() { cancel() }()
	e.apply(e.post("star", "p", "hello"))

	deadline := time.Now().Add(30 * time.Second)
	for e.counter("eventide_fanout_chunks_waiting_for_flush") == 0 {
		m := e.db.Metrics()
		if m.FrozenMemtables >= storage.DefaultOptions().MaxImmutableMemtables {
			t.Fatalf("the fan-out filled %d frozen memtables (%d bytes in all) while a flush was held", m.FrozenMemtables, m.MemtableBytes)
		}
		if rowsWritten(e.f) >= followers {
			t.Fatalf("the fan-out wrote all %d rows while a flush was held: it never waited", followers)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no chunk waits for the held flush after 30 s (%d rows written, %d frozen memtables)", int(rowsWritten(e.f)), m.FrozenMemtables)
		}
		time.Sleep(time.Millisecond)
	}
	m := e.db.Metrics()
	if m.FrozenMemtables != 1 || m.MemtableBytes > 2*memtableSize {
		t.Fatalf("chunks wait with %d frozen memtables and %d bytes in memtables, want 1 and at most %d", m.FrozenMemtables, m.MemtableBytes, 2*memtableSize)
	}
	written := rowsWritten(e.f)

	// Run ends while its chunk waits.
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not end within 30 s of its context while a chunk waited for a flush")
	}
	if n := rowsWritten(e.f); n != written {
		t.Fatalf("%v rows written after the wait began, want %v", n, written)
	}

	fs.unhold()
	cancel, done = run()
	defer func() { cancel(); <-done }()
	for rowsWritten(e.f) < followers {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d rows written after the flush was released", int(rowsWritten(e.f)), followers)
		}
		time.Sleep(time.Millisecond)
	}
	for _, i := range []int{0, followers / 2, followers - 1} {
		if got := e.timelineLabels(fmt.Sprintf("f%06d", i), 20); len(got) != 1 || got[0] != "p" {
			t.Fatalf("timeline of follower %d is %v, want [p]", i, got)
		}
	}
}

// TestMemtableWaitEndsWithFlush: waitForMemtables, holding a chunk back
// while a frozen memtable waits for its flush, returns once the flush
// drops it (storage's notice, not a poll), and returns its context's
// error when the context ends first, the flush still held.
func TestMemtableWaitEndsWithFlush(t *testing.T) {
	o := DefaultOptions()
	o.MaxMemtableBytes = 1 // any frozen memtable is over it
	fs := &flushHoldFS{FS: vfs.Default, release: make(chan struct{})}
	e := newEnvStorage(t, o, func(so *storage.Options) { so.FS = fs })
	t.Cleanup(fs.unhold) // before the store's Close (cleanups run last first)
	e.followMany("star", 10)
	fs.hold()
	flushed := make(chan error, 1)
	go func() { flushed <- e.db.Flush() }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, frozen := e.db.MemtableUsage(); frozen == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no frozen memtable 30 s after Flush began")
		}
	}
	// wait runs waitForMemtables and returns its result once it returns,
	// after checking that it waited (the gauge of waiting chunks).
	wait := func(ctx context.Context) chan error {
		done := make(chan error, 1)
		go func() { done <- e.f.waitForMemtables(ctx) }()
		for deadline := time.Now().Add(30 * time.Second); e.counter("eventide_fanout_chunks_waiting_for_flush") != 1; time.Sleep(time.Millisecond) {
			select {
			case err := <-done:
				t.Fatalf("waitForMemtables returned %v without waiting for the held flush", err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatal("waitForMemtables is not waiting 30 s after it began")
			}
		}
		return done
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := wait(ctx)
	cancel()
	select {
	case err := <-done:
		if err != context.Canceled {
			t.Fatalf("waitForMemtables with its context cancelled: %v, want %v", err, context.Canceled)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("waitForMemtables did not return within 30 s of its context's end")
	}

	done = wait(context.Background())
	fs.unhold()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("waitForMemtables did not return within 30 s of the flush's release")
	}
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if _, frozen := e.db.MemtableUsage(); frozen != 0 {
		t.Fatalf("%d frozen memtables after the wait, want none", frozen)
	}
	if n := e.counter("eventide_fanout_chunks_waiting_for_flush"); n != 0 {
		t.Fatalf("%v chunks still counted as waiting", n)
	}
}
