// Package report holds what a load-test run measured and writes it out: a
// JSON report (the machine-readable record, format version FormatVersion),
// a human summary, and a single-file HTML report with the data inline and
// the chart library (uPlot, vendored under vendor/uplot, MIT) embedded, so
// it opens offline. It also parses and checks --slo objectives (slo.go).
//
// Every latency is in seconds; every ratio a fraction.
package report

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/eventide/eventide/loadtest/internal/hist"
)

// FormatVersion is the JSON report's format. Bump it when a field changes
// meaning or goes away; adding fields keeps it.
const FormatVersion = 1

// Report is one run.
type Report struct {
	FormatVersion int    `json:"format_version"`
	Tool          string `json:"tool"`
	Run           string `json:"run"` // the run id in the event types
	Seed          uint64 `json:"seed"`
	// Parameters are every flag of the run, as given or defaulted.
	Parameters map[string]string `json:"parameters"`
	Git        Git               `json:"git"`
	Machine    Machine           `json:"machine"`
	Target     Target            `json:"target"`
	Started    time.Time         `json:"started"`
	Finished   time.Time         `json:"finished"`
	// DurationSeconds is the measured phase (the load itself).
	DurationSeconds float64 `json:"duration_seconds"`

	// Latency holds, per kind, the latencies from intended start:
	// "publish" (publish to JetStream ack), "queryable" (probe publish to
	// readable over HTTP), "query.latest", "query.window",
	// "query.counts", "query.timeline", "social.publish" (a social
	// operation's publish to ack), "fanout.push" and "fanout.pull" (a
	// probe post's publish to visible in every sampled follower's
	// timeline, for pushed and for big, read-time merged authors),
	// "tail" (a probe event's time to its arrival at a live tail
	// subscriber), "raw.publish" (the raw JetStream phase before the
	// load: a publish's send to its ack).
	Latency map[string]hist.Summary `json:"latency"`
	// Series is each kind's latency over time, for the charts; the raw
	// phase's "raw.publish" ran before the load and has none.
	Series map[string]hist.Series `json:"series"`
	// Errors counts failed operations by "<kind>.<cause>".
	Errors map[string]int64 `json:"errors"`

	Events  *EventsResult  `json:"events,omitempty"`
	Queries *QueriesResult `json:"queries,omitempty"`
	Social  *SocialResult  `json:"social,omitempty"`
	Tail    *TailResult    `json:"tail,omitempty"`
	DLQ     *DLQResult     `json:"dlq,omitempty"`
	Raw     *RawResult     `json:"raw_jetstream,omitempty"`
	Server  *ServerStats   `json:"server,omitempty"`
	// ServerCounters is how much each of the server's counters (from its
	// /metrics: eventide_* and process_cpu_seconds_total; histograms as
	// <name>_count and <name>_sum) moved during the load: WAL fsyncs and
	// their seconds, writer batches, flushes, compactions, stalls.
	ServerCounters map[string]float64 `json:"server_counters,omitempty"`
	// Harness is the harness's own CPU during the load: on a shared
	// machine it competes with the server.
	Harness *HarnessStats `json:"harness,omitempty"`

	// FindMax is the ramp of --find-max. The other fields then describe
	// its highest step that held (or its last step, if none did).
	FindMax *FindMax `json:"find_max,omitempty"`

	Correctness *Correctness      `json:"correctness,omitempty"`
	Objectives  []ObjectiveResult `json:"objectives"`
	// Passed is true when every objective and the correctness check
	// passed.
	Passed bool `json:"passed"`
}

// Git is the revision of the tree the harness ran from.
type Git struct {
	Revision string `json:"revision,omitempty"`
	Dirty    bool   `json:"dirty"`
}

// Machine is where the harness ran.
type Machine struct {
	OS            string `json:"os"`
	Arch          string `json:"arch"`
	CPUs          int    `json:"cpus"`
	CPUModel      string `json:"cpu_model,omitempty"`
	MemTotalBytes int64  `json:"mem_total_bytes,omitempty"`
	GoVersion     string `json:"go_version"`
	Kernel        string `json:"kernel,omitempty"`
}

