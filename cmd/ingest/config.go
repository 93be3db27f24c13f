package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/cmd/internal/cli"
	"github.com/eventide/eventide/cmd/internal/httpflags"
	"github.com/eventide/eventide/fanout"
	"github.com/eventide/eventide/internal/natsconn"
	"github.com/eventide/eventide/internal/queryrpc"
	"github.com/eventide/eventide/internal/tail"
	"github.com/eventide/eventide/reader"
	"github.com/eventide/eventide/storage"
	"github.com/eventide/eventide/writer"
)

// envPrefix: every flag --some-name can also be set as EVENTIDE_SOME_NAME.
const envPrefix = cli.EnvPrefix

// config is the effective configuration of one ingest process.
type config struct {
	DataDir    string
	HTTPAddr   string
	AdminAddr  string
	NATSURL    string
	NATSListen string

	// MutexProfileFraction is runtime.SetMutexProfileFraction's rate for
	// /debug/pprof/mutex on the admin listener; 0: off.
	MutexProfileFraction int

	// NATS is how to connect to --nats-url: its URL (NATSURL) and the
	// authentication and TLS flags natsconn defines.
	NATS    natsconn.Options
	Types   *schema.EventTypes
	WALSync storage.WALSyncMode
	// CompactionThroughputMiB is storage.Options.CompactionThroughput in
	// MiB per second; 0: unlimited.
	CompactionThroughputMiB int
	// CompactionNice is storage.Options.CompactionNice: how much lower
	// background compactions' CPU priority is (Linux); 0: not lowered.
	CompactionNice int
	// ExtraProcs is how many Go Ps the process runs beyond the runtime's
	// default (its CPUs, or its CPU limit) when GOMAXPROCS is not set.
	ExtraProcs      int
	LogLevel        slog.Level
	LogFormat       string
	ShutdownTimeout time.Duration
	HTTP            httpflags.Guards
	// Tail bounds the live tail (/v1/events/stream).
	Tail  tail.Options
	Shard shardConfig

	Writer writer.Config  // the fields the flags set; wiring adds the rest
	Reader reader.Options // likewise
	Fanout fanoutConfig   // likewise

	// explicit records the flags set on the command line or in the
	// environment.
	explicit map[string]bool
	// fs holds every flag with its effective value, for the log line.
	fs *flag.FlagSet
}

// shardConfig is this node's place in a sharded deployment.
type shardConfig struct {
	// NodeID names the node: its storage service subjects are
	// eventide.storage.<NodeID>.*, and, when set explicitly, its durable
	// consumers are named after it.
	NodeID string
	// Shards is the deployment's shard count; Own the shards this node
	// stores (every shard by default).
	Shards  int
	ownSpec string
	Own     []int
	// OwnersKV, when set, is the KV bucket of shard owners: the node
	// applies the shards the bucket gives it, claiming the --own-shards
	// (when given) that have no owner at start.
	OwnersKV string
	claim    bool
	// NodeLease, when above 0 (with OwnersKV), turns on automatic
	// failover: the node keeps a lease in the node leases bucket and takes
	// over the shards of owners whose lease has expired (lease.go).
	NodeLease time.Duration
	// RestoreFrom is a snapshot (a copy of a storage node's storage
	// directory) to start from when this node has no store yet, and
	// RestoreNode the node id whose consumers' checkpoints it holds.
	RestoreFrom string
	RestoreNode string
	// SnapshotDir is where POST /admin/shards/{N}/snapshot writes shard
	// snapshots; RestoreShardsFrom where a shard's writer looks for one
	// to import when this node's store has no checkpoint of the shard
	// (shardsnapshot.go).
	SnapshotDir       string
	RestoreShardsFrom string
	// SnapshotInterval, when above 0, has the node write a snapshot of
	// every shard it runs that often.
	SnapshotInterval time.Duration
}

// sharded says whether the node stores only some of the shards.
func (s shardConfig) sharded() bool { return len(s.Own) < s.Shards }

// DefaultNodeID is the node id of a process without --node-id.
const DefaultNodeID = "local"

