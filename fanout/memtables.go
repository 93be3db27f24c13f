package fanout

import (
	"context"
	"time"
)

// waitForMemtables holds a chunk back while the storage engine's
// memtables (the mutable one and the frozen ones waiting for their
// flush: storage.DB.MemtableUsageChange) hold more than
// Options.MaxMemtableBytes and a frozen one is being flushed: the flush
// unmaps it, and the chunk then goes into the
// mutable memtable instead of growing it while the frozen one is still
// resident. Without a frozen memtable it never waits (nothing would
// shrink the memtables), nor while the engine reports a failure (the
// chunk's Apply reports it). It waits on the engine's notice that the
// memtables may have shrunk (a flush ended), not by polling. It returns
// ctx's error if ctx ends first.
func (f *Fanout) waitForMemtables(ctx context.Context) error {
	limit := f.opts.MaxMemtableBytes
	if limit <= 0 {
		return nil
	}
	var start time.Time
	for {
		// changed is closed by the engine when a flush drops a frozen
		// memtable (or on a failure, or Close): the figures are read
		// again then, not polled.
		bytes, frozen, changed := f.db.MemtableUsageChange()
		if frozen == 0 || bytes <= limit || f.db.Health().Err != nil {
			break
		}
		if start.IsZero() {
			start = time.Now()
			f.m.memtableWaits.Inc()
			defer f.m.memtableWaits.Dec()
		}
		select {
		case <-ctx.Done():
			f.m.memtableWait.Add(time.Since(start).Seconds())
			return ctx.Err()
		case <-changed:
		}
	}
	if !start.IsZero() {
		f.m.memtableWait.Add(time.Since(start).Seconds())
	}
	return nil
}
