package queryrpc

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/eventide/eventide/storage"
)

// statsReplyV1 is the version of the stats reply. Unlike the slice
// reply it is JSON: one small document per node per request, read by a
// person's dashboard, never per row; its fields are NodeStats'.
const statsReplyV1 = 1

// NodeStats is what a node's stats endpoint answers: its storage engine's
// snapshot (storage.Metrics, one table per row of the LSM) and its
// consumers' positions. The query service sums the storage figures over
// the nodes and lists the consumers per node.
type NodeStats struct {
	Version int               `json:"version"`
	Node    string            `json:"node"`
	Shards  int               `json:"shards"`
	Owned   []int             `json:"owned"`
	Storage storage.Metrics   `json:"storage"`
	Writer  *ConsumerPosition `json:"writer,omitempty"`
	Fanout  *ConsumerPosition `json:"fanout,omitempty"`
}

func (s *Server) handleStats(req micro.Request) {
	st := NodeStats{Version: statsReplyV1, Node: s.cfg.Node, Shards: s.cfg.Shards, Owned: s.owned(), Storage: s.cfg.Metrics()}
	w := s.cfg.Writer()
	st.Writer = &w
	if s.cfg.Fanout != nil {
		fo := s.cfg.Fanout()
		st.Fanout = &fo
	}
	body, err := json.Marshal(&st)
	if err != nil {
		req.Error("500", fmt.Sprintf("cannot encode the stats: %v", err), nil)
		return
	}
	req.Respond(body)
}

// decodeStatsReply decodes a stats reply; anything but a version 1 JSON
// document of NodeStats is an error wrapping ErrBadMessage.
func decodeStatsReply(src []byte) (*NodeStats, error) {
	var st NodeStats
	if err := json.Unmarshal(src, &st); err != nil {
		return nil, fmt.Errorf("%w: stats reply: %v", ErrBadMessage, err)
	}
	if st.Version != statsReplyV1 {
		return nil, fmt.Errorf("%w: stats reply: version %d, want %d", ErrBadMessage, st.Version, statsReplyV1)
	}
	if st.Shards < 1 || st.Shards > maxShards || len(st.Owned) > st.Shards {
		return nil, fmt.Errorf("%w: stats reply: %d owned shards of %d", ErrBadMessage, len(st.Owned), st.Shards)
	}
	return &st, nil
}

// Stats asks every node for its stats, in parallel, each within the node
// timeout. Nodes that do not answer (or answer garbage) are missing from
// nodes and listed in missing; under a context from TrackMisses their
// shards are recorded as missed, so the answer built from the others is
// partial.
func (c *Client) Stats(ctx context.Context) (nodes map[string]*NodeStats, missing []string) {
	type result struct {
		node string
		st   *NodeStats
	}
	all := c.Nodes()
	results := make(chan result, len(all))
	for _, node := range all {
		go func() {
			var st *NodeStats
			if msg, err := c.request(ctx, node, "stats", func(time.Time) []byte { return nil }); err == nil {
				st, _ = decodeStatsReply(msg.Data)
			}
			results <- result{node, st}
		}()
	}
	nodes = make(map[string]*NodeStats, len(all))
	for range all {
		if r := <-results; r.st != nil {
			nodes[r.node] = r.st
		} else {
			missing = append(missing, r.node)
		}
	}
	if m := missesFrom(ctx); m != nil {
		for _, node := range missing {
			for _, shard := range c.ShardsOf(node) {
				m.add(shard)
			}
		}
	}
	return nodes, missing
}
