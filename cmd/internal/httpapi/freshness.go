package httpapi

import (
	"slices"
	"sync/atomic"
	"time"
)

// ShardFreshness is what one shard's stored data reflects: how far into
// the event stream its consumer has applied, and how far behind it is.
type ShardFreshness struct {
	Shard int
	// AppliedSeq is the stream sequence up to which every message is
	// stored (the consumer's checkpoint).
	AppliedSeq uint64
	// AppliedTime is when the stream stored the message at AppliedSeq;
	// zero when unknown.
	AppliedTime time.Time
	// Pending is how many messages of the consumer's subjects follow what
	// it holds, as JetStream last counted them; meaningful only when
	// PendingKnown.
	Pending      uint64
	PendingKnown bool
}

// FreshnessSource reports, per shard, what the answers read from storage
// reflect. It must be safe to call from any goroutine, and cheap: every
// data response calls it. Today a node is one shard (shard 0), fed by one
// consumer.
type FreshnessSource interface {
	Freshness() []ShardFreshness
}

// FreshnessFunc adapts a function to a FreshnessSource.
type FreshnessFunc func() []ShardFreshness

// Freshness calls f.
func (f FreshnessFunc) Freshness() []ShardFreshness { return f() }

// freshnessJSON is the "freshness" member of every data response.
type freshnessJSON struct {
	Shards []shardFreshnessJSON `json:"shards"`
}

type shardFreshnessJSON struct {
	Shard       int     `json:"shard"`
	AppliedSeq  uint64  `json:"applied_seq"`
	AppliedTime string  `json:"applied_time,omitempty"`
	Pending     *uint64 `json:"pending,omitempty"`
}

// freshnessOf is what src reports, read before the query runs so the
// answer reflects at least that much; nil without a source.
func freshnessOf(src FreshnessSource) *freshnessJSON {
	if src == nil {
		return nil
	}
	shards := src.Freshness()
	out := &freshnessJSON{Shards: make([]shardFreshnessJSON, 0, len(shards))}
	for _, s := range shards {
		j := shardFreshnessJSON{Shard: s.Shard, AppliedSeq: s.AppliedSeq}
		if !s.AppliedTime.IsZero() {
			j.AppliedTime = s.AppliedTime.UTC().Format(time.RFC3339Nano)
		}
		if s.PendingKnown {
			p := s.Pending
			j.Pending = &p
		}
		out.Shards = append(out.Shards, j)
	}
	return out
}

// freshnessMemo remembers the last positions a source reported and their
// JSON form. Every data response reports them, and they change far less
// often than requests arrive (cmd/query refreshes them every 250 ms), so
// a request finding the same positions shares the last one's
// freshnessJSON instead of formatting a time per shard again. The
// freshnessJSON it returns is shared: read it, never change it.
type freshnessMemo struct {
	last atomic.Pointer[freshnessMemoEntry]
}

type freshnessMemoEntry struct {
	shards []ShardFreshness
	json   *freshnessJSON
}

// of is freshnessOf(src), shared with the previous call when src reports
// the same positions.
func (m *freshnessMemo) of(src FreshnessSource) *freshnessJSON {
	if src == nil {
		return nil
	}
	shards := src.Freshness()
	if e := m.last.Load(); e != nil && slices.Equal(e.shards, shards) {
		return e.json
	}
	e := &freshnessMemoEntry{shards: slices.Clone(shards)}
	e.json = freshnessOf(FreshnessFunc(func() []ShardFreshness { return e.shards }))
	m.last.Store(e)
	return e.json
}
