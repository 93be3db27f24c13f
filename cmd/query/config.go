package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/eventide/eventide/cmd/internal/cli"
	"github.com/eventide/eventide/cmd/internal/httpflags"
	"github.com/eventide/eventide/fanout"
	"github.com/eventide/eventide/internal/natsconn"
	"github.com/eventide/eventide/internal/queryrpc"
	"github.com/eventide/eventide/internal/tail"
	"github.com/eventide/eventide/reader"
	"github.com/eventide/eventide/writer"
)

// envPrefix: every flag --some-name can also be set as EVENTIDE_SOME_NAME,
// as for cmd/ingest.
const envPrefix = cli.EnvPrefix

// DefaultNodeID is cmd/ingest's node id without --node-id: the owner of
// every shard when --owners is not given.
const DefaultNodeID = "local"

// config is the effective configuration of one query process.
type config struct {
	NATSURL string
	// NATS is how to connect: NATSURL (--nats-url) with the
	// authentication and TLS flags of package natsconn.
	NATS            natsconn.Options
	HTTPAddr        string
	Shards          int
	ownersSpec      string
	Owners          []string // per shard
	OwnersKV        string   // owners bucket to watch (owners_watch.go)
	NodeTimeout     time.Duration
	DLQStream       string
	Timelines       bool
	TimelineTTL     time.Duration
	TimelineCap     int
	LogLevel        slog.Level
	LogFormat       string
	ShutdownTimeout time.Duration
	// PprofAddr, when set, serves net/http/pprof on its own listener
	// (debug.go).
	PprofAddr string
	HTTP      httpflags.Guards
	Reader    reader.Options // the fields the flags set
	// Tail bounds the live tail this process relays from the storage
	// nodes (/v1/events/stream).
	Tail tail.Options

	fs *flag.FlagSet
}

// usageError is a configuration the process refuses: exit code 2.
type usageError = cli.UsageError

// errHelp: -h or --help was asked for; the usage is printed, exit code 0.
var errHelp = cli.ErrHelp

// envName is the EVENTIDE_* variable of a flag.
func envName(flagName string) string { return cli.EnvName(flagName) }

