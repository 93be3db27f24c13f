package fanout

import (
	"context"
	"time"
)

// memtablePoll is how often a chunk held back by waitForMemtables looks
// at the engine's memtables again. A flush of a default 16 MiB memtable
// takes tens of milliseconds, so the wait overshoots its end by a few
// percent at most.
const memtablePoll = time.Millisecond

// waitForMemtables holds a chunk back while the storage engine's
// memtables (the mutable one and the frozen ones waiting for their
// flush: storage.DB.MemtableUsage) hold more than Options.MaxMemtableBytes and a frozen one is
// being flushed: the flush unmaps it, and the chunk then goes into the
// mutable memtable instead of growing it while the frozen one is still
// resident. Without a frozen memtable it never waits (nothing would
// shrink the memtables), nor while the engine reports a failure (the
// chunk's Apply reports it). It returns ctx's error if ctx ends first.
func (f *Fanout) waitForMemtables(ctx context.Context) error {
	limit := f.opts.MaxMemtableBytes
	if limit <= 0 {
		return nil
	}
	var start time.Time
	var t *time.Timer
	for {
		bytes, frozen := f.db.MemtableUsage()
		if frozen == 0 || bytes <= limit || f.db.Health().Err != nil {
			break
		}
		if start.IsZero() {
			start = time.Now()
			t = time.NewTimer(memtablePoll)
			defer t.Stop()
			f.m.memtableWaits.Inc()
			defer f.m.memtableWaits.Dec()
		} else {
			t.Reset(memtablePoll)
		}
		select {
		case <-ctx.Done():
			f.m.memtableWait.Add(time.Since(start).Seconds())
			return ctx.Err()
		case <-t.C:
		}
	}
	if !start.IsZero() {
		f.m.memtableWait.Add(time.Since(start).Seconds())
	}
	return nil
}