// fanoutConfig is what the flags set of the fan-out worker.
type fanoutConfig struct {
	Enabled   bool
	Consumer  string
	Options   fanout.Options
	threshold int // Options.LargeThreshold, as the flag holds it
}

// usageError is a configuration the process refuses: exit code 2.
type usageError = cli.UsageError

// errHelp: -h or --help was asked for; the usage is printed, exit code 0.
var errHelp = cli.ErrHelp

// envName is the EVENTIDE_* variable of a flag.
func envName(flagName string) string { return cli.EnvName(flagName) }

// parseConfig reads the flags in args, then the EVENTIDE_* variables of
// the flags not given (lookupEnv is os.LookupEnv in main). Usage and flag
// errors go to stderr.
func parseConfig(args []string, lookupEnv func(string) (string, bool), stderr io.Writer) (*config, error) {
	// Defaults first: a flag's default is its value when defined.
	c := &config{
		HTTPAddr:   "127.0.0.1:8080",
		NATSListen: "127.0.0.1:4222",
		Writer: writer.Config{
			Subjects:      []string{writer.DefaultSubject},
			Replicas:      1,
			FetchBatch:    writer.DefaultFetchBatch,
			FetchWait:     writer.DefaultFetchWait,
			FetchLinger:   writer.DefaultFetchLinger,
			FetchMaxBytes: writer.DefaultFetchBytes,
			MaxPayload:    writer.DefaultMaxPayload,
			MaxSkew:       writer.DefaultMaxSkew,
		},
		Reader: reader.Options{
			WarnTombstones:  reader.DefaultWarnTombstones,
			FailTombstones:  reader.DefaultFailTombstones,
			MaxBuckets:      reader.DefaultMaxBuckets,
			MaxCountBuckets: reader.DefaultMaxCountBuckets,
		},
		Fanout:   fanoutConfig{Enabled: true, Consumer: fanout.DefaultConsumer, Options: fanout.DefaultOptions()},
		Shard:    shardConfig{Shards: 1},
		explicit: map[string]bool{},
	}
	c.Fanout.threshold = int(c.Fanout.Options.LargeThreshold)
	fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.fs = fs

	fs.StringVar(&c.DataDir, "data", "./data",
		"data `directory`: the store in <dir>/storage, the embedded NATS server's JetStream store in <dir>/nats")
	fs.Var(cli.Addr{Addr: &c.HTTPAddr, Optional: false}, "http",
		"`host:port` of the HTTP API, health and metrics (port 0: any free port)")
	fs.Var(cli.Addr{Addr: &c.AdminAddr, Optional: true}, "admin",
		"`host:port` of the admin listener serving /debug/pprof/; empty: off")
	fs.Var(cli.Int{N: &c.MutexProfileFraction, Lo: 0, Hi: 1 << 20}, "mutex-profile-fraction",
		"record 1 in `N` contended mutex waits for /debug/pprof/mutex on the --admin listener (runtime.SetMutexProfileFraction; N=100 costs little); 0: off")
	fs.StringVar(&c.NATSURL, "nats-url", "",
		"`URL` of an external NATS server with JetStream (comma-separated for a cluster); empty: run an embedded one")
	fs.Var(cli.Addr{Addr: &c.NATSListen, Optional: false}, "nats-listen",
		"`host:port` where the embedded NATS server listens for clients (port 0: any free port)")
	c.NATS.RegisterFlags(fs)
	types := &typesValue{types: &schema.EventTypes{Types: map[string]schema.TypeSettings{}}}
	fs.Var(types, "types",
		"per event type `settings`: type[:ttl=DURATION][:sub=N],... where type * sets the default, e.g. *:ttl=168h,click:ttl=24h:sub=4")
	walSync := &cli.Choice{Value: "sync", Choices: []string{"sync", "periodic"}}
	fs.Var(walSync, "wal-sync",
		"`mode` of WAL durability: sync (fsync before JetStream is acked) or periodic (fsync every 100ms; a crash may lose the last interval)")
	c.CompactionThroughputMiB = int(storage.DefaultOptions().CompactionThroughput >> 20)
	fs.Var(cli.Int{N: &c.CompactionThroughputMiB, Lo: 0, Hi: 1 << 20}, "compaction-throughput",
		"`MiB` per second that background compactions may write, all together, so a large merge is spread instead of taking a core from the writer and the reads; 0: unlimited")
	c.CompactionNice = storage.DefaultOptions().CompactionNice
	fs.Var(cli.Int{N: &c.CompactionNice, Lo: 0, Hi: 19}, "compaction-nice",
		"`N` added to the nice value of the threads background compactions merge on (Linux), so the embedded NATS server, the writer and the queries are served first (keep --extra-procs at 1 or more: a lowered thread keeps its Go P while the kernel sets it aside); 0: compactions at the process's priority")
	c.ExtraProcs = DefaultExtraProcs
	fs.Var(cli.Int{N: &c.ExtraProcs, Lo: 0, Hi: 64}, "extra-procs",
		"`N` Go Ps beyond the runtime's default (the CPUs, or the CPU limit) unless GOMAXPROCS is set: a goroutine made runnable while every P is busy (a NATS read, a query) then gets a P at once and the kernel shares the CPUs, instead of waiting up to Go's 10 ms preemption behind a long one (a compaction, a large apply)")
	fs.TextVar(&c.LogLevel, "log-level", slog.LevelInfo, "log `level`: debug, info, warn or error")
	logFormat := &cli.Choice{Value: "text", Choices: []string{"text", "json"}}
	fs.Var(logFormat, "log-format", "log `format`: text or json")
	c.ShutdownTimeout = 10 * time.Second
	fs.Var(cli.Duration{D: &c.ShutdownTimeout}, "shutdown-timeout",
		"longest wait (`duration`) for in-flight HTTP requests at shutdown")
	c.HTTP.Register(fs)

	sc := &c.Shard
	fs.StringVar(&sc.NodeID, "node-id", DefaultNodeID,
		"`name` of this storage node: its read service answers on eventide.storage.<name>.*; with --own-shards fewer than all, its durable consumers are <consumer>-<name>")
	fs.Var(cli.Int{N: &sc.Shards, Lo: 1, Hi: 1 << 16}, "shards", "shard count (`N`) of the deployment: above 1 the stream is sharded by JetStream's partition(N) of the event subject, one writer per owned shard; fixed for its life")
	fs.StringVar(&sc.ownSpec, "own-shards", "all",
		"`shards` this node stores, e.g. 0-3 or 0,2,5-7; all: every shard. With --owners-kv: the shards it claims at start if they have no owner")
	fs.StringVar(&sc.RestoreFrom, "restore-from", "",
		"`directory` holding a snapshot of a storage node's storage directory: with no store in --data yet, the node starts from a copy of it and replays only the stream after its checkpoints (needs --shards above 1)")
	fs.StringVar(&sc.RestoreNode, "restore-node", "",
		"node `id` the --restore-from snapshot was taken of (default: this node's --node-id)")
	fs.StringVar(&sc.SnapshotDir, "snapshot-dir", "",
		"`directory` where POST /admin/shards/{N}/snapshot (on --admin), and --snapshot-interval, write a snapshot of shard N as shard-N/: its SSTables and the stream sequence they cover (needs --shards above 1, and --admin or --snapshot-interval)")
	fs.Var(cli.Duration{D: &sc.SnapshotInterval, Min: 0}, "snapshot-interval",
		"write a snapshot of every shard this node runs into --snapshot-dir this often (`duration`; each pauses the shard's writer for a flush); 0: only on request")
	fs.StringVar(&sc.RestoreShardsFrom, "restore-shards-from", "",
		"`directory` of shard snapshots (shard-N/, as --snapshot-dir writes them): a shard this node starts with no checkpoint of its own in its store is imported from its snapshot there, and only the stream after it is replayed (needs --shards above 1)")
	fs.StringVar(&sc.OwnersKV, "owners-kv", "",
		"NATS KV `bucket` of shard owners (e.g. "+queryrpc.DefaultOwnersBucket+"): the node stores the shards the bucket gives it and follows moves; empty: --own-shards, static")
	fs.Var(cli.Duration{D: &sc.NodeLease, Min: 0}, "node-lease",
		"with --owners-kv: keep a lease of this `duration` in the KV bucket "+nodeLeasesBucket+" and take over the shards of owners whose lease has expired (automatic failover; every node of the deployment should give the same value); 0: off, shards move only through the owners bucket")

	c.Tail = tail.Options{MaxClients: tail.DefaultMaxClients, ClientBuffer: tail.DefaultClientBuffer, Replay: tail.DefaultReplay}
	fs.Var(cli.Int{N: &c.Tail.MaxClients, Lo: 1, Hi: 1 << 20}, "tail-max-clients",
		"most live tail streams (`N`, /v1/events/stream) open at once; more get 503")
	fs.Var(cli.Int{N: &c.Tail.ClientBuffer, Lo: 1, Hi: 1 << 20}, "tail-buffer",
		"most events (`N`) queued for one live tail client (at most 4 MiB of them); a client that lets it fill is disconnected with a slow_client error event")
	fs.Var(cli.Int{N: &c.Tail.Replay, Lo: 1, Hi: 1 << 24}, "tail-replay",
		"newest events (`N`) kept (at most 32 MiB of them) to replay to a live tail client that resumes with Last-Event-ID")

	w := &c.Writer
	fs.StringVar(&w.Stream, "stream", writer.DefaultStream, "JetStream `stream` of events (created if missing)")
	fs.Var(&cli.List{List: &w.AllowTypes, EmptyOK: true}, "allow-types", "comma-separated event `types` accepted; others are dead-lettered (type_not_allowed). Default: every type")
	subjects := &cli.List{List: &w.Subjects}
	fs.Var(subjects, "subjects", "comma-separated `subjects` of the stream; the token matched by > is the event type")
	fs.StringVar(&w.DLQStream, "dlq-stream", writer.DefaultDLQStream, "JetStream `stream` of rejected messages (subjects "+writer.DLQSubjects+", or dlq.<stream>.> for another name)")
	fs.StringVar(&w.Consumer, "consumer", writer.DefaultConsumer, "durable consumer `name` of the writer")
	fs.Var(cli.Int{N: &w.Replicas, Lo: 1, Hi: 5}, "replicas", "replicas (`N`) of the streams: 1, or 3 on a NATS cluster")
	fs.Var(cli.Duration{D: &w.MaxAge, Min: 0}, "max-age", "how long the streams keep messages (`duration`); 0: no limit")
	retention := &cli.Choice{Value: "limits", Choices: []string{"limits", "interest", "workqueue"}}
	fs.Var(retention, "retention", "retention `policy` of the events stream: limits, interest or workqueue")
	fs.Var(cli.Int{N: &w.FetchBatch, Lo: 1, Hi: 1 << 20}, "fetch-batch", "most messages (`N`) per fetch, and per storage batch")
	fs.Var(cli.Int{N: &w.FetchMaxBytes, Lo: 1 << 10, Hi: 1 << 30}, "fetch-max-bytes", "most `bytes` per fetch; one larger message is still fetched, alone")
	fs.Var(cli.Duration{D: &w.FetchWait, Min: time.Millisecond}, "fetch-wait", "longest wait (`duration`) for a first message when none is ready")
	fs.Var(cli.Duration{D: &w.FetchLinger, Min: 0}, "fetch-linger", "while messages keep coming, how long (`duration`) a fetch waits for its batch to fill (--fetch-batch or --fetch-max-bytes) before it takes what has arrived; 0: never waits to fill up")
	fs.Var(cli.Int{N: &w.MaxPayload, Lo: 1, Hi: 64 << 20}, "max-payload", "largest accepted event in `bytes`; larger ones go to the dead-letter stream")
	fs.Var(cli.Duration{D: &w.MaxSkew, Min: time.Second}, "max-skew", "how far ahead of now an event time may be (`duration`)")
	fs.Var(cli.Bool{B: &w.ResetCheckpoint}, "reset-checkpoint",
		"start over from the beginning of the stream when the stored checkpoint is past its end (the stream was recreated)")

	r := &c.Reader
	fs.Var(cli.Int{N: &r.WarnTombstones, Lo: 1, Hi: 1 << 30}, "warn-tombstones", "`N`: a query that scans this many tombstones logs a warning")
	fs.Var(cli.Int{N: &r.FailTombstones, Lo: 1, Hi: 1 << 30}, "fail-tombstones", "`N`: a query that scans more tombstones fails (HTTP 422)")
	fs.Var(cli.Int{N: &r.MaxBuckets, Lo: 1, Hi: 1 << 20}, "max-buckets", "most hour buckets (`N`) one event query may touch")
	fs.Var(cli.Int{N: &r.MaxCountBuckets, Lo: 1, Hi: 1 << 20}, "max-count-buckets", "most hour buckets (`N`) one count query may touch")

	fo := &c.Fanout
	fo.Enabled = true
	fs.Var(cli.Bool{B: &fo.Enabled}, "fanout", "run the fan-out worker: follow graph and timelines (GET /v1/timeline/{user})")
	fs.StringVar(&fo.Consumer, "fanout-consumer", fanout.DefaultConsumer, "durable consumer `name` of the fan-out worker")
	fs.Var(&cli.List{List: &fo.Options.PostTypes}, "post-types", "comma-separated event `types` that are posts (field author) for the timelines")
	fs.Var(cli.Int{N: &fo.threshold, Lo: 0, Hi: 1 << 30}, "fanout-threshold", "an author with more followers (`N`) than this is merged into timelines at read time instead of pushed")
	fs.Var(cli.Int{N: &fo.Options.ChunkSize, Lo: 1, Hi: 1 << 20}, "fanout-chunk-size", "most followers (`N`) one fan-out chunk writes")
	fs.Var(cli.Int{N: &fo.Options.Workers, Lo: 1, Hi: 64}, "fanout-workers", "most fan-out chunks (`N`) worked at once, one per pending job (each job's next chunk is read while one is applied)")
	fs.Var(cli.Int{N: &fo.Options.BusyRowsPerSecond, Lo: 1, Hi: 1 << 30}, "fanout-busy-rate", "timeline rows per second (`N`) the fan-out writes at most while the writer has a backlog")
	fs.Var(cli.Int{N: &fo.Options.Backfill, Lo: 0, Hi: 10_000}, "fanout-backfill", "how many of an author's newest posts (`N`) a follow copies into the follower's timeline")
	fs.Var(cli.Duration{D: &fo.Options.TimelineTTL, Min: time.Second}, "timeline-ttl", "how long a timeline copy lives after its post time (`duration`)")
	fs.Var(cli.Int{N: &fo.Options.TimelineCap, Lo: 1, Hi: 1 << 20}, "timeline-cap", "length (`N`) a timeline is trimmed back to")

	fs.Usage = func() { printUsage(fs) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, errHelp
		}
		return nil, usageError{Err: err} // the flag package printed it and the usage
	}
	if fs.NArg() > 0 {
		return nil, usageError{Err: fmt.Errorf("unexpected argument %q: ingest takes only flags (see -h)", fs.Arg(0))}
	}
	fs.Visit(func(f *flag.Flag) { c.explicit[f.Name] = true })
	if err := cli.ApplyEnv(fs, c.explicit, lookupEnv); err != nil {
		return nil, usageError{Err: err}
	}

	c.NATS.URL = c.NATSURL
	c.Types = types.types
	c.WALSync = storage.WALSync
	if walSync.Value == "periodic" {
		c.WALSync = storage.WALPeriodic
	}
	c.LogFormat = logFormat.Value
	w.Retention = retention.Value
	if w.FetchLinger == 0 {
		w.FetchLinger = -1 // off; the writer's zero value is its default
	}
	w.Types, r.Types = c.Types, c.Types
	fo.Options.LargeThreshold = int64(fo.threshold)
	if c.explicit["stream"] && !c.explicit["dlq-stream"] && w.Stream != writer.DefaultStream {
		// A second deployment on the same NATS names its own stream; its
		// dead letters follow, instead of landing in the first one's.
		w.DLQStream = w.Stream + "_DLQ"
	}
	if err := c.checkShards(); err != nil {
		return nil, usageError{Err: err}
	}
	if c.MutexProfileFraction > 0 && c.AdminAddr == "" {
		return nil, usageError{Err: errors.New("--mutex-profile-fraction needs --admin: the mutex profile is served at /debug/pprof/mutex on the admin listener")}
	}
	if err := c.check(); err != nil {
		return nil, usageError{Err: err}
	}
	if err := c.HTTP.Finish(); err != nil {
		return nil, usageError{Err: err}
	}
	return c, nil
}