// Target is the Eventide under test.
type Target struct {
	Spawned bool   `json:"spawned"`
	NATSURL string `json:"nats_url"`
	HTTPURL string `json:"http_url"`
}

// Schedule is what an open-loop workload did with its operations.
type Schedule struct {
	TargetRate float64 `json:"target_rate"` // per second
	Scheduled  int64   `json:"scheduled"`
	Started    int64   `json:"started"`
	Dropped    int64   `json:"dropped"`
	// DroppedRatio is Dropped / Scheduled.
	DroppedRatio float64 `json:"dropped_ratio"`
	// DroppedByKind splits Dropped by kind of operation: valid, invalid
	// and probe events; query kinds.
	DroppedByKind map[string]int64 `json:"dropped_by_kind,omitempty"`
	Failed        int64            `json:"failed"`
	// AchievedRate is the operations that succeeded per second of the run.
	AchievedRate float64 `json:"achieved_rate"`
}

// EventsResult is the event stream workload.
type EventsResult struct {
	Schedule
	Types []string `json:"types"`
	// Acked counts publishes JetStream acknowledged, by kind of event.
	AckedValid   int64 `json:"acked_valid"`
	AckedInvalid int64 `json:"acked_invalid"`
	AckedProbes  int64 `json:"acked_probes"`
	Late         int64 `json:"late"`
	OutOfOrder   int64 `json:"out_of_order"`
	// InvalidByReason counts acknowledged invalid events by the reason
	// they were made for.
	InvalidByReason map[string]int64 `json:"invalid_by_reason"`
	// ProbesQueryable counts probes seen over HTTP within the probe
	// timeout; ProbesMissing the acknowledged ones never seen.
	ProbesQueryable int64 `json:"probes_queryable"`
	ProbesMissing   int64 `json:"probes_missing"`
	// DrainSeconds is how long after the last publish every valid event
	// was counted over HTTP (-1 if never, within the drain timeout).
	DrainSeconds float64 `json:"drain_seconds"`
}

// QueriesResult is the query workload.
type QueriesResult struct {
	Schedule
	ByKind map[string]int64 `json:"by_kind"` // succeeded
}

// SocialResult is the social graph workload: the graph, its setup, and
// the open-loop posts, follows, unfollows and deletes.
type SocialResult struct {
	Schedule
	Users int `json:"users"`
	// Edges are the follows of the initial graph (published by the setup).
	Edges int `json:"edges"`
	// FanoutThreshold is the server's, as given to the harness; BigAuthors
	// have more followers (their posts are merged at read time).
	FanoutThreshold int                 `json:"fanout_threshold"`
	BigAuthors      int                 `json:"big_authors"`
	ProbeAuthors    []SocialProbeAuthor `json:"probe_authors"`
	Setup           *SocialSetup        `json:"setup,omitempty"`
	// Acked counts acknowledged operations by kind: post, probe_post,
	// follow, unfollow, post_delete.
	Acked map[string]int64 `json:"acked"`
	// ProbePostsAcked were acknowledged; ProbePostsTimed of them were seen
	// in every sampled follower's timeline (their fan-out lag recorded).
	ProbePostsAcked int64 `json:"probe_posts_acked"`
	ProbePostsTimed int64 `json:"probe_posts_timed"`
	// DeletesChecked are the deletes whose posts the check looked for.
	DeletesChecked int64 `json:"deletes_checked"`
	// DrainSeconds is how long after the load every probe post was timed
	// and the fan-out worker had applied every operation (-1 if not
	// within the drain timeout).
	DrainSeconds float64 `json:"drain_seconds"`
}

// TailResult is the live tail subscribers (GET /v1/events/stream of the
// run's probe type).
type TailResult struct {
	Subscribers int `json:"subscribers"`
	// Received counts probe events received, over every subscriber.
	Received int64 `json:"received"`
	// Reconnects counts streams reopened (with Last-Event-ID) after the
	// server ended them or they broke; Resets the "position too old"
	// answers to a reopening.
	Reconnects int64 `json:"reconnects"`
	Resets     int64 `json:"resets"`
}

