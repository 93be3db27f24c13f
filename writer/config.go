package writer

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/writer/consumer"
)

// Defaults of Config.
const (
	DefaultStream     = "EVENTS"
	DefaultSubject    = "events.>"
	DefaultDLQStream  = "EVENTS_DLQ"
	DefaultConsumer   = "eventide-writer"
	DefaultFetchBatch = consumer.DefaultFetchBatch
	DefaultFetchWait  = consumer.DefaultFetchWait
	DefaultFetchBytes = consumer.DefaultFetchBytes
	// DefaultFetchLinger is consumer.DefaultFetchLinger.
	DefaultFetchLinger = consumer.DefaultFetchLinger
	DefaultMaxPayload  = 64 << 10
	DefaultMaxSkew     = 5 * time.Minute

	// DLQSubjects are the subjects of the default dead-letter stream
	// (Config.DLQSubjects gives those of any configuration). A rejected
	// message goes to the prefix + its subject's event type (or
	// "unknown").
	DLQSubjects      = "dlq.events.>"
	DLQSubjectPrefix = "dlq.events."
)

// dlqDuplicateWindow is the JetStream deduplication window of the
// dead-letter stream: a reject redelivered within it (after a crash or a
// storage outage) is not dead-lettered twice.
const dlqDuplicateWindow = time.Hour

// Config configures a Writer. The zero value of every field means its
// default.
type Config struct {
	Stream    string        // default "EVENTS"
	Subjects  []string      // default ["events.>"]
	DLQStream string        // default "EVENTS_DLQ"; its subjects are DLQSubjects()
	Consumer  string        // durable name, default "eventide-writer"
	Replicas  int           // default 1
	MaxAge    time.Duration // stream max age, default 0 (unlimited); the DLQ keeps the same
	Retention string        // "limits" (default) | "interest" | "workqueue"

	FetchBatch int           // most messages per fetch (and per storage batch), default 1000
	FetchWait  time.Duration // longest wait for a first message when none is ready, default 100ms
	// FetchLinger is how long a fetch waits for its batch to fill while
	// messages keep coming (consumer.Config.FetchLinger): default 5ms,
	// negative never.
	FetchLinger time.Duration
	// FetchMaxBytes bounds the bytes of one fetch (as the server counts
	// them: subject, headers and body), default 16 MiB. A single message
	// larger than it is still fetched, alone.
	FetchMaxBytes int
	MaxPayload    int           // largest accepted message body in bytes, default 64 KiB
	MaxSkew       time.Duration // how far ahead of now an event time may be, default 5m

	// Types holds the per-type TTLs and sub-partitions; nil means the
	// defaults (every type allowed, 7 days, not split). An event is stored
	// with the settings of its hour bucket (Types.At): pass the history
	// catalog.RecordEventTypes returns, the same the reader is given. New
	// refuses settings that are not the store's recorded history
	// (catalog.ErrEventTypesNotRecorded).
	Types *schema.EventTypes
	// AllowTypes, when not empty, is the list of event types accepted;
	// any other is dead-lettered with type_not_allowed. Every type with
	// its own settings in Types must be on it.
	AllowTypes []string

	// StoresPartition, when set, says which rows this writer stores: the
	// mutations of its batches (events, counts and whatever else they
	// derive) whose table and partition it refuses are left out, while
	// every message is still checkpointed and acknowledged. A node of a
	// sharded deployment refuses the partitions of sharded tables whose
	// shard (bucket.Shard) it does not own. nil: everything.
	StoresPartition func(table string, partition []byte) bool
	// NoDeadLetters leaves rejected messages out of the dead-letter
	// stream (they are still counted, checkpointed and acknowledged). In a
	// sharded deployment every node reads every message and one of them,
	// the owner of shard 0, dead-letters for all.
	NoDeadLetters bool

	// Shards, when more than 1, shards the stream on JetStream's own
	// partitioning: the stream stores a message published on
	// <prefix><type> under <prefix><shard>.<type>, by a subject transform
	// "<prefix>>" -> "<prefix>{{partition(Shards)}}.>" (shard =
	// bucket.EventShard), and this writer's durable consumer is filtered
	// to the subjects of shard Shard, so it reads, stores and checkpoints
	// that shard alone (name Consumer after the shard: the checkpoint is
	// the consumer's). Subjects must then be one subject "<prefix>>". A
	// deployment runs one writer per shard it stores. 0 or 1: not sharded,
	// the stream's subjects are stored as published.
	Shards int
	Shard  int

	// ResetCheckpoint lets New start over from the beginning of the
	// stream when the stored checkpoint is past the stream's last
	// sequence (the stream was deleted and recreated). It has no effect
	// otherwise, so leaving it set is harmless.
	ResetCheckpoint bool

	// OnStored, when set, is called with the events of each batch once the
	// batch is durably applied to storage and acked (never for a batch that
	// failed), in stream order; with StoresPartition, only the events whose
	// events-table partition it stores (never with none), on the writer's committing goroutine: it
	// must be quick and must not block (the live tail, internal/tail,
	// copies them and returns). The slice is reused, and the events' Data
	// must be copied to be kept past the call.
	OnStored func(events []StoredEvent)

	Logger     *slog.Logger          // nil = slog.Default()
	Registerer prometheus.Registerer // nil = no metrics registered
	// Now is the clock for validation (skew, expiry) and remaining TTLs.
	// It should agree with the storage clock, which turns those TTLs
	// into expiry times. nil = time.Now.
	Now func() time.Time

	// For tests: the consumer's AckWait (0: consumer.DefaultAckWait), and
	// consumer.Config.NoConsumerReset.
	ackWait         time.Duration
	noConsumerReset bool
}

