package queryrpc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/eventide/eventide/reader"
	"github.com/eventide/eventide/storage"
)

// Walks: an event query's whole walk over its hour buckets (reader.Walk)
// runs on the node that holds the type in one request, the node's
// "walk" endpoint, rather than one slice request per partition, one after
// the other. A latest-N query crossing into the previous hour, a sparse
// type's window, a hot type's sub-partitions: one round trip each (more
// only when the byte budget cuts the reply).

// walkGroupHeader carries, on a walk's 422 (too many tombstones), the
// index of the group where the node gave up.
const walkGroupHeader = "Eventide-Walk-Group"

func (s *Server) serveWalk(req micro.Request) {
	r, err := decodeWalkRequest(req.Data())
	if err != nil {
		req.Error("400", headerSafe(err.Error()), nil)
		return
	}
	ctx, cancel := s.requestContext(r.Deadline)
	defer cancel()
	budget := s.byteBudget(r.ByteBudget)
	buf := s.buffers.get()
	defer s.buffers.put(buf)
	rows := buf.rows[:0]
	n, more := 0, false
	tr, err := reader.RunWalk(ctx, s.cfg.Store, &r.Walk, func(group int, row *storage.Row) bool {
		rows = appendWalkRow(rows, group, row)
		n++
		// Cut as soon as the budget is spent, as a slice does
		// (runSlice): the resumed walk reads what lies past this row.
		if len(rows) >= budget {
			more = true
			return false
		}
		return true
	})
	buf.rows = rows
	if err == nil && len(rows) > int(s.nc.MaxPayload())-1024 {
		err = fmt.Errorf("a row of table %q is %d bytes encoded, more than a NATS message holds (max payload %d)", r.Walk.Table, len(rows), s.nc.MaxPayload())
	}
	if err != nil {
		code := errorCode(ctx, err)
		var opts []micro.RespondOpt
		if ge, ok := errors.AsType[*reader.WalkGroupError](err); ok && code == "422" {
			opts = append(opts, micro.WithHeaders(micro.Headers{walkGroupHeader: {strconv.Itoa(ge.Group)}}))
		}
		if code == "500" {
			s.cfg.Logger.Error("storage service: walk failed", "table", r.Walk.Table, "groups", len(r.Walk.Groups), "err", err)
		}
		req.Error(code, headerSafe(err.Error()), nil, opts...)
		return
	}
	out := appendWalkReplyHeader(buf.out[:0], more, &tr)
	out = appendUvarint(out, n)
	buf.out = append(out, rows...)
	if err := req.Respond(buf.out); err != nil {
		s.cfg.Logger.Warn("storage service: cannot send a walk reply", "bytes", len(buf.out), "err", err)
	}
}