// SocialProbeAuthor is an author whose posts are timed.
type SocialProbeAuthor struct {
	User      string `json:"user"`
	Followers int    `json:"followers"`
	Pull      bool   `json:"pull"`
	// Sample is how many of its followers' timelines time the lag.
	Sample int `json:"sample"`
	// Lag is the fan-out lag of its probe posts (fanout.push or
	// fanout.pull, for this author alone); absent when none was timed.
	Lag *hist.Summary `json:"lag,omitempty"`
}

// SocialSetup is the setup phase: the initial graph's follows published,
// then applied by the fan-out worker.
type SocialSetup struct {
	Follows          int64   `json:"follows"`
	PublishSeconds   float64 `json:"publish_seconds"`
	AppliedSeconds   float64 `json:"applied_seconds"`
	FollowsPerSecond float64 `json:"follows_per_second"`
}

// DLQResult compares the dead-letter stream with the invalid events sent.
type DLQResult struct {
	InvalidAcked int64 `json:"invalid_acked"`
	// InDLQ counts this run's dead letters (subjects dlq.events.lt-<run>-*).
	InDLQ int64 `json:"in_dlq"`
	// ReasonMismatches counts dead letters whose Eventide-Error reason is
	// not the one the event was made for.
	ReasonMismatches int64 `json:"reason_mismatches"`
}

// RawResult is the raw JetStream pipeline measured on the same server:
// publish (async) + pull consume + ack into a stream of its own, no
// storage, as fast as it goes.
type RawResult struct {
	Stream        string  `json:"stream"`
	Messages      int64   `json:"messages"`
	Seconds       float64 `json:"seconds"`
	RatePerSecond float64 `json:"rate_per_second"`
	// EventsRatio is the event workload's achieved rate over this one.
	// It is a capacity ratio only when the event rate was the most
	// Eventide could take (--find-max); otherwise it says how loaded the
	// run was.
	EventsRatio float64 `json:"events_ratio"`
}

// ServerStats is the spawned server's resources over time, read from
// /proc.
type ServerStats struct {
	PID           int       `json:"pid"`
	Times         []float64 `json:"t"`         // seconds since the run's start
	RSSBytes      []int64   `json:"rss_bytes"` // resident set size
	CPUSeconds    []float64 `json:"cpu_seconds"`
	PeakRSSBytes  int64     `json:"peak_rss_bytes"`
	CPUSecondsAll float64   `json:"cpu_seconds_total"`
	// AvgCores is CPU seconds over wall seconds of the measured phase.
	AvgCores float64 `json:"avg_cores"`
	// Counters holds, per name, the server's running total of some of its
	// /metrics counters at each sample (aligned with Times): flushes,
	// compactions and their bytes written, write stalls, WAL fsyncs and
	// their seconds, to set latency over time against them.
	Counters map[string][]float64 `json:"counters,omitempty"`
}

// FindMax is a --find-max ramp: steps of --duration each at rising event
// rates until an objective breaks, then halving the gap between the
// highest rate that held and the lowest that did not.
type FindMax struct {
	Objectives []string      `json:"objectives"`
	Steps      []FindMaxStep `json:"steps"`
	// MaxRate is the highest target event rate whose step held every
	// objective; 0 if none did.
	MaxRate float64 `json:"max_rate"`
	// AllCorrect is true when every step passed the correctness check.
	AllCorrect bool `json:"all_correct"`
	// Raw is the same ramp, under the same objectives, of the raw
	// JetStream pipeline on the same server (publish, pull consume, ack,
	// nothing stored), when it ran. In its steps "queryable" is publish
	// to consumed.
	Raw *RawRamp `json:"raw,omitempty"`
	// Ratio is MaxRate over Raw.MaxRate: Eventide's sustainable rate as a
	// fraction of raw JetStream's at the same objectives.
	Ratio float64 `json:"ratio,omitempty"`
}

// RawRamp is the raw JetStream pipeline's ramp.
type RawRamp struct {
	Steps   []FindMaxStep `json:"steps"`
	MaxRate float64       `json:"max_rate"`
}

