package queryrpc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/storage"
)

// DefaultNodeTimeout is how long the query service waits for one node's
// answer before it counts the node's shard as missing.
const DefaultNodeTimeout = 2 * time.Second

// ErrShardUnavailable is returned when no node that holds a partition
// answered within the node timeout, and the request does not accept
// partial answers (its context carries no TrackMisses).
var ErrShardUnavailable = errors.New("eventide/queryrpc: shard unavailable")

// ErrNodeRefused is wrapped when a node refused a slice as malformed or
// naming an unknown table: a bug or a version mismatch, not the client's.
var ErrNodeRefused = errors.New("eventide/queryrpc: node refused the slice")

// IsSharded says whether table is sharded by partition (each partition
// stored only by the owner of its shard) rather than replicated on every
// node. The events and counts tables are sharded; the others (event type
// settings, follow graph, timelines and the fan-out's own tables, which
// every node's fan-out worker builds from the whole stream) are on every
// node.
func IsSharded(table string) bool {
	return table == schema.EventsTable || table == schema.CountsTable
}

// ClientConfig says where the query service finds each shard.
type ClientConfig struct {
	// Owners is the owner node of each shard, by index; its length is the
	// shard count. Required.
	Owners []string
	// NodeTimeout bounds each request to a node; DefaultNodeTimeout when
	// zero. A request's own deadline, when sooner, wins.
	NodeTimeout   time.Duration
	SubjectPrefix string // DefaultSubjectPrefix when empty
	// EventSubjectPrefix is the prefix of the subjects events are
	// published on, as the writers' stream has it (routing hashes
	// prefix+type as JetStream does); bucket.DefaultEventSubjectPrefix
	// when empty.
	EventSubjectPrefix string
	// ByteBudget bounds the rows of one slice reply; DefaultByteBudget
	// when zero.
	ByteBudget int
	// Registerer receives the client's metrics; nil registers none.
	Registerer prometheus.Registerer
}

// Client reads the storage nodes of a deployment over NATS
// request/reply. It is a reader.Store: every slice goes to the node that
// owns the shard of its partition (bucket.Shard), or, for a replicated
// table, to that node first and to the others when it does not answer.
// It is safe for concurrent use.
type Client struct {
	nc  *nats.Conn
	cfg ClientConfig
	// owners is the current owner map; SetOwners replaces it. Every
	// request takes one snapshot, so a change never splits a request.
	owners atomic.Pointer[ownerMap]
	// walkReplies recycles decoded walk replies (walk.go).
	walkReplies walkReplies

	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// endpoints caches each node endpoint's subject and metrics
	// (endpointKey -> *nodeEndpoint): the label lookups and the subject's
	// concatenation were per request.
	endpoints sync.Map
}

type endpointKey struct{ node, endpoint string }

// nodeEndpoint is one endpoint of one node: its subject and metrics.
type nodeEndpoint struct {
	subject               string
	ok, unavailable, fail prometheus.Counter
	duration              prometheus.Observer
}

func (c *Client) nodeEndpoint(node, endpoint string) *nodeEndpoint {
	k := endpointKey{node, endpoint}
	if e, ok := c.endpoints.Load(k); ok {
		return e.(*nodeEndpoint)
	}
	e := &nodeEndpoint{
		subject:     c.subject(node, endpoint),
		ok:          c.requests.WithLabelValues(node, endpoint, "ok"),
		unavailable: c.requests.WithLabelValues(node, endpoint, "unavailable"),
		fail:        c.requests.WithLabelValues(node, endpoint, "error"),
		duration:    c.duration.WithLabelValues(node, endpoint),
	}
	got, _ := c.endpoints.LoadOrStore(k, e)
	return got.(*nodeEndpoint)
}