// DLQSubjectPrefix returns the prefix of the dead-letter subjects: a
// dead letter goes to the prefix + its event type. It is "dlq.events."
// for the default dead-letter stream and "dlq.<DLQStream>." for any other,
// so that deployments sharing one NATS (which need distinct stream names
// anyway) never share dead-letter subjects.
func (cfg Config) DLQSubjectPrefix() string {
	if cfg.DLQStream == "" || cfg.DLQStream == DefaultDLQStream {
		return DLQSubjectPrefix
	}
	return "dlq." + cfg.DLQStream + "."
}

// DLQSubjects returns the subjects of the dead-letter stream:
// DLQSubjectPrefix() + ">".
func (cfg Config) DLQSubjects() string { return cfg.DLQSubjectPrefix() + ">" }

// withDefaults returns cfg with defaults filled in, or an error naming the
// first invalid field.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Stream == "" {
		cfg.Stream = DefaultStream
	}
	if len(cfg.Subjects) == 0 {
		cfg.Subjects = []string{DefaultSubject}
	}
	if cfg.DLQStream == "" {
		cfg.DLQStream = DefaultDLQStream
	}
	if cfg.DLQStream == cfg.Stream {
		return cfg, fmt.Errorf("writer config: DLQStream %q must differ from Stream", cfg.DLQStream)
	}
	if cfg.Consumer == "" {
		cfg.Consumer = DefaultConsumer
	}
	if cfg.Shards > 1 {
		if _, err := cfg.shardPrefix(); err != nil {
			return cfg, err
		}
		if cfg.Shard < 0 || cfg.Shard >= cfg.Shards {
			return cfg, fmt.Errorf("writer config: Shard %d is not in 0..%d", cfg.Shard, cfg.Shards-1)
		}
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if cfg.MaxAge < 0 {
		return cfg, fmt.Errorf("writer config: negative MaxAge %s", cfg.MaxAge)
	}
	if _, err := parseRetention(cfg.Retention); err != nil {
		return cfg, err
	}
	if cfg.FetchBatch <= 0 {
		cfg.FetchBatch = DefaultFetchBatch
	}
	if cfg.FetchWait <= 0 {
		cfg.FetchWait = DefaultFetchWait
	}
	if cfg.FetchMaxBytes <= 0 {
		cfg.FetchMaxBytes = DefaultFetchBytes
	}
	if cfg.MaxPayload <= 0 {
		cfg.MaxPayload = DefaultMaxPayload
	}
	if cfg.MaxSkew <= 0 {
		cfg.MaxSkew = DefaultMaxSkew
	}
	if cfg.Types == nil {
		cfg.Types = &schema.EventTypes{}
	}
	if len(cfg.AllowTypes) > 0 {
		t, err := allowOnly(cfg.Types, cfg.AllowTypes)
		if err != nil {
			return cfg, err
		}
		cfg.Types = t
	}
	if err := checkTypes(cfg.Types); err != nil {
		return cfg, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg, nil
}

// allowOnly returns a copy of t that accepts only the types in allow.
func allowOnly(t *schema.EventTypes, allow []string) (*schema.EventTypes, error) {
	out := &schema.EventTypes{Default: t.Default, Types: map[string]schema.TypeSettings{}, AllowOnlyListed: true}
	for _, name := range allow {
		if err := bucket.ValidateEventType(name); err != nil {
			return nil, fmt.Errorf("writer config: AllowTypes: %w", err)
		}
		out.Types[name] = t.Settings(name)
	}
	for name := range t.Types {
		if _, ok := out.Types[name]; !ok {
			return nil, fmt.Errorf("writer config: event type %q has its own settings but is not in AllowTypes %v", name, allow)
		}
	}
	return out, nil
}

// checkTypes refuses settings that would make storing a valid event fail,
// so that a bad setting stops the process at start instead of every event.
func checkTypes(t *schema.EventTypes) error {
	check := func(name string, s schema.TypeSettings) error {
		if s.SubPartitions < 0 || s.SubPartitions > bucket.MaxSubPartitions {
			return fmt.Errorf("writer config: event type %q: %d sub-partitions, want 0..%d", name, s.SubPartitions, bucket.MaxSubPartitions)
		}
		if s.TTL < 0 {
			return fmt.Errorf("writer config: event type %q: negative TTL %s", name, s.TTL)
		}
		return nil
	}
	if err := check("*", t.Default); err != nil {
		return err
	}
	for name, s := range t.Types {
		if err := bucket.ValidateEventType(name); err != nil {
			return fmt.Errorf("writer config: %w", err)
		}
		if err := check(name, s); err != nil {
			return err
		}
	}
	return nil
}

func parseRetention(s string) (jetstream.RetentionPolicy, error) {
	switch s {
	case "", "limits":
		return jetstream.LimitsPolicy, nil
	case "interest":
		return jetstream.InterestPolicy, nil
	case "workqueue":
		return jetstream.WorkQueuePolicy, nil
	}
	return 0, fmt.Errorf("writer config: unknown Retention %q (use limits, interest or workqueue)", s)
}

// shardPrefix returns the subject prefix of a sharded stream: Subjects
// must be one "<prefix>>".
func (cfg Config) shardPrefix() (string, error) {
	if len(cfg.Subjects) == 1 {
		if p, ok := strings.CutSuffix(cfg.Subjects[0], ">"); ok && (p == "" || strings.HasSuffix(p, ".")) && !strings.Contains(p, "*") {
			return p, nil
		}
	}
	return "", fmt.Errorf("writer config: a sharded stream (Shards %d) needs one subject of the form <prefix>.>, got %v", cfg.Shards, cfg.Subjects)
}

// sharded reports whether the stream is sharded.
func (cfg Config) sharded() bool { return cfg.Shards > 1 }

// storedSubjects are the subjects as the stream stores them, for reading
// the event type out of a stored message's subject: the configured ones,
// or "<prefix>*.>" on a sharded stream (the first token after the prefix
// is the shard).
func (cfg Config) storedSubjects() []string {
	if !cfg.sharded() {
		return cfg.Subjects
	}
	p, _ := cfg.shardPrefix() // checked by withDefaults
	return []string{p + "*.>"}
}

// ShardSubject is the subject filter of shard s of a sharded stream
// whose subjects are "<prefix>>": "<prefix><s>.>".
func ShardSubject(prefix string, s int) string { return prefix + strconv.Itoa(s) + ".>" }

// SubjectTransform is the stream subject transform of a sharded stream
// whose subjects are "<prefix>>".
func SubjectTransform(prefix string, shards int) jetstream.SubjectTransformConfig {
	return jetstream.SubjectTransformConfig{
		Source:      prefix + ">",
		Destination: prefix + "{{partition(" + strconv.Itoa(shards) + ")}}.>",
	}
}