// checkShards parses --own-shards and names the consumers of a node that
// stores part of the shards: every node of a sharded deployment reads the
// whole stream through durable consumers of its own.
func (c *config) checkShards() error {
	sc := &c.Shard
	if err := queryrpc.CheckNodeID(sc.NodeID); err != nil {
		return fmt.Errorf("--node-id: %w", err)
	}
	own, err := queryrpc.ParseShardSet(sc.ownSpec, sc.Shards)
	if err != nil {
		return fmt.Errorf("--own-shards: %w", err)
	}
	if len(own) == 0 {
		return fmt.Errorf("--own-shards %q names no shard", sc.ownSpec)
	}
	sc.Own = own
	if sc.Shards > 1 && !slices.Equal(c.Writer.Subjects, []string{writer.DefaultSubject}) && len(c.Writer.Subjects) > 0 {
		// The shard of an event is the hash of its subject, and cmd/query
		// routes by the hash of events.<type>.
		return fmt.Errorf("--subjects %v with --shards %d: a sharded deployment publishes on %s (cmd/query routes by it)",
			c.Writer.Subjects, sc.Shards, writer.DefaultSubject)
	}
	if sc.RestoreFrom != "" {
		if sc.Shards < 2 {
			return errors.New("--restore-from needs --shards of 2 or more (the all-in-one restores by copying its data directory)")
		}
		if sc.RestoreNode == "" {
			sc.RestoreNode = sc.NodeID
		}
		if err := queryrpc.CheckNodeID(sc.RestoreNode); err != nil {
			return fmt.Errorf("--restore-node: %w", err)
		}
	} else if sc.RestoreNode != "" {
		return errors.New("--restore-node needs --restore-from")
	}
	if sc.Shards < 2 && (sc.SnapshotDir != "" || sc.RestoreShardsFrom != "") {
		return errors.New("--snapshot-dir and --restore-shards-from need --shards of 2 or more (a node of one shard snapshots its whole data directory)")
	}
	if sc.SnapshotInterval > 0 && sc.SnapshotDir == "" {
		return errors.New("--snapshot-interval needs --snapshot-dir: where the snapshots go")
	}
	if sc.SnapshotDir != "" && c.AdminAddr == "" && sc.SnapshotInterval == 0 {
		return errors.New("--snapshot-dir needs --admin (snapshots on request: POST /admin/shards/{N}/snapshot on the admin listener) or --snapshot-interval")
	}
	sc.claim = sc.OwnersKV == "" || c.explicit["own-shards"]
	if sc.NodeLease > 0 && sc.OwnersKV == "" {
		return errors.New("--node-lease needs --owners-kv: a node takes over shards through the owners bucket")
	}
	if sc.NodeLease > 0 && sc.NodeLease < time.Second {
		return fmt.Errorf("--node-lease %v is below 1s (the bucket's TTL granularity)", sc.NodeLease)
	}
	if sc.OwnersKV != "" {
		if sc.Shards < 2 {
			return errors.New("--owners-kv needs --shards of 2 or more")
		}
		if !c.explicit["node-id"] {
			return errors.New("--owners-kv needs --node-id: the bucket names owners by node id")
		}
		if !c.explicit["own-shards"] {
			sc.Own = nil // owns what the bucket gives it
		}
	}
	if sc.sharded() && !c.explicit["node-id"] {
		return fmt.Errorf("--own-shards %s stores only part of the %d shards: give --node-id, so that this node's read service and consumers are its own", sc.ownSpec, sc.Shards)
	}
	// Only a node of a sharded deployment names its consumers after
	// itself: the checkpoint is kept per consumer name, so renaming the
	// consumers of an existing single node's store would replay the stream
	// into it and count every event again. With --shards above 1 the
	// writers' consumers are new anyway (one per shard, on the
	// partitioned subjects), and each node needs its own.
	if sc.sharded() || sc.Shards > 1 {
		if !c.explicit["consumer"] {
			c.Writer.Consumer = writer.DefaultConsumer + "-" + sc.NodeID
		}
		if !c.explicit["fanout-consumer"] {
			c.Fanout.Consumer = fanout.DefaultConsumer + "-" + sc.NodeID
		}
	}
	return nil
}

