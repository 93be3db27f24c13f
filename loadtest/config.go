package main

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eventide/eventide/internal/natsconn"
	"github.com/eventide/eventide/loadtest/internal/report"
	"github.com/eventide/eventide/loadtest/internal/workload"
)

var errHelp = errors.New("help requested")

// maxRate bounds --rate: beyond it the harness itself is the bottleneck
// on any machine.
const maxRate = 1e7

// defaultFindMaxSLO is the objective of issue 13's target: publish to
// queryable within 50 ms at the 99th percentile, nearly nothing dropped.
const defaultFindMaxSLO = "p99(queryable)<=50ms,drop<0.1%,errors<0.1%"

// configError is a bad configuration found after the flags parsed (an
// unreachable server, a missing stream): exit code 2, like a bad flag.
type configError struct{ err error }

func (e configError) Error() string { return e.err.Error() }
func (e configError) Unwrap() error { return e.err }

// Workloads. "fanout" names the social workload's probe posts (part of
// it, so it selects social); "timelines" selects social and queries,
// with timeline queries in the mix; "tail" follows the events workload's
// probes live.
var (
	availableWorkloads = []string{"events", "queries", "social", "fanout", "timelines", "tail"}
	// sloWorkloads are the workloads objectives may name.
	sloWorkloads = []string{"events", "queries", "social"}
)

// queryKindNames maps the --query-mix names to query kinds.
var queryKindNames = map[string]string{
	"latest":   workload.QueryLatest,
	"window":   workload.QueryWindow,
	"counts":   workload.QueryCounts,
	"timeline": workload.QueryTimeline,
}

// Default query mixes: without and with the social workload's timelines.
const (
	defaultQueryMix       = "latest=5,window=3,counts=2"
	defaultSocialQueryMix = "latest=5,window=3,counts=2,timeline=5"
)

type config struct {
	NATSURL, HTTPURL string
	// NATS holds the authentication and TLS of the connection to
	// NATSURL (its URL is set at connect time: NATSURL, or the spawned
	// server's).
	NATS natsconn.Options
	// HTTPToken is the bearer token sent with every HTTP request (the
	// server's --http-token); empty sends none.
	HTTPToken string
	Spawn     bool
	SpawnArgs string
	SpawnEnv  []string // KEY=VALUE for the spawned server's environment
	// SpawnBin is the cmd/ingest binary --spawn runs; empty builds one
	// from the checkout the harness runs in.
	SpawnBin    string
	Stream, DLQ string

	Workloads map[string]bool
	Duration  time.Duration
	Seed      uint64
	Run       string

	EventRate    float64
	Events       workload.EventConfig
	TypeMix      string
	ProbeRate    float64
	Workers      int
	MaxLateness  time.Duration
	PublishLimit time.Duration

	QueryTypes   []workload.Weight
	QueryRate    float64
	QueryWorkers int
	QueryMix     []workload.Weight
	Query        workload.QueryConfig
	QueryTimeout time.Duration

	// The social workload.
	Social         workload.SocialConfig
	PostProbeRate  float64
	SocialWorkers  int
	SetupWorkers   int
	SetupTimeout   time.Duration
	FanoutInterval time.Duration
	TimelineCap    int

	TailSubscribers int

	RawDuration   time.Duration
	DrainTimeout  time.Duration
	ProbeInterval time.Duration
	Tick          time.Duration

	FindMax  bool
	RawRate  float64
	Ramp     float64
	MaxSteps int
	// RetryBroken is how many times a step that broke an objective is
	// run again at the same rate before the rate counts as broken.
	RetryBroken int

	Objectives []report.Objective
	JSONPath   string
	// CPUProfile is where the harness writes its own CPU profile (not the
	// server's), "" for none.
	CPUProfile string
	HTMLPath   string
	Progress   string

	// Flags holds every flag's value, for the report's parameters.
	Flags map[string]string
}

// latencyKinds are the kinds objectives may name.
func latencyKinds() []string {
	return append([]string{"publish", "queryable", "raw.publish", "social.publish", "fanout.push", "fanout.pull", "tail"}, workload.QueryKinds...)
}