// NewClient returns a client of the nodes cfg names.
func NewClient(nc *nats.Conn, cfg ClientConfig) (*Client, error) {
	owners, err := newOwnerMap(cfg.Owners)
	if err != nil {
		return nil, fmt.Errorf("queryrpc.NewClient: %w", err)
	}
	if cfg.EventSubjectPrefix == "" {
		cfg.EventSubjectPrefix = bucket.DefaultEventSubjectPrefix
	}
	if cfg.NodeTimeout <= 0 {
		cfg.NodeTimeout = DefaultNodeTimeout
	}
	if cfg.SubjectPrefix == "" {
		cfg.SubjectPrefix = DefaultSubjectPrefix
	}
	if cfg.ByteBudget <= 0 {
		cfg.ByteBudget = DefaultByteBudget
	}
	c := &Client{nc: nc, cfg: cfg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventide_query_node_requests_total",
			Help: "Requests to storage nodes, by node, endpoint (slice, walk, freshness, health, stats) and result (ok; unavailable: no answer within the node timeout, so its shards were missing; error).",
		}, []string{"node", "endpoint", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "eventide_query_node_request_duration_seconds",
			Help:    "Time from sending a request to a storage node to its answer (or giving up), by node and endpoint.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16),
		}, []string{"node", "endpoint"}),
	}
	c.owners.Store(owners)
	if cfg.Registerer != nil {
		for _, col := range []prometheus.Collector{c.requests, c.duration} {
			if err := cfg.Registerer.Register(col); err != nil {
				return nil, fmt.Errorf("cannot register the query client's metrics: %w", err)
			}
		}
	}
	return c, nil
}

// ownerMap is the owner of each shard and the distinct owners, sorted.
type ownerMap struct {
	owners []string
	nodes  []string
}

func newOwnerMap(owners []string) (*ownerMap, error) {
	if len(owners) == 0 {
		return nil, errors.New("no shard owners")
	}
	for s, o := range owners {
		if err := checkToken("node", o); err != nil {
			return nil, fmt.Errorf("owner of shard %d: %w", s, err)
		}
	}
	nodes := slices.Clone(owners)
	slices.Sort(nodes)
	return &ownerMap{owners: slices.Clone(owners), nodes: slices.Compact(nodes)}, nil
}

// SetOwners replaces the owner of each shard (cmd/query calls it when
// the ownership bucket changes). The shard count cannot change: a
// deployment's is fixed.
func (c *Client) SetOwners(owners []string) error {
	if len(owners) != c.Shards() {
		return fmt.Errorf("cannot set %d shard owners: the deployment has %d shards", len(owners), c.Shards())
	}
	m, err := newOwnerMap(owners)
	if err != nil {
		return fmt.Errorf("cannot set shard owners: %w", err)
	}
	c.owners.Store(m)
	return nil
}

// Owners returns the owner of each shard, by index.
func (c *Client) Owners() []string { return slices.Clone(c.owners.Load().owners) }

// Shards is the shard count.
func (c *Client) Shards() int { return len(c.owners.Load().owners) }

// Nodes lists the owner nodes, sorted.
func (c *Client) Nodes() []string { return slices.Clone(c.owners.Load().nodes) }

// ShardsOf lists the shards node owns.
func (c *Client) ShardsOf(node string) []int {
	var out []int
	for s, o := range c.owners.Load().owners {
		if o == node {
			out = append(out, s)
		}
	}
	return out
}

// ShardOf returns the shard of a partition of table: for the sharded
// tables (events, counts), the shard JetStream files its event type under
// (bucket.EventPartitionShard), so a slice goes where the writer stored
// it; for the others, bucket.Shard.
func ShardOf(table string, partition []byte, shards int, eventSubjectPrefix string) int {
	if IsSharded(table) {
		return bucket.EventPartitionShard(eventSubjectPrefix, partition, shards)
	}
	return bucket.Shard(partition, shards)
}

// route lists the nodes to ask for a partition of shard, in order.
func (c *Client) route(table string, shard int) []string {
	m := c.owners.Load()
	owner := m.owners[shard]
	if IsSharded(table) {
		return []string{owner}
	}
	out := []string{owner}
	for _, n := range m.nodes {
		if n != owner {
			out = append(out, n)
		}
	}
	return out
}

func (c *Client) subject(node, endpoint string) string {
	return c.cfg.SubjectPrefix + "." + node + "." + endpoint
}

// errUnavailable marks a node that did not answer in time (or has no
// subscriber): the next node, or a miss.
var errUnavailable = errors.New("node unavailable")