// parseConfig reads the flags in args, then the EVENTIDE_* variables of
// the flags not given.
func parseConfig(args []string, lookupEnv func(string) (string, bool), stderr io.Writer) (*config, error) {
	c := &config{
		Reader: reader.Options{
			WarnTombstones:  reader.DefaultWarnTombstones,
			FailTombstones:  reader.DefaultFailTombstones,
			MaxBuckets:      reader.DefaultMaxBuckets,
			MaxCountBuckets: reader.DefaultMaxCountBuckets,
		},
		Shards: 1,
	}
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.fs = fs
	fs.StringVar(&c.NATSURL, "nats-url", "nats://127.0.0.1:4222",
		"`URL` of the NATS server the storage nodes serve on (comma-separated for a cluster)")
	c.NATS.RegisterFlags(fs)
	fs.StringVar(&c.HTTPAddr, "http", "127.0.0.1:8081", "`host:port` of the HTTP API, health and metrics (port 0: any free port)")
	fs.Var(cli.Int{N: &c.Shards, Lo: 1, Hi: 1 << 16}, "shards", "shard count (`N`) of the deployment, as the storage nodes' --shards")
	fs.StringVar(&c.ownersSpec, "owners", "",
		"owner node of each shard: `items` SHARDS=NODE such as 0-3=node-a,4-7=node-b, or a file of them; empty: every shard on node "+DefaultNodeID)
	registerOwnersFlag(fs, c)
	c.NodeTimeout = queryrpc.DefaultNodeTimeout
	fs.Var(cli.Duration{D: &c.NodeTimeout, Min: math.MinInt64}, "node-timeout",
		"longest wait (`duration`) for one storage node's answer; a shard whose node does not answer is missing from a partial answer")
	fs.StringVar(&c.DLQStream, "dlq-stream", writer.DefaultDLQStream, "JetStream `stream` of rejected messages that /v1/dlq lists")
	c.Timelines = true
	fs.Var(cli.Bool{B: &c.Timelines}, "timelines", "serve /v1/timeline/{user} and the follow lists (the storage nodes run the fan-out worker)")
	c.TimelineTTL = fanout.DefaultOptions().TimelineTTL
	fs.Var(cli.Duration{D: &c.TimelineTTL, Min: math.MinInt64}, "timeline-ttl", "the storage nodes' --timeline-ttl (`duration`): reads never walk older timeline entries")
	c.TimelineCap = fanout.DefaultOptions().TimelineCap
	fs.Var(cli.Int{N: &c.TimelineCap, Lo: 1, Hi: 1 << 20}, "timeline-cap", "the storage nodes' --timeline-cap (`N`): a timeline shows at most this many posts")
	r := &c.Reader
	fs.Var(cli.Int{N: &r.WarnTombstones, Lo: 1, Hi: 1 << 30}, "warn-tombstones", "`N`: a query that scans this many tombstones logs a warning")
	fs.Var(cli.Int{N: &r.FailTombstones, Lo: 1, Hi: 1 << 30}, "fail-tombstones", "`N`: a query that scans more tombstones fails (HTTP 422)")
	fs.Var(cli.Int{N: &r.MaxBuckets, Lo: 1, Hi: 1 << 20}, "max-buckets", "most hour buckets (`N`) one event query may touch")
	fs.Var(cli.Int{N: &r.MaxCountBuckets, Lo: 1, Hi: 1 << 20}, "max-count-buckets", "most hour buckets (`N`) one count query may touch")
	c.Tail = tail.Options{MaxClients: tail.DefaultMaxClients, ClientBuffer: tail.DefaultClientBuffer, Replay: tail.DefaultReplay}
	fs.Var(cli.Int{N: &c.Tail.MaxClients, Lo: 1, Hi: 1 << 20}, "tail-max-clients",
		"most live tail streams (`N`, /v1/events/stream) open at once; more get 503")
	fs.Var(cli.Int{N: &c.Tail.ClientBuffer, Lo: 1, Hi: 1 << 20}, "tail-buffer",
		"most events (`N`) queued for one live tail client (at most 4 MiB of them); a client that lets it fill is disconnected with a slow_client error event")
	fs.Var(cli.Int{N: &c.Tail.Replay, Lo: 1, Hi: 1 << 24}, "tail-replay",
		"newest events (`N`) this process keeps (at most 32 MiB of them) to replay to a live tail client that resumes with Last-Event-ID")
	c.HTTP.Register(fs)
	fs.TextVar(&c.LogLevel, "log-level", slog.LevelInfo, "log `level`: debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", "text", "log `format`: text or json")
	c.ShutdownTimeout = 10 * time.Second
	fs.Var(cli.Duration{D: &c.ShutdownTimeout, Min: math.MinInt64}, "shutdown-timeout", "longest wait (`duration`) for in-flight HTTP requests at shutdown")
	fs.StringVar(&c.PprofAddr, "pprof", "", "`host:port` serving Go's profiles (/debug/pprof/) on a listener of their own, without the token; empty: off")

	fs.Usage = func() { printUsage(fs) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, errHelp
		}
		return nil, usageError{Err: err}
	}
	if fs.NArg() > 0 {
		return nil, usageError{Err: fmt.Errorf("unexpected argument %q: query takes only flags (see -h)", fs.Arg(0))}
	}
	if err := cli.ApplyEnv(fs, cli.Explicit(fs), lookupEnv); err != nil {
		return nil, usageError{Err: err}
	}
	c.NATS.URL = c.NATSURL
	if err := c.check(); err != nil {
		return nil, usageError{Err: err}
	}
	if err := c.HTTP.Finish(); err != nil {
		return nil, usageError{Err: err}
	}
	return c, nil
}

func (c *config) check() error {
	switch {
	case c.NATSURL == "":
		return errors.New("--nats-url is empty: give the NATS server the storage nodes serve on")
	case c.NodeTimeout <= 0:
		return fmt.Errorf("--node-timeout %s: want a positive duration", c.NodeTimeout)
	case c.ShutdownTimeout <= 0:
		return fmt.Errorf("--shutdown-timeout %s: want a positive duration", c.ShutdownTimeout)
	case c.TimelineTTL <= 0:
		return fmt.Errorf("--timeline-ttl %s: want a positive duration, the storage nodes' --timeline-ttl", c.TimelineTTL)
	case c.Reader.WarnTombstones > c.Reader.FailTombstones:
		return fmt.Errorf("--warn-tombstones %d is above --fail-tombstones %d: queries would fail before they warn", c.Reader.WarnTombstones, c.Reader.FailTombstones)
	case !slices.Contains([]string{"text", "json"}, c.LogFormat):
		return fmt.Errorf("--log-format %q: want text or json", c.LogFormat)
	}
	if err := c.NATS.Check(); err != nil {
		return err
	}
	spec := c.ownersSpec
	if spec == "" {
		spec = "all=" + DefaultNodeID
	}
	owners, err := queryrpc.ParseOwners(spec, c.Shards)
	if err != nil {
		return fmt.Errorf("--owners: %w", err)
	}
	c.Owners = owners
	return nil
}

// logAttrs is the effective configuration as log attributes, passwords in
// URLs and the secret flags redacted.
func (c *config) logAttrs() []any { return cli.LogAttrs(c.fs) }

func printUsage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprintf(w, `Usage: query [flags]

Serves Eventide's HTTP API from the storage nodes (cmd/ingest processes)
over NATS request/reply: each partition's slice goes to the node owning its
shard. Stateless: run as many as you like. Every flag can also be set with
the environment variable shown; a flag on the command line wins.

`)
	cli.PrintFlags(fs)
}
