package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventide/eventide/writer"
)

// Rebuild and catch-up.
//
// A shard writer starts from its checkpoint in this node's store: from
// the stream's first message when the store has never held the shard (an
// empty data directory, or a shard just moved here), so starting a node
// on an empty directory rebuilds its shards from the stream, within the
// stream's retention. Until every shard writer has once caught up, the
// node is not ready: /readyz's "shards" check names each shard still
// behind with its pending messages, and eventide_shard_pending_messages
// and eventide_shard_caught_up say the same per shard.
//
// Caught up means the consumer's pending count (JetStream's NumPending at
// the last stored fetch or idle check) is at most one fetch: under steady
// load a writer is always up to a fetch behind, and requiring zero would
// keep a busy node unready for ever. Once caught up a shard stays so;
// falling behind later is the consumer lag alerts' business, not a reason
// to take a serving node out.

// shardBehind returns nil when shard s, whose writer reports st, is
// caught up for a fetch of fetchBatch, else an error saying how far
// behind it is.
func shardBehind(s int, st writer.Stats, fetchBatch int) error {
	switch {
	case !st.PendingKnown:
		return fmt.Errorf("shard %d: catching up from the stream (applied up to seq %d, pending not counted yet)", s, st.LastAppliedSeq)
	case st.Pending > uint64(fetchBatch):
		return fmt.Errorf("shard %d: catching up from the stream (applied up to seq %d, %d messages behind)", s, st.LastAppliedSeq, st.Pending)
	}
	return nil
}

// Ready returns nil when every running shard writer has caught up once,
// else an error naming the shards still rebuilding and how far behind.
func (sw *shardWriters) Ready() error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	var errs []error
	for _, s := range slices.Sorted(maps.Keys(sw.importing)) {
		errs = append(errs, fmt.Errorf("shard %d: importing a snapshot", s))
	}
	for _, s := range slices.Sorted(maps.Keys(sw.running)) {
		r := sw.running[s]
		if r.caughtUp.Load() {
			continue
		}
		st := r.w.Stats()
		if err := shardBehind(s, st, sw.fetchBatch()); err != nil {
			errs = append(errs, err)
			continue
		}
		r.caughtUp.Store(true)
		sw.logger.Info("shard caught up", "shard", s, "applied_seq", st.LastAppliedSeq)
	}
	return errors.Join(errs...)
}

func (sw *shardWriters) fetchBatch() int {
	if sw.base.FetchBatch > 0 {
		return sw.base.FetchBatch
	}
	return 1000 // writer.DefaultFetchBatch
}

// rebuildCollector serves, per running shard writer, its pending messages
// and whether it has caught up (eventide_shard_*).
type rebuildCollector struct {
	sw                *shardWriters
	pending, caughtUp *prometheus.Desc
}

func newRebuildCollector(sw *shardWriters) *rebuildCollector {
	return &rebuildCollector{sw: sw,
		pending: prometheus.NewDesc("eventide_shard_pending_messages",
			"Messages of the shard's subjects the node's shard writer has not applied yet, as JetStream last counted them: during a rebuild, how far it still has to go.",
			[]string{"shard"}, nil),
		caughtUp: prometheus.NewDesc("eventide_shard_caught_up",
			"1 once the node's writer of the shard has caught up with the stream (within one fetch) since it started, 0 while it rebuilds or catches up; the node is ready only when every owned shard is 1.",
			[]string{"shard"}, nil),
	}
}

func (c *rebuildCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pending
	ch <- c.caughtUp
}

func (c *rebuildCollector) Collect(ch chan<- prometheus.Metric) {
	_ = c.sw.Ready() // latches the shards that caught up since
	c.sw.mu.Lock()
	defer c.sw.mu.Unlock()
	for s, r := range c.sw.running {
		st := r.w.Stats()
		label := strconv.Itoa(s)
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(st.Pending), label)
		up := 0.0
		if r.caughtUp.Load() {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.caughtUp, prometheus.GaugeValue, up, label)
	}
}
