package main

import (
	"context"
	"slices"

	"github.com/eventide/eventide/cmd/internal/httpapi"
	"github.com/eventide/eventide/internal/queryrpc"
	"github.com/eventide/eventide/internal/tail"
	"github.com/eventide/eventide/storage"
)

// remoteStats answers /v1/stats from every storage node: storage is the
// nodes' sum (tables merged by name), nodes each node's own, consumers
// one per shard with the node that runs it (as the freshness of the data
// routes), tail this process's relay. A node that does not answer is
// left out and its shards make the answer partial (queryrpc.Client.Stats
// records them under the request's TrackMisses context), as a slice of
// its shards would.
type remoteStats struct {
	client *queryrpc.Client
	owners []string
	tail   *tail.Broadcaster // nil without a live tail
}

func (rs *remoteStats) Stats(ctx context.Context) (httpapi.Stats, error) {
	nodes, _ := rs.client.Stats(ctx)
	names := make([]string, 0, len(nodes))
	for name := range nodes {
		names = append(names, name)
	}
	slices.Sort(names)
	var sum storage.Metrics
	st := httpapi.Stats{Nodes: make([]httpapi.NodeStats, 0, len(names))}
	for _, name := range names {
		n := nodes[name]
		addMetrics(&sum, n.Storage)
		st.Nodes = append(st.Nodes, httpapi.NodeStats{Node: name, Shards: rs.client.ShardsOf(name), Storage: httpapi.StorageStatsOf(n.Storage)})
	}
	st.Storage = httpapi.StorageStatsOf(sum)
	for shard, owner := range rs.owners {
		n := nodes[owner]
		if n == nil {
			continue
		}
		for _, c := range []struct {
			name string
			p    *queryrpc.ConsumerPosition
		}{{"writer", n.Writer}, {"fanout", n.Fanout}} {
			if c.p == nil {
				continue
			}
			cs := httpapi.ConsumerStatsOf(c.name, httpapi.ShardFreshness{Shard: shard, AppliedSeq: c.p.AppliedSeq, AppliedTime: c.p.AppliedTime,
				Pending: c.p.Pending, PendingKnown: c.p.PendingKnown})
			cs.Node = owner
			st.Consumers = append(st.Consumers, cs)
		}
	}
	if rs.tail != nil {
		st.Tail = httpapi.TailStatsOf(rs.tail.Stats())
	}
	return st, nil
}

// addMetrics adds one node's storage snapshot to sum: counters and sizes
// add up; tables merge by name, their windows by start.
func addMetrics(sum *storage.Metrics, m storage.Metrics) {
	sum.WALBytes += m.WALBytes
	sum.MemtableBytes += m.MemtableBytes
	sum.FrozenMemtables += m.FrozenMemtables
	sum.Batches += m.Batches
	sum.WALSyncs += m.WALSyncs
	sum.Flushes += m.Flushes
	sum.Compactions += m.Compactions
	sum.CompactionRead += m.CompactionRead
	sum.CompactionWritten += m.CompactionWritten
	sum.PurgedTombstones += m.PurgedTombstones
	sum.DroppedSSTables += m.DroppedSSTables
	sum.CompactionPacedTime += m.CompactionPacedTime
	sum.CompactionsPaced += m.CompactionsPaced
	sum.WriteStalls += m.WriteStalls
	sum.WriteStallTime += m.WriteStallTime
	sum.Reads += m.Reads
	sum.TombstonesRead += m.TombstonesRead
	sum.BlockCacheHits += m.BlockCacheHits
	sum.BlockCacheMisses += m.BlockCacheMisses
	sum.BlockCacheBytes += m.BlockCacheBytes
	for _, t := range m.Tables {
		i := slices.IndexFunc(sum.Tables, func(s storage.TableMetrics) bool { return s.Name == t.Name })
		if i < 0 {
			t.Windows = slices.Clone(t.Windows)
			sum.Tables = append(sum.Tables, t)
			continue
		}
		s := &sum.Tables[i]
		s.SSTables += t.SSTables
		s.Bytes += t.Bytes
		s.Partitions += t.Partitions
		s.Cells += t.Cells
		s.Tombstones += t.Tombstones
		s.Compacting += t.Compacting
		for _, w := range t.Windows {
			j := slices.IndexFunc(s.Windows, func(sw storage.WindowMetrics) bool { return sw.Start.Equal(w.Start) })
			if j < 0 {
				s.Windows = append(s.Windows, w)
				continue
			}
			s.Windows[j].SSTables += w.SSTables
			s.Windows[j].Bytes += w.Bytes
		}
		// Newest first, as each node lists them.
		slices.SortFunc(s.Windows, func(a, b storage.WindowMetrics) int { return b.Start.Compare(a.Start) })
	}
}
