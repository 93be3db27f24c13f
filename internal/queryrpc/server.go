package queryrpc

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/eventide/eventide/reader"
	"github.com/eventide/eventide/storage"
)

// Defaults of ServerConfig and ClientConfig.
const (
	// DefaultSubjectPrefix is the first tokens of every endpoint subject:
	// <prefix>.<node>.slice and so on.
	DefaultSubjectPrefix = "eventide.storage"
	// ServiceName is the micro service's name (nats micro ls shows it).
	ServiceName = "eventide-storage"
	// DefaultByteBudget bounds the rows of one slice reply: well below
	// NATS's default max payload (1 MiB), with room for the headers.
	DefaultByteBudget = 512 << 10
	// DefaultMaxSliceTime caps how long a node runs one slice request,
	// whatever deadline it carries (and is the deadline of one without).
	DefaultMaxSliceTime = 30 * time.Second
	// DefaultMaxConcurrent bounds the slices one node runs at once.
	DefaultMaxConcurrent = 64
)

// ServerConfig is what a storage node serves.
type ServerConfig struct {
	// Node names the node; its endpoints are <SubjectPrefix>.<Node>.*.
	// Required: a NATS subject token (no '.', '*', '>' or spaces).
	Node string
	// Store runs the slices (the node's *storage.DB). Required.
	Store reader.Store
	// Shards is the deployment's shard count and Owned the shards this
	// node stores (every shard when empty), reported by freshness.
	Shards int
	Owned  []int
	// OwnedNow, when set, is asked for the shards the node stores at each
	// reply instead of Owned (shards move with the owners bucket).
	OwnedNow func() []int
	// Writer and Fanout report the positions of the node's consumers;
	// Fanout is nil on a node without a fan-out worker. Writer is
	// required.
	Writer, Fanout func() ConsumerPosition
	// Ready is the node's readiness (nil: ready), the health endpoint's
	// answer. Required.
	Ready func() error
	// Metrics is the node's storage snapshot for the stats endpoint
	// ((*storage.DB).Metrics). Required.
	Metrics func() storage.Metrics

	SubjectPrefix string        // DefaultSubjectPrefix when empty
	Version       string        // the service version micro reports; "0.0.0" unless SemVer (a leading v dropped)
	MaxSliceTime  time.Duration // DefaultMaxSliceTime when zero
	MaxConcurrent int           // DefaultMaxConcurrent when zero
	Logger        *slog.Logger
}

// semver is what micro accepts as a service version.
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// Server is a node's storage service. Stop it before closing the store.
type Server struct {
	cfg ServerConfig
	svc micro.Service
	nc  *nats.Conn
	// jobs hands a read request to an idle worker; workers counts the
	// workers started (at most MaxConcurrent). See concurrently.
	jobs    chan readJob
	workers chan struct{}
	// buffers recycle the encoding buffers of slice replies.
	buffers replyBuffers
	// stop cancels the slices under way at Stop.
	stop context.CancelFunc
	ctx  context.Context
}

// Serve registers the storage service of cfg.Node on nc: the endpoints
// slice, walk, freshness, health and stats. The slice and walk endpoints
// run each request on a worker goroutine of the node (at most
// MaxConcurrent at once, both together; more wait in NATS's subscription
// buffer).
func Serve(nc *nats.Conn, cfg ServerConfig) (*Server, error) {
	if err := checkToken("node", cfg.Node); err != nil {
		return nil, err
	}
	if cfg.Store == nil || cfg.Writer == nil || cfg.Ready == nil || cfg.Metrics == nil {
		return nil, errors.New("queryrpc.Serve: Store, Writer, Ready and Metrics are required")
	}
	if cfg.SubjectPrefix == "" {
		cfg.SubjectPrefix = DefaultSubjectPrefix
	}
	// micro wants SemVer; a development build's "(devel)" is not.
	cfg.Version = strings.TrimPrefix(cfg.Version, "v")
	if !semver.MatchString(cfg.Version) {
		cfg.Version = "0.0.0"
	}
	if cfg.MaxSliceTime <= 0 {
		cfg.MaxSliceTime = DefaultMaxSliceTime
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = DefaultMaxConcurrent
	}
	if cfg.Shards <= 0 {
		cfg.Shards = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, nc: nc, jobs: make(chan readJob), workers: make(chan struct{}, cfg.MaxConcurrent), ctx: ctx, stop: cancel}
	svc, err := micro.AddService(nc, micro.Config{
		Name:        ServiceName,
		Version:     cfg.Version,
		Description: "Eventide storage node reads: slices, freshness, health, stats",
		Metadata:    map[string]string{"node": cfg.Node, "shards": strconv.Itoa(cfg.Shards)},
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("cannot register the storage service of node %s: %w", cfg.Node, err)
	}
	s.svc = svc
	// No queue group: a node's subjects are its own, and a second process
	// claiming the same node id must not silently share its requests.
	g := svc.AddGroup(cfg.SubjectPrefix+"."+cfg.Node, micro.WithGroupQueueGroupDisabled())
	for _, ep := range []struct {
		name string
		h    micro.HandlerFunc
	}{
		{"slice", s.concurrently(s.serveSlice)},
		{"walk", s.concurrently(s.serveWalk)},
		{"freshness", s.handleFreshness},
		{"health", s.handleHealth},
		{"stats", s.handleStats},
	} {
		if err := g.AddEndpoint(ep.name, ep.h); err != nil {
			svc.Stop()
			cancel()
			return nil, fmt.Errorf("cannot add endpoint %s of node %s: %w", ep.name, cfg.Node, err)
		}
	}
	// The subscriptions are in the connection's buffer: a round trip to
	// the server makes them known there, so the node answers requests
	// from other connections once Serve returns.
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		svc.Stop()
		cancel()
		return nil, fmt.Errorf("cannot register the endpoints of node %s with the NATS server: %w", cfg.Node, err)
	}
	return s, nil
}