// WalkGroups runs w on the node that holds its partitions
// (reader.GroupWalker), asking again from after the last row while the
// node's byte budget cuts its replies. A walk of a table that is not
// sharded, or whose partitions are on several shards, or a node without
// the walk endpoint (an older release) is ErrWalkUnsupported: the reader
// then slices partition by partition. A node that does not answer in
// time makes the walk empty with its shard missed under TrackMisses, and
// fails it with ErrShardUnavailable without.
func (c *Client) WalkGroups(ctx context.Context, w *reader.Walk, emit func(group int, row *storage.Row) bool) (reader.Trace, error) {
	var tr reader.Trace
	if !IsSharded(w.Table) || IsScattered(w.Table) || len(w.Groups) == 0 {
		return tr, fmt.Errorf("cannot walk table %q on one node: %w", w.Table, reader.ErrWalkUnsupported)
	}
	m := c.owners.Load()
	shard := -1
	for _, g := range w.Groups {
		for _, p := range g {
			s := ShardOf(w.Table, p, len(m.owners), c.cfg.EventSubjectPrefix)
			if shard >= 0 && s != shard {
				return tr, fmt.Errorf("cannot walk table %q on one node: partitions of shards %d and %d: %w", w.Table, shard, s, reader.ErrWalkUnsupported)
			}
			shard = s
		}
	}
	node := m.owners[shard]
	q := *w
	offset := 0 // the group of w that q.Groups[0] is
	for first := true; ; first = false {
		msg, err := c.request(ctx, node, "walk", func(deadline time.Time) []byte {
			return appendWalkRequest(nil, &walkRequest{Walk: q, Deadline: deadline, ByteBudget: c.cfg.ByteBudget})
		})
		if err != nil {
			switch {
			case first && errors.Is(err, nats.ErrNoResponders):
				// No walk endpoint (or no node at all, which slices
				// will find out at once too).
				return tr, fmt.Errorf("node %s: %w: %w", node, reader.ErrWalkUnsupported, err)
			case errors.Is(err, errUnavailable):
				if ms := missesFrom(ctx); ms != nil {
					ms.add(shard)
					return tr, nil
				}
				return tr, fmt.Errorf("cannot walk table %q: %w %d: %w", w.Table, ErrShardUnavailable, shard, err)
			case errors.Is(err, storage.ErrTooManyTombstones) && msg != nil:
				if g, perr := strconv.Atoi(msg.Header.Get(walkGroupHeader)); perr == nil && g >= 0 && g < len(q.Groups) {
					return tr, &reader.WalkGroupError{Group: offset + g, Err: err}
				}
			}
			return tr, fmt.Errorf("cannot walk table %q: %w", w.Table, err)
		}
		// The rows are valid only during emit (reader.GroupWalker), so
		// their slices serve the next reply.
		reply := c.walkReplies.get()
		if err := decodeWalkReplyInto(msg.Data, len(q.Groups), reply); err != nil {
			c.walkReplies.put(reply)
			return tr, fmt.Errorf("cannot walk table %q on node %s: %w", w.Table, node, err)
		}
		t := reply.trace()
		tr.Merge(&t)
		for i := range reply.Rows {
			if !emit(offset+reply.Groups[i], &reply.Rows[i]) {
				c.walkReplies.put(reply)
				return tr, nil
			}
		}
		if !reply.More || len(reply.Rows) == 0 || q.Limit > 0 && len(reply.Rows) >= q.Limit {
			c.walkReplies.put(reply)
			return tr, nil
		}
		// Resume in the last row's group, after its key: the groups'
		// key ranges follow the walk's order (reader.Walk). The key
		// aliases msg.Data, not the recycled reply.
		lastGroup := reply.Groups[len(reply.Groups)-1]
		last := reply.Rows[len(reply.Rows)-1].Clustering
		nrows, stats := len(reply.Rows), reply.Stats
		c.walkReplies.put(reply)
		q.Groups = q.Groups[lastGroup:]
		offset += lastGroup
		if q.Reverse {
			q.End = storage.Bound{Key: last}
		} else {
			q.Start = storage.Bound{Key: last}
		}
		if q.Limit > 0 {
			q.Limit -= nrows
		}
		if q.MaxTombstones > 0 {
			q.MaxTombstones = max(q.MaxTombstones-stats.TombstonesScanned, 1)
		}
	}
}

// walkReplies recycles the decoded walk replies of a Client.
type walkReplies struct{ pool sync.Pool }

// maxPooledWalkRows is the most rows a recycled reply keeps room for: a
// rare huge reply must not stay in memory for good.
const maxPooledWalkRows = 4096

func (p *walkReplies) get() *walkReply {
	if r, _ := p.pool.Get().(*walkReply); r != nil {
		return r
	}
	return &walkReply{}
}

func (p *walkReplies) put(r *walkReply) {
	if cap(r.Rows) > maxPooledWalkRows || cap(r.slab) > 8*maxPooledWalkRows || r.cells > 8*maxPooledWalkRows {
		return
	}
	// Drop the references into the message, so a pooled reply does not
	// hold a reply's bytes alive.
	clear(r.Rows[:cap(r.Rows)])
	clear(r.slab[:cap(r.slab)])
	p.pool.Put(r)
}