func parseConfig(args []string, stderr io.Writer) (*config, error) {
	c := &config{Events: workload.DefaultEventConfig(), Social: workload.DefaultSocialConfig()}
	fs := flag.NewFlagSet("loadtest run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.NATSURL, "nats-url", "nats://127.0.0.1:4222", "NATS URL of the Eventide under test (ignored with --spawn)")
	fs.StringVar(&c.HTTPURL, "http-url", "http://127.0.0.1:8080", "HTTP API URL of the Eventide under test (ignored with --spawn)")
	c.NATS.RegisterFlags(fs) // --nats-user, --nats-creds, --nats-tls-ca, ...
	fs.StringVar(&c.HTTPToken, "http-token", "", "bearer token sent with every HTTP request (the server's --http-token); prefer --http-token-file, as flags show in ps")
	tokenFile := fs.String("http-token-file", "", "file holding the bearer token (surrounding whitespace dropped); excludes --http-token")
	fs.BoolVar(&c.Spawn, "spawn", false, "build cmd/ingest into a temporary directory and run it with a temporary data directory on free loopback ports; record its RSS and CPU")
	fs.StringVar(&c.SpawnArgs, "spawn-args", "", "extra flags for the spawned server, space-separated, e.g. '--wal-sync periodic'")
	fs.StringVar(&c.SpawnBin, "spawn-bin", "", "with --spawn: run this cmd/ingest binary (e.g. another build, to compare) instead of building one from the checkout")
	spawnEnv := fs.String("spawn-env", "", "environment variables for the spawned server only, space-separated KEY=VALUE, e.g. 'GOMAXPROCS=4 GOGC=200' (not EVENTIDE_*: use --spawn-args)")
	fs.StringVar(&c.Stream, "stream", "EVENTS", "the server's event stream (--stream of cmd/ingest)")
	fs.StringVar(&c.DLQ, "dlq-stream", "EVENTS_DLQ", "the server's dead-letter stream")
	workloads := fs.String("workload", "events,queries", "workloads to run, comma-separated: events, queries, social (fanout: its probe posts; timelines: social and timeline queries), tail (live tail subscribers of the events' probes)")
	fs.DurationVar(&c.Duration, "duration", 30*time.Second, "how long the load runs")
	seed := fs.Uint64("seed", 0, "seed of every generator; 0 picks one (printed and in the report)")

	fs.Float64Var(&c.EventRate, "rate", 1000, "events published per second (open loop)")
	fs.IntVar(&c.Events.Types, "types", c.Events.Types, "event types, drawn with a Zipf distribution")
	fs.Float64Var(&c.Events.ZipfS, "zipf", c.Events.ZipfS, "Zipf exponent of the type mix")
	fs.StringVar(&c.TypeMix, "type-mix", "", "configured type mix instead of Zipf, e.g. click=5,view=3,buy=1")
	fs.IntVar(&c.Events.PayloadMedian, "payload", c.Events.PayloadMedian, "median event body size in bytes (log-normal)")
	fs.Float64Var(&c.Events.PayloadSigma, "payload-sigma", c.Events.PayloadSigma, "sigma of the log-normal body size (0: all the same size)")
	fs.IntVar(&c.Events.PayloadMax, "payload-max", c.Events.PayloadMax, "largest event body in bytes")
	fs.Float64Var(&c.Events.LateRatio, "late", c.Events.LateRatio, "fraction of events with an event time 1 minute to --late-max in the past")
	fs.DurationVar(&c.Events.LateMax, "late-max", c.Events.LateMax, "how far back a late event's time may be (keep it under the server's shortest TTL)")
	fs.Float64Var(&c.Events.OutOfOrderRatio, "out-of-order", c.Events.OutOfOrderRatio, "fraction of events up to 2 s older than their neighbours")
	fs.Float64Var(&c.Events.InvalidRatio, "invalid", c.Events.InvalidRatio, "fraction of invalid events (each of a rejection reason the writer checks)")
	fs.Float64Var(&c.ProbeRate, "probe-rate", 20, "probe events per second (part of --rate), timed until readable over HTTP")
	fs.IntVar(&c.Workers, "workers", 128, "most event publishes in flight (the raw step's too); one past it waits at most --max-lateness, then is dropped")
	fs.DurationVar(&c.MaxLateness, "max-lateness", 100*time.Millisecond, "an operation not started this long after its intended start is dropped")
	fs.DurationVar(&c.PublishLimit, "publish-timeout", 10*time.Second, "longest wait for a publish ack")

	fs.Float64Var(&c.QueryRate, "query-rate", 50, "queries per second (open loop)")
	fs.IntVar(&c.QueryWorkers, "query-workers", 16, "most queries in flight")
	queryTypes := fs.String("query-types", "", "event types the queries read, with weights (click=3,view): the server's own data; default the run's own types, weighted like the event mix")
	queryMix := fs.String("query-mix", defaultQueryMix, "query kinds and weights: latest, window, counts, timeline; with the social workload the default is "+defaultSocialQueryMix+", with --workload timelines timeline=1")
	fs.IntVar(&c.Query.LatestN, "latest-n", 100, "limit of latest-N queries")
	fs.DurationVar(&c.Query.WindowMin, "window-min", time.Minute, "shortest window query")
	fs.DurationVar(&c.Query.WindowMax, "window-max", 10*time.Minute, "longest window query")
	fs.IntVar(&c.Query.WindowLimit, "window-limit", 1000, "limit of window queries")
	fs.DurationVar(&c.Query.CountsWindow, "counts-window", 0, "how far back counts queries reach, per minute (0: the server's default, the last hour; 24h: issue 12's dashboard query)")
	fs.DurationVar(&c.QueryTimeout, "query-timeout", 10*time.Second, "longest wait for a query")
	fs.IntVar(&c.Query.TimelineLimit, "timeline-limit", 20, "limit of timeline queries")

	sc := &c.Social
	fs.IntVar(&sc.Users, "users", sc.Users, "social: users (each may post and follow)")
	fs.IntVar(&sc.Threshold, "fanout-threshold", sc.Threshold, "social: the server's --fanout-threshold (passed to it with --spawn): big authors get more followers than this")
	fs.IntVar(&sc.BigAuthors, "big-authors", sc.BigAuthors, "social: authors with more followers than --fanout-threshold (merged at read time)")
	fs.IntVar(&sc.PushTop, "push-top", 0, "social: followers of the most followed pushed author (default half --fanout-threshold, at most --users - 1)")
	fs.Float64Var(&sc.FollowZipfS, "follow-zipf", sc.FollowZipfS, "social: Zipf exponent of follower counts by rank (and of whom run-time follows pick)")
	fs.Float64Var(&sc.PostZipfS, "post-zipf", sc.PostZipfS, "social: Zipf exponent of who posts, by rank (0: everyone alike)")
	fs.StringVar(&sc.PostType, "post-type", sc.PostType, "social: event type of posts (one of the server's --post-types)")
	fs.IntVar(&sc.PostSize, "post-size", sc.PostSize, "social: body size of a post in bytes")
	fs.Float64Var(&sc.PostRate, "post-rate", sc.PostRate, "social: posts per second (open loop)")
	fs.Float64Var(&sc.FollowRate, "follow-rate", sc.FollowRate, "social: follows per second")
	fs.Float64Var(&sc.UnfollowRate, "unfollow-rate", sc.UnfollowRate, "social: unfollows per second")
	fs.Float64Var(&sc.DeleteRate, "delete-rate", sc.DeleteRate, "social: post deletes per second (of posts at least 1 s old)")
	fs.Float64Var(&c.PostProbeRate, "post-probe-rate", 2, "social: probe posts per second (part of --post-rate), timed into their followers' timelines (fan-out lag)")
	fs.IntVar(&sc.ProbeAuthors, "probe-authors", sc.ProbeAuthors, "social: pushed authors writing probe posts, of follower counts a factor 10 apart (every big author writes them too)")
	fs.IntVar(&sc.LagSample, "lag-sample", sc.LagSample, "social: followers of each probe author whose timelines time the fan-out lag")
	fs.IntVar(&c.SocialWorkers, "social-workers", 64, "social: most operations in flight")
	fs.IntVar(&c.SetupWorkers, "setup-workers", 64, "social: most setup follows in flight")
	fs.DurationVar(&c.SetupTimeout, "setup-timeout", 5*time.Minute, "social: longest wait for the fan-out worker to apply the setup's follows")
	fs.DurationVar(&c.FanoutInterval, "fanout-interval", 50*time.Millisecond, "social: how often sampled timelines are read for probe posts (the fan-out lag's resolution)")
	fs.IntVar(&c.TailSubscribers, "tail-subscribers", 4, "tail: live tail streams (GET /v1/events/stream) following the probe events")
	fs.IntVar(&c.TimelineCap, "timeline-cap", 800, "social: the server's --timeline-cap: a probe post missing below this many newer posts counts as trimmed")

	fs.DurationVar(&c.RawDuration, "raw-duration", 5*time.Second, "length of the raw JetStream phase (publish + consume + ack on a stream of its own), run with the events workload; 0 skips it")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", 60*time.Second, "longest wait after the load for every event to be readable")
	fs.DurationVar(&c.ProbeInterval, "probe-interval", 10*time.Millisecond, "how often probes are looked for over HTTP (the queryable latency's resolution)")
	fs.DurationVar(&c.Tick, "interval", time.Second, "interval of the time series and the progress line")

	fs.BoolVar(&c.FindMax, "find-max", false, "ramp the event rate from --rate, --duration per step, until an objective breaks; report the highest rate that held (objectives default to "+defaultFindMaxSLO+")")
	fs.Float64Var(&c.RawRate, "raw-rate", 0, "--find-max: the raw JetStream ramp's first rate (default --rate)")
	fs.Float64Var(&c.Ramp, "ramp", 1.5, "--find-max: factor between steps until an objective breaks")
	fs.IntVar(&c.MaxSteps, "max-steps", 10, "--find-max: most rates tried (retries not counted)")
	fs.IntVar(&c.RetryBroken, "retry-broken", 1, "--find-max: run a step that broke an objective again at the same rate up to this many times before the rate counts as broken")
	slo := fs.String("slo", "", "objectives, e.g. 'p99(query.latest)<10ms,drop<0.1%' (see loadtest/README.md)")
	fs.StringVar(&c.JSONPath, "json", "", "write the JSON report to this file")
	fs.StringVar(&c.HTMLPath, "html", "", "write the HTML report to this file")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of the harness itself (not of the server) over the whole run to this file, for go tool pprof")
	fs.StringVar(&c.Progress, "progress", "auto", "live progress line on stderr: auto (when a terminal), on, off")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, errHelp
		}
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	var errs []error
	c.Workloads = map[string]bool{}
	for _, w := range strings.Split(*workloads, ",") {
		w = strings.TrimSpace(w)
		switch {
		case w == "":
		case w == "fanout":
			c.Workloads["social"] = true
		case w == "timelines":
			c.Workloads["social"], c.Workloads["queries"], c.Workloads["timelines"] = true, true, true
		case contains(availableWorkloads, w):
			c.Workloads[w] = true
		default:
			errs = append(errs, fmt.Errorf("--workload %s: unknown workload (known: %s)", w, strings.Join(availableWorkloads, ", ")))
		}
	}
	if len(c.Workloads) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("--workload: none given"))
	}
	if *tokenFile != "" {
		if c.HTTPToken != "" {
			errs = append(errs, errors.New("--http-token-file excludes --http-token"))
		} else if b, err := os.ReadFile(*tokenFile); err != nil {
			errs = append(errs, fmt.Errorf("--http-token-file: %w", err))
		} else if c.HTTPToken = strings.TrimSpace(string(b)); c.HTTPToken == "" {
			errs = append(errs, fmt.Errorf("--http-token-file %s: the file is empty", *tokenFile))
		}
	}
	if c.Duration <= 0 {
		errs = append(errs, fmt.Errorf("--duration %s: must be positive", c.Duration))
	}
	for _, kv := range strings.Fields(*spawnEnv) {
		key, _, ok := strings.Cut(kv, "=")
		switch {
		case !ok || key == "":
			errs = append(errs, fmt.Errorf("--spawn-env %q: want KEY=VALUE", kv))
		case strings.HasPrefix(key, "EVENTIDE_"):
			errs = append(errs, fmt.Errorf("--spawn-env %s: the server's configuration goes in --spawn-args, where the report shows it as flags", key))
		default:
			c.SpawnEnv = append(c.SpawnEnv, kv)
		}
	}
	if len(c.SpawnEnv) > 0 && !c.Spawn {
		errs = append(errs, errors.New("--spawn-env needs --spawn"))
	}
	if c.SpawnBin != "" {
		if !c.Spawn {
			errs = append(errs, errors.New("--spawn-bin needs --spawn"))
		} else if fi, err := os.Stat(c.SpawnBin); err != nil {
			errs = append(errs, fmt.Errorf("--spawn-bin: %w", err))
		} else if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			errs = append(errs, fmt.Errorf("--spawn-bin %s: not an executable file (build one with go build -o BIN ./cmd/ingest)", c.SpawnBin))
		}
	}
	c.Seed = *seed
	if c.Seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		c.Seed = binary.LittleEndian.Uint64(b[:]) | 1
	}
	var runID [4]byte
	binary.LittleEndian.PutUint32(runID[:], uint32(c.Seed>>32)^uint32(c.Seed)^uint32(time.Now().UnixNano()))
	c.Run = hex.EncodeToString(runID[:])
	c.Events.Seed, c.Events.Run = c.Seed, c.Run

	if c.TypeMix != "" {
		mix, err := workload.ParseMix(c.TypeMix)
		if err != nil {
			errs = append(errs, fmt.Errorf("--type-mix: %w", err))
		}
		c.Events.Mix = mix
	}
	// Rates: validated here so an impossible rate fails before anything
	// starts (the scheduler would refuse it too).
	if c.Workloads["events"] {
		if !(c.EventRate > 0) || c.EventRate > maxRate {
			errs = append(errs, fmt.Errorf("--rate %v: must be more than 0 and at most %d events per second", c.EventRate, int(maxRate)))
		}
		if !(c.ProbeRate >= 0) || c.ProbeRate > c.EventRate {
			errs = append(errs, fmt.Errorf("--probe-rate %v: must be 0 to --rate (%v)", c.ProbeRate, c.EventRate))
		} else if c.ProbeRate > 0 {
			c.Events.ProbeEvery = max(1, int64(c.EventRate/c.ProbeRate))
		}
		if _, err := workload.NewEventGen(c.Events); err != nil {
			errs = append(errs, err)
		}
		if c.Workers < 1 || c.Workers > 100000 {
			errs = append(errs, fmt.Errorf("--workers %d: must be 1 to 100000", c.Workers))
		}
	}
	if c.Workloads["queries"] {
		if !(c.QueryRate > 0) || c.QueryRate > 1e6 {
			errs = append(errs, fmt.Errorf("--query-rate %v: must be more than 0 and at most 1000000 per second", c.QueryRate))
		}
		if c.QueryWorkers < 1 || c.QueryWorkers > 10000 {
			errs = append(errs, fmt.Errorf("--query-workers %d: must be 1 to 10000", c.QueryWorkers))
		}
		if *queryTypes != "" {
			qt, err := workload.ParseMix(*queryTypes)
			if err != nil {
				errs = append(errs, fmt.Errorf("--query-types: %w", err))
			}
			c.QueryTypes = qt
		}
		mixSet := false
		fs.Visit(func(f *flag.Flag) { mixSet = mixSet || f.Name == "query-mix" })
		switch {
		case mixSet:
		case c.Workloads["timelines"]:
			*queryMix = "timeline=1"
		case c.Workloads["social"]:
			*queryMix = defaultSocialQueryMix
		}
		mix, err := workload.ParseMix(*queryMix)
		if err != nil {
			errs = append(errs, fmt.Errorf("--query-mix: %w", err))
		}
		for _, m := range mix {
			kind, ok := queryKindNames[m.Name]
			switch {
			case m.Name == "tail":
				errs = append(errs, errors.New("--query-mix tail: live tail subscribers are a workload of their own: --workload events,tail --tail-subscribers N"))
				continue
			case !ok:
				errs = append(errs, fmt.Errorf("--query-mix %s: unknown query kind (known: latest, window, counts, timeline)", m.Name))
				continue
			case kind == workload.QueryTimeline && !c.Workloads["social"]:
				errs = append(errs, errors.New("--query-mix timeline: timeline queries read the social workload's users: add --workload social"))
				continue
			}
			c.QueryMix = append(c.QueryMix, workload.Weight{Name: kind, Weight: m.Weight})
		}
	}
	if c.Workloads["social"] {
		sc.Run, sc.Seed = c.Run, c.Seed
		if sc.PushTop == 0 {
			sc.PushTop = min(sc.Threshold/2, sc.Users-1)
		}
		if !(c.PostProbeRate >= 0) || c.PostProbeRate > sc.PostRate {
			errs = append(errs, fmt.Errorf("--post-probe-rate %v: must be 0 to --post-rate (%v)", c.PostProbeRate, sc.PostRate))
		} else if c.PostProbeRate > 0 {
			sc.ProbeEvery = max(1, int64(sc.PostRate/c.PostProbeRate))
		}
		if r := sc.Rate(); r > 1e6 {
			errs = append(errs, fmt.Errorf("social rates add up to %v: at most 1000000 per second", r))
		}
		if _, err := workload.NewSocialGen(*sc); err != nil {
			errs = append(errs, err)
		}
		if c.SocialWorkers < 1 || c.SocialWorkers > 100000 || c.SetupWorkers < 1 || c.SetupWorkers > 10000 {
			errs = append(errs, fmt.Errorf("--social-workers %d and --setup-workers %d: must be 1 to 100000 and 1 to 10000", c.SocialWorkers, c.SetupWorkers))
		}
		if c.SetupTimeout <= 0 || c.FanoutInterval <= 0 || c.TimelineCap < 1 {
			errs = append(errs, errors.New("--setup-timeout, --fanout-interval and --timeline-cap must be positive"))
		}
		if c.FindMax {
			errs = append(errs, errors.New("--find-max ramps the event rate; run the social workload without it"))
		}
	}
	if c.Workloads["tail"] {
		if !c.Workloads["events"] || c.ProbeRate <= 0 {
			errs = append(errs, errors.New("--workload tail follows the events workload's probe events: add events, with --probe-rate > 0"))
		}
		if c.TailSubscribers < 1 || c.TailSubscribers > 10000 {
			errs = append(errs, fmt.Errorf("--tail-subscribers %d: must be 1 to 10000", c.TailSubscribers))
		}
	}
	if c.Workloads["queries"] {
		c.Query.Run = c.Run
		if c.Workloads["social"] {
			c.Query.TimelineUsers = sc.Users
		}
	}
	if c.MaxLateness < 0 {
		errs = append(errs, fmt.Errorf("--max-lateness %s: must not be negative", c.MaxLateness))
	}
	if c.ProbeInterval <= 0 || c.Tick <= 0 || c.DrainTimeout <= 0 || c.PublishLimit <= 0 || c.QueryTimeout <= 0 {
		errs = append(errs, errors.New("--probe-interval, --interval, --drain-timeout, --publish-timeout and --query-timeout must be positive"))
	}
	if c.RawDuration < 0 {
		errs = append(errs, fmt.Errorf("--raw-duration %s: must not be negative", c.RawDuration))
	}
	switch c.Progress {
	case "auto", "on", "off":
	default:
		errs = append(errs, fmt.Errorf("--progress %q: must be auto, on or off", c.Progress))
	}
	if c.FindMax {
		if !c.Workloads["events"] {
			errs = append(errs, errors.New("--find-max ramps the event rate: it needs the events workload"))
		}
		if !(c.Ramp > 1) || c.Ramp > 100 {
			errs = append(errs, fmt.Errorf("--ramp %v: must be more than 1, at most 100", c.Ramp))
		}
		if c.MaxSteps < 1 || c.MaxSteps > 100 {
			errs = append(errs, fmt.Errorf("--max-steps %d: must be 1 to 100", c.MaxSteps))
		}
		if c.RetryBroken < 0 || c.RetryBroken > 10 {
			errs = append(errs, fmt.Errorf("--retry-broken %d: must be 0 to 10", c.RetryBroken))
		}
		if strings.TrimSpace(*slo) == "" {
			*slo = defaultFindMaxSLO
		}
		if c.RawRate == 0 {
			c.RawRate = c.EventRate
		}
		if !(c.RawRate > 0) || c.RawRate > maxRate {
			errs = append(errs, fmt.Errorf("--raw-rate %v: must be more than 0 and at most %d per second", c.RawRate, int(maxRate)))
		}
	}
	objs, err := report.ParseObjectives(*slo, report.Names{Kinds: latencyKinds(), Workloads: sloWorkloads})
	if err != nil {
		errs = append(errs, fmt.Errorf("--slo: %w", err))
	}
	c.Objectives = objs
	for _, o := range objs {
		if err := c.objectiveMeasured(o); err != nil {
			errs = append(errs, fmt.Errorf("--slo %s: %w", o.Text, err))
		}
	}
	if err := c.NATS.Check(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	c.Flags = map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		v := f.Value.String()
		if (f.Name == "http-token" || slices.Contains(natsconn.SecretFlags, f.Name)) && v != "" {
			v = "REDACTED" // the report is shared; secrets are not
		}
		c.Flags[f.Name] = v
	})
	c.Flags["seed"] = fmt.Sprint(c.Seed)
	return c, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// objectiveMeasured says why the run, as configured, cannot measure what