// Stop removes the service's subscriptions (draining them) and cancels
// the slices still running. It waits for none of them: they end within a
// few hundred cells of the cancellation.
func (s *Server) Stop() error {
	err := s.svc.Stop()
	s.stop()
	if err != nil {
		return fmt.Errorf("cannot stop the storage service of node %s: %w", s.cfg.Node, err)
	}
	return nil
}

// concurrently returns the handler of a read endpoint: micro calls a
// handler from its subscription's goroutine, one request at a time, so
// each request is served by a worker goroutine, at most MaxConcurrent at
// once (the next ones wait for a worker), and refused with 503 once the
// node is stopping.
//
// Workers are started as requests need them and live until Stop: a
// goroutine started per request began with a small stack and grew it in
// every walk (runtime.newstack was a tenth of a node's CPU per latest-50
// request); a worker's stack has grown once.
func (s *Server) concurrently(serve func(micro.Request)) micro.HandlerFunc {
	return func(req micro.Request) {
		if s.ctx.Err() != nil {
			req.Error("503", "node is stopping", nil)
			return
		}
		j := readJob{serve: serve, req: workerRequest{Request: req, nc: s.nc}}
		select {
		case s.jobs <- j: // an idle worker takes it
			return
		default:
		}
		select {
		case s.jobs <- j:
		case s.workers <- struct{}{}:
			go s.work(j)
		case <-s.ctx.Done():
			req.Error("503", "node is stopping", nil)
		}
	}
}

// workerRequest is a request a worker goroutine answers. micro's request
// records the error it answers with (and a failed Respond's) for its
// endpoint stats, and micro reads that record when the handler returns,
// which for a worker's request is before the worker answers: answering
// through micro's request there was a data race. workerRequest publishes
// the reply itself, with micro's error headers; micro's own endpoint
// stats ($SRV.STATS) therefore count no errors for these endpoints.
type workerRequest struct {
	micro.Request
	nc *nats.Conn
}

func (r workerRequest) Respond(data []byte, opts ...micro.RespondOpt) error {
	return r.publish(&nats.Msg{Data: data}, opts)
}

func (r workerRequest) RespondJSON(v any, opts ...micro.RespondOpt) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("cannot answer %s: %w", r.Subject(), err)
	}
	return r.Respond(data, opts...)
}

// Error answers with an error as micro's request does: the description
// and code in micro.ErrorHeader and micro.ErrorCodeHeader, data as the
// body.
func (r workerRequest) Error(code, description string, data []byte, opts ...micro.RespondOpt) error {
	if code == "" || description == "" {
		return fmt.Errorf("cannot answer %s with an error: code %q and description %q must not be empty", r.Subject(), code, description)
	}
	msg := &nats.Msg{Header: nats.Header{micro.ErrorHeader: {description}, micro.ErrorCodeHeader: {code}}}
	for _, opt := range opts {
		opt(msg)
	}
	msg.Data = data
	return r.publish(msg, nil)
}

func (r workerRequest) publish(msg *nats.Msg, opts []micro.RespondOpt) error {
	for _, opt := range opts {
		opt(msg)
	}
	if r.Reply() == "" {
		return fmt.Errorf("cannot answer %s: %w", r.Subject(), nats.ErrMsgNoReply)
	}
	msg.Subject = r.Reply()
	if err := r.nc.PublishMsg(msg); err != nil {
		return fmt.Errorf("cannot answer %s: %w", r.Subject(), err)
	}
	return nil
}

// readJob is one read request for a worker.
type readJob struct {
	serve func(micro.Request)
	req   micro.Request
}

// work serves j, then the requests handed to it, until Stop.
func (s *Server) work(j readJob) {
	for {
		j.serve(j.req)
		select {
		case j = <-s.jobs:
		case <-s.ctx.Done():
			return
		}
	}
}

