package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/eventide/eventide/internal/tail"
	"github.com/eventide/eventide/storage"
)

// StatsSource answers /v1/stats. The local one (StatsFunc over the
// process's storage.DB and consumers) reads counters only; a remote one
// (cmd/query) asks the storage processes. It must honour ctx's deadline.
type StatsSource interface {
	Stats(ctx context.Context) (Stats, error)
}

// StatsFunc adapts a function to a StatsSource.
type StatsFunc func(ctx context.Context) (Stats, error)

// Stats calls f.
func (f StatsFunc) Stats(ctx context.Context) (Stats, error) { return f(ctx) }

// Stats is the body of /v1/stats (api/openapi.yaml, schema Stats). Its
// fields are exported with their JSON names so that a remote source can
// send it as is.
type Stats struct {
	Storage   StorageStats    `json:"storage"`
	Consumers []ConsumerStats `json:"consumers"`
	// Tail is the live tail's, when the server has one.
	Tail *TailStats `json:"tail,omitempty"`
	// Nodes is each storage node's own storage, through cmd/query (whose
	// Storage is then their sum); absent from a process reading its own
	// storage.
	Nodes []NodeStats `json:"nodes,omitempty"`
}

// NodeStats is one storage node's part of a query service's Stats.
type NodeStats struct {
	Node    string       `json:"node"`
	Shards  []int        `json:"shards"`
	Storage StorageStats `json:"storage"`
}

// StorageStats is the storage engine's part of Stats: storage.Metrics.
type StorageStats struct {
	Tables                 []TableStats `json:"tables"`
	MemtableBytes          int64        `json:"memtable_bytes"`
	FrozenMemtables        int          `json:"frozen_memtables"`
	WALBytes               int64        `json:"wal_bytes"`
	Batches                int64        `json:"batches"`
	WALSyncs               int64        `json:"wal_syncs"`
	Flushes                int64        `json:"flushes"`
	Compactions            int64        `json:"compactions"`
	CompactionsRunning     int          `json:"compactions_running"`
	CompactionReadBytes    int64        `json:"compaction_read_bytes"`
	CompactionWrittenBytes int64        `json:"compaction_written_bytes"`
	PurgedTombstones       int64        `json:"purged_tombstones"`
	DroppedSSTables        int64        `json:"dropped_sstables"`
	// CompactionPacedSeconds is the time background compactions waited
	// for the compaction throughput limit (--compaction-throughput).
	CompactionPacedSeconds float64 `json:"compaction_paced_seconds"`
	WriteStalls            int64   `json:"write_stalls"`
	WriteStallSeconds      float64 `json:"write_stall_seconds"`
	Reads                  int64   `json:"reads"`
	TombstonesRead         int64   `json:"tombstones_read"`
	BlockCacheHits         int64   `json:"block_cache_hits"`
	BlockCacheMisses       int64   `json:"block_cache_misses"`
	BlockCacheBytes        int64   `json:"block_cache_bytes"`
	// BlockCacheHitRatio is hits / (hits + misses), absent before the
	// first lookup.
	BlockCacheHitRatio *float64 `json:"block_cache_hit_ratio,omitempty"`
}

// TableStats is one table's SSTables.
type TableStats struct {
	Name       string `json:"name"`
	Compaction string `json:"compaction"`
	SSTables   int    `json:"sstables"`
	Bytes      int64  `json:"bytes"`
	Partitions int64  `json:"partitions"`
	Cells      int64  `json:"cells"`
	Tombstones int64  `json:"tombstones"`
	Compacting int    `json:"compacting"`
	// Windows: a time-window table's SSTables per window, newest first.
	Windows []WindowStats `json:"windows,omitempty"`
}

// WindowStats is one window of a time-window table.
type WindowStats struct {
	Start    string `json:"start"`
	SSTables int    `json:"sstables"`
	Bytes    int64  `json:"bytes"`
}

// ConsumerStats is what one consumer feeding storage has applied.
type ConsumerStats struct {
	Name string `json:"name"`
	// Node is the storage node running it, through cmd/query.
	Node        string  `json:"node,omitempty"`
	Shard       int     `json:"shard"`
	AppliedSeq  uint64  `json:"applied_seq"`
	AppliedTime string  `json:"applied_time,omitempty"`
	Pending     *uint64 `json:"pending,omitempty"`
}

