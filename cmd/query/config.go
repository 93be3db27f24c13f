package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

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
const envPrefix = "EVENTIDE_"

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
	LogLevel        slog.Level
	LogFormat       string
	ShutdownTimeout time.Duration
	HTTP            httpflags.Guards
	Reader          reader.Options // the fields the flags set
	// Tail bounds the live tail this process relays from the storage
	// nodes (/v1/events/stream).
	Tail tail.Options

	fs *flag.FlagSet
}

// usageError is a configuration the process refuses: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

var errHelp = flag.ErrHelp

func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

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
	fs.Var(intValue{&c.Shards, 1, 1 << 16}, "shards", "shard count (`N`) of the deployment, as the storage nodes' --shards")
	fs.StringVar(&c.ownersSpec, "owners", "",
		"owner node of each shard: `items` SHARDS=NODE such as 0-3=node-a,4-7=node-b, or a file of them; empty: every shard on node "+DefaultNodeID)
	registerOwnersFlag(fs, c)
	c.NodeTimeout = queryrpc.DefaultNodeTimeout
	fs.Var(durationValue{&c.NodeTimeout}, "node-timeout",
		"longest wait (`duration`) for one storage node's answer; a shard whose node does not answer is missing from a partial answer")
	fs.StringVar(&c.DLQStream, "dlq-stream", writer.DefaultDLQStream, "JetStream `stream` of rejected messages that /v1/dlq lists")
	c.Timelines = true
	fs.Var(boolValue{&c.Timelines}, "timelines", "serve /v1/timeline/{user} and the follow lists (the storage nodes run the fan-out worker)")
	c.TimelineTTL = fanout.DefaultOptions().TimelineTTL
	fs.Var(durationValue{&c.TimelineTTL}, "timeline-ttl", "the storage nodes' --timeline-ttl (`duration`): reads never walk older timeline entries")
	r := &c.Reader
	fs.Var(intValue{&r.WarnTombstones, 1, 1 << 30}, "warn-tombstones", "`N`: a query that scans this many tombstones logs a warning")
	fs.Var(intValue{&r.FailTombstones, 1, 1 << 30}, "fail-tombstones", "`N`: a query that scans more tombstones fails (HTTP 422)")
	fs.Var(intValue{&r.MaxBuckets, 1, 1 << 20}, "max-buckets", "most hour buckets (`N`) one event query may touch")
	fs.Var(intValue{&r.MaxCountBuckets, 1, 1 << 20}, "max-count-buckets", "most hour buckets (`N`) one count query may touch")
	c.Tail = tail.Options{MaxClients: tail.DefaultMaxClients, ClientBuffer: tail.DefaultClientBuffer, Replay: tail.DefaultReplay}
	fs.Var(intValue{&c.Tail.MaxClients, 1, 1 << 20}, "tail-max-clients",
		"most live tail streams (`N`, /v1/events/stream) open at once; more get 503")
	fs.Var(intValue{&c.Tail.ClientBuffer, 1, 1 << 20}, "tail-buffer",
		"most events (`N`) queued for one live tail client (at most 4 MiB of them); a client that lets it fill is disconnected with a slow_client error event")
	fs.Var(intValue{&c.Tail.Replay, 1, 1 << 24}, "tail-replay",
		"newest events (`N`) this process keeps (at most 32 MiB of them) to replay to a live tail client that resumes with Last-Event-ID")
	c.HTTP.Register(fs)
	fs.TextVar(&c.LogLevel, "log-level", slog.LevelInfo, "log `level`: debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", "text", "log `format`: text or json")
	c.ShutdownTimeout = 10 * time.Second
	fs.Var(durationValue{&c.ShutdownTimeout}, "shutdown-timeout", "longest wait (`duration`) for in-flight HTTP requests at shutdown")

	fs.Usage = func() { printUsage(fs) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, errHelp
		}
		return nil, usageError{err}
	}
	if fs.NArg() > 0 {
		return nil, usageError{fmt.Errorf("unexpected argument %q: query takes only flags (see -h)", fs.Arg(0))}
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if explicit[f.Name] {
			return
		}
		if v, ok := lookupEnv(envName(f.Name)); ok && v != "" {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("invalid value %q for %s: %v", v, envName(f.Name), err))
			}
		}
	})
	if len(errs) > 0 {
		return nil, usageError{errors.Join(errs...)}
	}
	c.NATS.URL = c.NATSURL
	if err := c.check(); err != nil {
		return nil, usageError{err}
	}
	if err := c.HTTP.Finish(); err != nil {
		return nil, usageError{err}
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

// secretFlags are the flags whose values the log line hides.
var secretFlags = append([]string{httpflags.SecretFlag}, natsconn.SecretFlags...)

// logAttrs is the effective configuration as log attributes, passwords in
// URLs and secretFlags redacted.
func (c *config) logAttrs() []any {
	var attrs []any
	c.fs.VisitAll(func(f *flag.Flag) {
		v := f.Value.String()
		if f.Name == "nats-url" {
			v = natsconn.Redact(v)
		}
		if slices.Contains(secretFlags, f.Name) && v != "" {
			v = "REDACTED"
		}
		attrs = append(attrs, slog.String(f.Name, v))
	})
	return attrs
}

func printUsage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprintf(w, `Usage: query [flags]

Serves Eventide's HTTP API from the storage nodes (cmd/ingest processes)
over NATS request/reply: each partition's slice goes to the node owning its
shard. Stateless: run as many as you like. Every flag can also be set with
the environment variable shown; a flag on the command line wins.

`)
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  --%s", f.Name)
		if name != "" {
			fmt.Fprintf(w, " %s", name)
		}
		def := f.DefValue
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(w, "  (%s, default %s)\n    \t%s\n", envName(f.Name), def, usage)
	})
}

// durationValue is a Go duration; its refusal says what it takes, where
// the flag package's own says only "parse error". Ranges are checked after
// parsing, naming the flag.
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil {
		return "0s"
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("not a duration such as 100ms, 5m or 24h")
	}
	*v.d = d
	return nil
}

// boolValue is a boolean flag (--name alone is true) whose refusal says
// what it takes.
type boolValue struct{ b *bool }

func (v boolValue) IsBoolFlag() bool { return true }

func (v boolValue) String() string {
	if v.b == nil {
		return "false"
	}
	return strconv.FormatBool(*v.b)
}

func (v boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false")
	}
	*v.b = b
	return nil
}

// intValue is a whole number in lo..hi.
type intValue struct {
	n      *int
	lo, hi int
}

func (v intValue) String() string {
	if v.n == nil {
		return "0"
	}
	return strconv.Itoa(*v.n)
}

func (v intValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("not a whole number")
	}
	if n < v.lo || n > v.hi {
		return fmt.Errorf("%d is outside %d..%d", n, v.lo, v.hi)
	}
	*v.n = n
	return nil
}
