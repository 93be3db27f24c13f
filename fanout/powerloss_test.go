package fanout

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/eventide/eventide/storage"
	"github.com/eventide/eventide/storage/vfs"
)

// workChunks works up to n pending chunks and returns how many it worked.
func (e *env) workChunks(n int) int {
	e.t.Helper()
	for i := 0; i < n; i++ {
		refs, err := e.f.PendingChunks(context.Background(), 1)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(refs) == 0 {
			return i
		}
		if _, err := e.f.WorkChunk(context.Background(), refs[0]); err != nil {
			e.t.Fatal(err)
		}
	}
	return n
}

// powerLoss closes the store and reopens it on what a power loss (below
// the page cache) at this moment would have left: exactly the durable
// state with rng nil, else some of the unsynced writes too.
func (e *env) powerLoss(m *vfs.MemFS, rng *rand.Rand) *vfs.MemFS {
	e.t.Helper()
	crashed := m.CrashClone(rng)
	e.db.Close()
	e.storageOpts = memStorage(crashed)
	e.open()
	return crashed
}

func memStorage(m *vfs.MemFS) func(*storage.Options) {
	return func(so *storage.Options) {
		so.FS = m
		so.WALSyncInterval = time.Hour // only synced Applies fsync
	}
}

// TestPowerLossRedoesUnsyncedChunks: chunk batches do not wait for the
// WAL's fsync (storage.DB.ApplyNoSync), so a power loss may lose the last
// chunks; each is lost whole with its cursor, and the resumed fan-out
// redoes exactly those: every follower ends with the post once. A synced
// write after the chunks (the next stream message's batch) makes them
// durable.
func TestPowerLossRedoesUnsyncedChunks(t *testing.T) {
	o := DefaultOptions()
	o.ChunkSize = 100
	o.Workers, o.Shards = 1, 1 // one part: chunks of 100 in follower order
	const followers = 1000
	// Redoing the job from its start works this many chunks.
	chunks := 0
	delivered := func(e *env) int {
		t.Helper()
		n := 0
		for i := 0; i < followers; i++ {
			n += e.rawTimelineRows(fmt.Sprintf("f%06d", i))
		}
		return n
	}
	checkAll := func(e *env) {
		t.Helper()
		if refs, err := e.f.PendingChunks(context.Background(), 10); err != nil || len(refs) != 0 {
			t.Fatalf("pending chunks after the resume: %v %v", refs, err)
		}
		for i := 0; i < followers; i++ {
			u := fmt.Sprintf("f%06d", i)
			if n := e.rawTimelineRows(u); n != 1 {
				t.Fatalf("%s stores %d rows, want 1", u, n)
			}
		}
	}
	setup := func() (*env, *vfs.MemFS) {
		m := vfs.NewCrashableMem()
		e := newEnvStorage(t, o, memStorage(m))
		e.followMany("star", followers)
		e.apply(e.post("star", "p", "hello"))
		return e, m
	}

	{
		e, _ := setup()
		chunks = e.work()
		checkAll(e)
	}

	t.Run("unsynced chunks are lost and redone", func(t *testing.T) {
		e, m := setup()
		if n := e.workChunks(4); n != 4 {
			t.Fatalf("worked %d chunks, want 4", n)
		}
		if n := delivered(e); n != 4*o.ChunkSize {
			t.Fatalf("before the crash %d rows are delivered, want %d", n, 4*o.ChunkSize)
		}
		e.powerLoss(m, nil)
		if n := delivered(e); n != 0 {
			t.Fatalf("%d rows of the chunks survived a power loss without a later sync: they were fsynced", n)
		}
		if n := e.work(); n != chunks {
			t.Errorf("after the crash %d chunks were worked, want all %d again", n, chunks)
		}
		checkAll(e)
	})

	t.Run("a later synced batch makes them durable", func(t *testing.T) {
		e, m := setup()
		e.workChunks(4)
		e.apply(e.follow("someone", "else")) // a synced batch after the chunks
		e.powerLoss(m, nil)
		if n := e.work(); n != chunks-4 {
			t.Errorf("after the crash %d chunks were worked, want the %d not yet done", n, chunks-4)
		}
		checkAll(e)
	})

	t.Run("writeback of part of the unsynced chunks", func(t *testing.T) {
		for seed := range uint64(4) {
			e, m := setup()
			e.workChunks(6)
			e.powerLoss(m, rand.New(rand.NewPCG(seed, 3)))
			if n := e.work(); n < chunks-6 || n > chunks {
				t.Errorf("seed %d: after the crash %d chunks were worked, want %d to %d", seed, n, chunks-6, chunks)
			}
			checkAll(e)
		}
	})
}