// request sends one request to node and returns the reply, or an error:
// wrapping errUnavailable when the node did not answer within the node
// timeout (while ctx was still alive), ctx's error when ctx ended. When
// the node answered with an error, the reply comes with it (its headers
// may say more).
func (c *Client) request(ctx context.Context, node, endpoint string, build func(deadline time.Time) []byte) (msg *nats.Msg, err error) {
	start := time.Now()
	ep := c.nodeEndpoint(node, endpoint)
	defer func() {
		switch {
		case errors.Is(err, errUnavailable):
			ep.unavailable.Inc()
		case err != nil:
			ep.fail.Inc()
		default:
			ep.ok.Inc()
		}
		ep.duration.Observe(time.Since(start).Seconds())
	}()
	cctx, cancel := context.WithTimeout(ctx, c.cfg.NodeTimeout)
	defer cancel()
	deadline, _ := cctx.Deadline()
	subject := ep.subject
	msg, err = c.nc.RequestWithContext(cctx, subject, build(deadline))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("cannot ask node %s (%s): %w", node, subject, ctx.Err())
		}
		if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
			return nil, fmt.Errorf("node %s did not answer on %s within %s: %w: %w", node, subject, c.cfg.NodeTimeout, errUnavailable, err)
		}
		return nil, fmt.Errorf("cannot ask node %s (%s): %w", node, subject, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		desc := msg.Header.Get(micro.ErrorHeader)
		switch code {
		case "422":
			return msg, fmt.Errorf("node %s: %w (%s)", node, storage.ErrTooManyTombstones, desc)
		case "503":
			return msg, fmt.Errorf("node %s is stopping: %w: %s", node, errUnavailable, desc)
		case "504":
			if ctx.Err() != nil {
				return msg, fmt.Errorf("node %s: %s: %w", node, desc, ctx.Err())
			}
			return msg, fmt.Errorf("node %s ran out of time: %w: %s", node, errUnavailable, desc)
		case "400":
			return msg, fmt.Errorf("node %s: %w: %s", node, ErrNodeRefused, desc)
		}
		return msg, fmt.Errorf("node %s failed the request (code %s): %s", node, code, desc)
	}
	return msg, nil
}

// Slice runs q on the node that holds its partition (reader.Store).
// When no such node answers in time, a context from TrackMisses records
// the shard and the slice is empty; without one, Slice fails with
// ErrShardUnavailable.
func (c *Client) Slice(ctx context.Context, q storage.SliceQuery) (storage.Rows, error) {
	if len(q.Partition) == 0 {
		return nil, fmt.Errorf("cannot read table %q: empty partition key", q.Table)
	}
	if q.Limit < 0 {
		return nil, fmt.Errorf("cannot read table %q: negative limit %d", q.Table, q.Limit)
	}
	if IsScattered(q.Table) && len(c.Nodes()) > 1 {
		return c.sliceEveryNode(ctx, q)
	}
	r := &remoteRows{c: c, ctx: ctx, q: q, shard: ShardOf(q.Table, q.Partition, c.Shards(), c.cfg.EventSubjectPrefix), idx: -1}
	if err := r.fetch(); err != nil {
		return nil, err
	}
	return r, nil
}

// remoteRows is the storage.Rows of a remote slice: one reply's rows,
// then the next reply's when the byte budget cut the first.
type remoteRows struct {
	c     *Client
	ctx   context.Context
	q     storage.SliceQuery // what the next request asks
	shard int
	// node, when set, is the one node asked (a scattered table's slice),
	// whose shards are missed when it does not answer.
	node string

	rows     []storage.Row
	idx      int
	more     bool
	returned int // rows received so far
	stats    storage.ReadStats
	err      error
}

// fetch asks for the next reply and replaces rows with its rows.
func (r *remoteRows) fetch() error {
	var lastErr error
	route := r.c.route(r.q.Table, r.shard)
	if r.node != "" {
		route = []string{r.node}
	}
	for _, node := range route {
		msg, err := r.c.request(r.ctx, node, "slice", func(deadline time.Time) []byte {
			return appendSliceRequest(nil, &sliceRequest{Query: r.q, Deadline: deadline, ByteBudget: r.c.cfg.ByteBudget})
		})
		if errors.Is(err, errUnavailable) {
			lastErr = err
			continue
		}
		if err != nil {
			return fmt.Errorf("cannot read partition %q of table %q: %w", r.q.Partition, r.q.Table, err)
		}
		reply, err := decodeSliceReply(msg.Data)
		if err != nil {
			return fmt.Errorf("cannot read partition %q of table %q from node %s: %w", r.q.Partition, r.q.Table, node, err)
		}
		r.accept(reply)
		return nil
	}
	if m := missesFrom(r.ctx); m != nil {
		if r.node != "" {
			for _, s := range r.c.ShardsOf(r.node) {
				m.add(s)
			}
		} else {
			m.add(r.shard)
		}
		r.rows, r.idx, r.more = nil, -1, false
		return nil
	}
	return fmt.Errorf("cannot read partition %q of table %q: %w %d: %w", r.q.Partition, r.q.Table, ErrShardUnavailable, r.shard, lastErr)
}