// FindMaxStep is one step of a ramp.
type FindMaxStep struct {
	Run          string  `json:"run"`
	TargetRate   float64 `json:"target_rate"`
	AchievedRate float64 `json:"achieved_rate"`
	DroppedRatio float64 `json:"dropped_ratio"`
	// Held is true when every objective held; Failed describes the ones
	// that did not.
	Held    bool     `json:"held"`
	Failed  []string `json:"failed,omitempty"`
	Correct bool     `json:"correct"`
	// Retry is true when the step ran the rate of the step before it
	// again, because that one broke an objective (--retry-broken).
	Retry bool `json:"retry,omitempty"`
	// P99 is each latency kind's 99th percentile in seconds.
	P99 map[string]float64 `json:"p99"`
	// ServerCores is the spawned server's CPU over the step's load, in
	// cores (CPU seconds per second); HarnessCores the harness's.
	ServerCores  float64 `json:"server_cores,omitempty"`
	HarnessCores float64 `json:"harness_cores,omitempty"`
	// ServerMicrosPerEvent is the spawned server's CPU over the step's
	// load in microseconds per event achieved (ServerCores over
	// AchievedRate): a figure that moves less with the machine's load
	// than the rates do.
	ServerMicrosPerEvent float64 `json:"server_us_per_event,omitempty"`
	// SettleSeconds is how long the harness waited before the step for
	// the server to go quiet (its CPU under 0.1 cores over half a second,
	// at most 30 s): the flushes and compactions of the step before.
	SettleSeconds float64 `json:"settle_seconds"`
	// Started is when the step's load began and Seconds how long it ran,
	// to place the step in the server's samples.
	Started time.Time `json:"started"`
	Seconds float64   `json:"seconds"`
	// ServerCounters is as Report.ServerCounters, for this step. In a raw
	// JetStream step they show what Eventide's storage did meanwhile
	// (flushes, compactions of earlier steps' events).
	ServerCounters map[string]float64 `json:"server_counters,omitempty"`
}

// HarnessStats is the harness process's CPU over the load phase.
type HarnessStats struct {
	CPUSeconds float64 `json:"cpu_seconds"`
	AvgCores   float64 `json:"avg_cores"`
}

// Correctness is the check after the run.
type Correctness struct {
	Passed bool    `json:"passed"`
	Checks []Check `json:"checks"`
}

// Check is one correctness condition.
type Check struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail"`
}

// WriteJSON writes r, indented, to path.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("cannot encode the JSON report: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("cannot write the JSON report: %w", err)
	}
	return nil
}

// Metric answers objectives (Metrics) from r.
func (r *Report) Metric(fn, arg string) (float64, bool) {
	sched := func(w string) (*Schedule, bool) {
		switch {
		case w == "events" && r.Events != nil:
			return &r.Events.Schedule, true
		case w == "queries" && r.Queries != nil:
			return &r.Queries.Schedule, true
		case w == "social" && r.Social != nil:
			return &r.Social.Schedule, true
		}
		return nil, false
	}
	switch fn {
	case "drop", "errors":
		var num, den int64
		for _, w := range []string{"events", "queries", "social"} {
			if arg != "" && arg != w {
				continue
			}
			s, ok := sched(w)
			if !ok {
				continue
			}
			if fn == "drop" {
				num, den = num+s.Dropped, den+s.Scheduled
			} else {
				num, den = num+s.Failed, den+s.Started
			}
		}
		if den == 0 {
			return 0, false
		}
		return float64(num) / float64(den), true
	case "rate":
		s, ok := sched(arg)
		if !ok {
			return 0, false
		}
		return s.AchievedRate, true
	}
	sum, ok := r.Latency[arg]
	if !ok || sum.Count == 0 {
		return 0, false
	}
	switch fn {
	case "max":
		return sum.Max, true
	case "mean":
		return sum.Mean, true
	}
	// A percentile: the summaries hold the fixed list; any other p is
	// not kept after the run, so the runner fills Latency with the
	// objectives' percentiles too.
	v, ok := sum.Percentiles[fn]
	return v, ok
}