// objective o names (nil if it can): such an objective would fail with
// "no data" only after the whole run, so it is refused at start with
// what to change.
func (c *config) objectiveMeasured(o report.Objective) error {
	needWorkload := func(w, what string) error {
		if c.Workloads[w] {
			return nil
		}
		return fmt.Errorf("%s: add %s to --workload", what, w)
	}
	switch o.Func {
	case "drop", "errors", "rate":
		if o.Arg == "" {
			return nil // over every workload the run has
		}
		return needWorkload(o.Arg, "the "+o.Arg+" workload is not running")
	}
	switch kind := o.Arg; kind {
	case "publish":
		return needWorkload("events", "publish latency is the events workload's")
	case "queryable":
		if err := needWorkload("events", "queryable latency is the events workload's probe events'"); err != nil {
			return err
		}
		if c.ProbeRate <= 0 {
			return errors.New("queryable latency is timed on probe events: set --probe-rate above 0")
		}
	case "raw.publish":
		if err := needWorkload("events", "raw.publish is timed in the raw JetStream phase, which runs with the events workload"); err != nil {
			return err
		}
		if c.RawDuration <= 0 {
			return errors.New("raw.publish is timed in the raw JetStream phase, which --raw-duration 0 skips: set --raw-duration above 0")
		}
		if c.FindMax {
			// Every step is checked against the objectives, and the raw
			// phase runs once, before the ramp: the objective would
			// break every step.
			return errors.New("raw.publish is timed once, before the ramp, not in --find-max's steps: name publish instead, which the raw ramp's steps check on their own publishes")
		}
	case "social.publish":
		return needWorkload("social", "social.publish is the social workload's")
	case "fanout.push", "fanout.pull":
		if err := needWorkload("social", kind+" is timed on the social workload's probe posts"); err != nil {
			return err
		}
		if c.PostProbeRate <= 0 {
			return fmt.Errorf("%s is timed on probe posts: set --post-probe-rate above 0", kind)
		}
		if kind == "fanout.push" && c.Social.ProbeAuthors < 1 {
			return errors.New("fanout.push is timed on pushed authors' probe posts: set --probe-authors above 0")
		}
		if kind == "fanout.pull" && c.Social.BigAuthors < 1 {
			return errors.New("fanout.pull is timed on big authors' probe posts: set --big-authors above 0")
		}
	case "tail":
		return needWorkload("tail", "tail latency is the tail workload's")
	default: // a query kind
		if err := needWorkload("queries", kind+" is the queries workload's"); err != nil {
			return err
		}
		if kind == workload.QueryTimeline && !c.Workloads["social"] {
			return errors.New("query.timeline reads the social workload's timelines: run --workload timelines (social and timeline queries), or add social to --workload and timeline=N to --query-mix")
		}
		for _, m := range c.QueryMix {
			if m.Name == kind {
				return nil
			}
		}
		var mix []string
		for _, m := range c.QueryMix {
			mix = append(mix, strings.TrimPrefix(m.Name, "query.")+"="+strconv.FormatFloat(m.Weight, 'g', -1, 64))
		}
		return fmt.Errorf("%s: the query mix (%s) has no %s queries: add %s to --query-mix", kind, strings.Join(mix, ","), strings.TrimPrefix(kind, "query."), strings.TrimPrefix(kind, "query.")+"=N")
	}
	return nil
}