func (s *Server) serveSlice(req micro.Request) {
	r, err := decodeSliceRequest(req.Data())
	if err != nil {
		req.Error("400", headerSafe(err.Error()), nil)
		return
	}
	ctx, cancel := s.requestContext(r.Deadline)
	defer cancel()
	budget := s.byteBudget(r.ByteBudget)
	buf := s.buffers.get()
	defer s.buffers.put(buf)
	body, err := s.runSlice(ctx, r.Query, budget, buf)
	if err != nil {
		code := errorCode(ctx, err)
		if code == "500" {
			s.cfg.Logger.Error("storage service: slice failed", "table", r.Query.Table, "partition", string(r.Query.Partition), "err", err)
		}
		req.Error(code, headerSafe(err.Error()), nil)
		return
	}
	if err := req.Respond(body); err != nil {
		s.cfg.Logger.Warn("storage service: cannot send a slice reply", "bytes", len(body), "err", err)
	}
}

// requestContext is the context of a request with deadline (zero: none),
// capped by MaxSliceTime and ended by Stop.
func (s *Server) requestContext(deadline time.Time) (context.Context, context.CancelFunc) {
	d := time.Now().Add(s.cfg.MaxSliceTime)
	if !deadline.IsZero() && deadline.Before(d) {
		d = deadline
	}
	return context.WithDeadline(s.ctx, d)
}

// byteBudget is the byte budget of a reply's rows when the request asks
// for budget: at most DefaultByteBudget, and room for the rest of the
// message within NATS's max payload.
func (s *Server) byteBudget(budget int) int {
	if budget <= 0 || budget > DefaultByteBudget {
		budget = DefaultByteBudget
	}
	return min(budget, int(s.nc.MaxPayload())-4096)
}

func appendUvarint(dst []byte, n int) []byte { return binary.AppendUvarint(dst, uint64(n)) }

// runSlice runs q and encodes its reply into buf: the rows up to budget
// bytes (always at least one), with replyMore when rows may follow. The
// reply is valid until buf is reused.
func (s *Server) runSlice(ctx context.Context, q storage.SliceQuery, budget int, buf *replyBuffer) ([]byte, error) {
	it, err := s.cfg.Store.Slice(ctx, q)
	if err != nil {
		return nil, err
	}
	rows := buf.rows[:0]
	defer func() { buf.rows = rows }()
	n, more := 0, false
	for it.Next() {
		rows = appendRow(rows, it.Row())
		n++
		// Cut as soon as the budget is spent, before reading the next
		// row: the request that resumes after this row reads what lies
		// beyond it, so reading it here too would count its rows and
		// tombstones twice in the trace and against MaxTombstones.
		if len(rows) >= budget {
			more = true
			break
		}
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	if len(rows) > int(s.nc.MaxPayload())-1024 {
		return nil, fmt.Errorf("a row of partition %q of table %q is %d bytes encoded, more than a NATS message holds (max payload %d)",
			q.Partition, q.Table, len(rows), s.nc.MaxPayload())
	}
	out := appendReplyHeader(buf.out[:0], more, it.Stats())
	out = binary.AppendUvarint(out, uint64(n))
	buf.out = append(out, rows...)
	return buf.out, nil
}

// replyBuffer is where one slice reply is encoded: the rows, then the
// whole reply. NATS copies a reply as it sends it, so the buffers serve
// the next slice once Respond returns.
type replyBuffer struct{ rows, out []byte }

// replyBuffers recycles replyBuffers.
type replyBuffers struct{ pool sync.Pool }

// maxPooledReply is the largest buffer kept: a reply holding one huge
// row must not stay in memory for good.
const maxPooledReply = 1 << 20

func (p *replyBuffers) get() *replyBuffer {
	if b, _ := p.pool.Get().(*replyBuffer); b != nil {
		return b
	}
	return &replyBuffer{}
}

func (p *replyBuffers) put(b *replyBuffer) {
	if cap(b.rows) <= maxPooledReply && cap(b.out) <= maxPooledReply {
		p.pool.Put(b)
	}
}

// headerSafe makes an error message one header line: micro sends it in
// the Nats-Service-Error header.
func headerSafe(msg string) string {
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, msg)
}

// errorCode maps a slice error to its wire code.
func errorCode(ctx context.Context, err error) string {
	switch {
	case errors.Is(err, storage.ErrTooManyTombstones):
		return "422"
	case errors.Is(err, storage.ErrClosed):
		return "503"
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return "504"
	case errors.Is(err, storage.ErrUnknownTable) || errors.Is(err, ErrBadMessage):
		return "400"
	}
	return "500"
}

func (s *Server) handleFreshness(req micro.Request) {
	f := NodeFreshness{Shards: s.cfg.Shards, Owned: s.owned()}
	w := s.cfg.Writer()
	f.Writer = &w
	if s.cfg.Fanout != nil {
		fo := s.cfg.Fanout()
		f.Fanout = &fo
	}
	req.Respond(appendFreshnessReply(nil, &f))
}

func (s *Server) handleHealth(req micro.Request) {
	req.Respond(appendHealthReply(nil, s.cfg.Ready()))
}

// owned returns the shards the node stores now.
func (s *Server) owned() []int {
	if s.cfg.OwnedNow != nil {
		return s.cfg.OwnedNow()
	}
	return s.cfg.Owned
}