// TailStats is the live tail's state.
type TailStats struct {
	Clients        int    `json:"clients"`
	MaxClients     int    `json:"max_clients"`
	ReplayEvents   int    `json:"replay_events"`
	OldestSeq      uint64 `json:"oldest_seq"`
	NewestSeq      uint64 `json:"newest_seq"`
	SlowDisconnect uint64 `json:"slow_disconnects"`
}

// StorageStatsOf converts a storage.Metrics snapshot.
func StorageStatsOf(m storage.Metrics) StorageStats {
	out := StorageStats{
		Tables:          make([]TableStats, 0, len(m.Tables)),
		MemtableBytes:   m.MemtableBytes,
		FrozenMemtables: m.FrozenMemtables,
		WALBytes:        m.WALBytes, Batches: m.Batches, WALSyncs: m.WALSyncs, Flushes: m.Flushes,
		Compactions: m.Compactions, CompactionReadBytes: m.CompactionRead, CompactionWrittenBytes: m.CompactionWritten,
		PurgedTombstones: m.PurgedTombstones, DroppedSSTables: m.DroppedSSTables,
		CompactionPacedSeconds: m.CompactionPacedTime.Seconds(),
		WriteStalls:            m.WriteStalls, WriteStallSeconds: m.WriteStallTime.Seconds(),
		Reads: m.Reads, TombstonesRead: m.TombstonesRead,
		BlockCacheHits: m.BlockCacheHits, BlockCacheMisses: m.BlockCacheMisses, BlockCacheBytes: m.BlockCacheBytes,
	}
	if lookups := m.BlockCacheHits + m.BlockCacheMisses; lookups > 0 {
		ratio := float64(m.BlockCacheHits) / float64(lookups)
		out.BlockCacheHitRatio = &ratio
	}
	for _, t := range m.Tables {
		ts := TableStats{Name: t.Name, Compaction: string(t.Compaction), SSTables: t.SSTables,
			Bytes: t.Bytes, Partitions: t.Partitions, Cells: t.Cells, Tombstones: t.Tombstones, Compacting: t.Compacting}
		for _, w := range t.Windows {
			ts.Windows = append(ts.Windows, WindowStats{Start: w.Start.Format(time.RFC3339), SSTables: w.SSTables, Bytes: w.Bytes})
		}
		out.Tables = append(out.Tables, ts)
		if t.Compacting > 0 {
			out.CompactionsRunning++
		}
	}
	return out
}

// TailStatsOf converts a live tail's state.
func TailStatsOf(st tail.Stats) *TailStats {
	return &TailStats{Clients: st.Clients, MaxClients: st.MaxClients, ReplayEvents: st.ReplayEvents,
		OldestSeq: st.OldestSeq, NewestSeq: st.NewestSeq, SlowDisconnect: st.SlowDisconnects}
}

// ConsumerStatsOf converts a consumer's freshness.
func ConsumerStatsOf(name string, f ShardFreshness) ConsumerStats {
	c := ConsumerStats{Name: name, Shard: f.Shard, AppliedSeq: f.AppliedSeq}
	if !f.AppliedTime.IsZero() {
		c.AppliedTime = f.AppliedTime.UTC().Format(time.RFC3339Nano)
	}
	if f.PendingKnown {
		p := f.Pending
		c.Pending = &p
	}
	return c
}

var statsParams = []string{"timeout", "complete"}

func (a *api) stats(w http.ResponseWriter, r *http.Request) {
	if _, pr := parseParams(r.URL.RawQuery, statsParams); pr != nil {
		writeProblem(w, *pr)
		return
	}
	if a.statsSource == nil {
		writeProblem(w, problem{Type: problemAboutBlank, Status: http.StatusNotFound,
			Detail: "this server was started without storage statistics; ask a storage process (cmd/ingest)"})
		return
	}
	st, err := a.statsSource.Stats(r.Context())
	if err != nil {
		a.queryFailed(w, r, err)
		return
	}
	if st.Consumers == nil {
		st.Consumers = []ConsumerStats{}
	}
	if st.Storage.Tables == nil {
		st.Storage.Tables = []TableStats{}
	}
	a.writeJSON(w, r, st)
}