// check refuses combinations no single flag can.
func (c *config) check() error {
	switch {
	case c.DataDir == "":
		return errors.New("--data is empty: give a data directory")
	case c.explicit["nats-url"] && c.explicit["nats-listen"]:
		return errors.New("--nats-url and --nats-listen are both set: --nats-listen configures the embedded NATS server, which --nats-url replaces; give one")
	case c.Reader.WarnTombstones > c.Reader.FailTombstones:
		return fmt.Errorf("--warn-tombstones %d is above --fail-tombstones %d: queries would fail before they warn", c.Reader.WarnTombstones, c.Reader.FailTombstones)
	case c.Writer.DLQStream == c.Writer.Stream:
		return fmt.Errorf("--dlq-stream and --stream are both %q: they must differ", c.Writer.Stream)
	case c.Fanout.Enabled && c.Fanout.Consumer == c.Writer.Consumer:
		return fmt.Errorf("--fanout-consumer and --consumer are both %q: the fan-out worker needs its own durable consumer", c.Writer.Consumer)
	case c.ShutdownTimeout <= 0:
		return fmt.Errorf("--shutdown-timeout %s: want a positive duration", c.ShutdownTimeout)
	}
	if c.NATSURL == "" && c.NATS.Secured() {
		for _, name := range natsconn.FlagNames {
			if c.explicit[name] {
				return fmt.Errorf("--%s is set without --nats-url: NATS authentication and TLS apply to an external server; the embedded one takes only this process's in-process connection", name)
			}
		}
	}
	if err := c.NATS.Check(); err != nil {
		return err
	}
	// The writer refuses these too, but only after NATS and storage have
	// started, with exit code 1 and without naming the flags.
	allow := c.Writer.AllowTypes
	for _, name := range allow {
		if err := bucket.ValidateEventType(name); err != nil {
			return fmt.Errorf("--allow-types: %w", err)
		}
	}
	if len(allow) > 0 && c.Types != nil {
		for _, name := range slices.Sorted(maps.Keys(c.Types.Types)) {
			if !slices.Contains(allow, name) {
				return fmt.Errorf("--types sets event type %q, which --allow-types %s does not list: list it, or drop its settings", name, strings.Join(allow, ","))
			}
		}
	}
	for _, t := range c.Fanout.Options.PostTypes {
		if err := bucket.ValidateEventType(t); err != nil {
			return fmt.Errorf("--post-types: %w", err)
		}
	}
	return nil
}

// logAttrs is the effective configuration as log attributes, one per
// flag, with passwords in URLs and the secret flags redacted.
func (c *config) logAttrs() []any { return cli.LogAttrs(c.fs) }

func printUsage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprintf(w, `Usage: ingest [flags]

Runs Eventide in one process: an embedded NATS server with JetStream (or
--nats-url), the storage engine in --data, the writer that moves events from
NATS into storage, and the HTTP API. Every flag can also be set with the
environment variable shown; a flag on the command line wins.

`)
	cli.PrintFlags(fs)
	fmt.Fprintf(w, "  --version\n    \tprint the version and VCS revision, and exit\n")
}

// typesValue is a schema.ParseEventTypes spec.
type typesValue struct {
	spec  string
	types *schema.EventTypes
}

func (v *typesValue) String() string {
	if v == nil {
		return ""
	}
	return v.spec
}

func (v *typesValue) Set(s string) error {
	t, err := schema.ParseEventTypes(s)
	if err != nil {
		return err
	}
	v.spec, v.types = s, t
	return nil
}