// accept takes a reply's rows and sets up the request for the rows after
// them.
func (r *remoteRows) accept(reply *sliceReply) {
	r.rows, r.idx = reply.Rows, -1
	for i, v := range statsValues(&r.stats) {
		*v += *statsValues(&reply.Stats)[i]
	}
	r.returned += len(reply.Rows)
	r.more = reply.More && len(reply.Rows) > 0 && (r.q.Limit == 0 || len(reply.Rows) < r.q.Limit)
	if !r.more {
		return
	}
	last := reply.Rows[len(reply.Rows)-1].Clustering
	if r.q.Reverse {
		r.q.End = storage.Bound{Key: last}
	} else {
		r.q.Start = storage.Bound{Key: last}
	}
	if r.q.Limit > 0 {
		r.q.Limit -= len(reply.Rows)
	}
	if r.q.MaxTombstones > 0 {
		r.q.MaxTombstones = max(r.q.MaxTombstones-reply.Stats.TombstonesScanned, 1)
	}
}

func (r *remoteRows) Next() bool {
	for r.err == nil {
		if r.idx+1 < len(r.rows) {
			r.idx++
			return true
		}
		if !r.more {
			return false
		}
		r.err = r.fetch()
	}
	return false
}

func (r *remoteRows) Row() *storage.Row        { return &r.rows[r.idx] }
func (r *remoteRows) Err() error               { return r.err }
func (r *remoteRows) Stats() storage.ReadStats { return r.stats }
func (r *remoteRows) Close() error             { r.rows = nil; r.more = false; return r.err }

// misses collects the shards one request could not read.
type misses struct {
	mu     sync.Mutex
	shards []int
}

func (m *misses) add(shard int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !slices.Contains(m.shards, shard) {
		m.shards = append(m.shards, shard)
	}
}

type missesKey struct{}

func missesFrom(ctx context.Context) *misses {
	m, _ := ctx.Value(missesKey{}).(*misses)
	return m
}

// TrackMisses returns a context under which a slice of a shard whose
// node does not answer is empty instead of failing, and a function
// listing the shards missed so far (sorted): the request's answer is then
// partial. It is httpapi.Config.Partial's hook.
func TrackMisses(ctx context.Context) (context.Context, func() []int) {
	m := &misses{}
	return context.WithValue(ctx, missesKey{}, m), func() []int {
		m.mu.Lock()
		defer m.mu.Unlock()
		out := slices.Clone(m.shards)
		slices.Sort(out)
		return out
	}
}

// Freshness asks every node for its consumers' positions, in parallel,
// each within the node timeout; nodes that do not answer are left out.
func (c *Client) Freshness(ctx context.Context) map[string]*NodeFreshness {
	type result struct {
		node string
		f    *NodeFreshness
	}
	nodes := c.Nodes()
	results := make(chan result, len(nodes))
	for _, node := range nodes {
		go func() {
			msg, err := c.request(ctx, node, "freshness", func(time.Time) []byte { return nil })
			if err != nil {
				results <- result{node, nil}
				return
			}
			f, err := decodeFreshnessReply(msg.Data)
			if err != nil {
				results <- result{node, nil}
				return
			}
			results <- result{node, f}
		}()
	}
	out := make(map[string]*NodeFreshness, len(nodes))
	for range nodes {
		r := <-results
		if r.f != nil {
			out[r.node] = r.f
		}
	}
	return out
}

// Health asks every node whether it is ready, in parallel, each within
// the node timeout. It returns nil when all are, else an error naming
// each node that is not or does not answer, with the shards it owns.
func (c *Client) Health(ctx context.Context) error {
	nodes := c.Nodes()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, node := range nodes {
		wg.Go(func() {
			msg, err := c.request(ctx, node, "health", func(time.Time) []byte { return nil })
			if err == nil {
				var notReady error
				if notReady, err = decodeHealthReply(msg.Data); err == nil {
					err = notReady
				}
			}
			if err != nil {
				errs[i] = fmt.Errorf("node %s (shards %s): %w", node, shardList(c.ShardsOf(node)), err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// shardList formats shards as "0,1,2".
func shardList(shards []int) string {
	parts := make([]string, len(shards))
	for i, s := range shards {
		parts[i] = fmt.Sprint(s)
	}
	return strings.Join(parts, ",")
}
