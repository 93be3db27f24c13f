package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eventide/eventide/loadtest/internal/report"
	"github.com/eventide/eventide/loadtest/internal/workload"
	"golang.org/x/net/html"
)

// TestSpawnedRun runs the harness end to end for a few seconds against
// a spawned all-in-one Eventide, with one objective that holds and one
// that cannot: the run must exit 1 naming the impossible one, and its
// reports must show everything else in order, the correctness check
// passed included.
func TestSpawnedRun(t *testing.T) {
	defer checkGoroutines(t, runtime.NumGoroutine())
	dir := t.TempDir()
	jsonPath, htmlPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html")
	profilePath := filepath.Join(dir, "harness.pprof")
	// The server wants a bearer token: every request of the harness must
	// carry it, or its queries and checks fail.
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := runMain(context.Background(), []string{
		"run", "--spawn", "--spawn-args", "--http-token-file " + tokenFile, "--http-token-file", tokenFile, "--duration", "3s", "--rate", "300", "--query-rate", "30", "--raw-duration", "1s",
		"--invalid", "0.03", "--late", "0.05", "--probe-rate", "30", "--seed", "42", "--progress", "off",
		"--workload", "events,queries,social,tail", "--tail-subscribers", "2", "--users", "300", "--fanout-threshold", "100", "--big-authors", "2",
		"--post-rate", "40", "--follow-rate", "5", "--unfollow-rate", "10", "--delete-rate", "5", "--post-probe-rate", "8",
		"--slo", "p99(publish)<1h,p99(raw.publish)<1h,p50(queryable)<1ns",
		"--json", jsonPath, "--html", htmlPath, "--cpuprofile", profilePath,
	}, &stdout, &stderr)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if code != exitFail {
		t.Fatalf("exit code %d, want %d (an objective failed)", code, exitFail)
	}
	if !strings.Contains(stderr.String(), "objective failed: p50(queryable)<1ns") || strings.Contains(stderr.String(), "objective failed: p99(publish)") {
		t.Errorf("stderr does not name exactly the failed objective")
	}

	// The harness's CPU profile: a gzipped profile.proto with samples.
	if prof, err := os.ReadFile(profilePath); err != nil || len(prof) < 100 || prof[0] != 0x1f || prof[1] != 0x8b {
		t.Errorf("--cpuprofile: %d bytes, %v; want a gzipped profile", len(prof), err)
	}

	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var r report.Report
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("JSON report does not decode as report.Report: %v", err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"format_version", "seed", "run", "parameters", "git", "machine", "target", "latency", "series", "events", "queries", "social", "tail", "dlq", "raw_jetstream", "server", "correctness", "objectives", "passed"} {
		if _, ok := raw[key]; !ok {
			t.Errorf("JSON report has no %q", key)
		}
	}
	if r.FormatVersion != report.FormatVersion || r.Seed != 42 || r.Parameters["rate"] != "300" || r.Machine.CPUs < 1 || !r.Target.Spawned {
		t.Errorf("report header: version %d seed %d rate %q cpus %d spawned %v", r.FormatVersion, r.Seed, r.Parameters["rate"], r.Machine.CPUs, r.Target.Spawned)
	}
	for _, kind := range []string{"publish", "queryable", "query.latest", "query.window", "query.counts", "query.timeline", "social.publish", "fanout.push", "fanout.pull", "tail"} {
		s, ok := r.Latency[kind]
		if !ok || s.Count == 0 {
			t.Errorf("latency %s: no values", kind)
			continue
		}
		for _, p := range []string{"p50", "p90", "p99", "p99.9", "p99.99", "p100"} {
			if v, ok := s.Percentiles[p]; !ok || v <= 0 || v > 60 {
				t.Errorf("latency %s %s = %v, want seconds in (0, 60]", kind, p, v)
			}
		}
		if len(r.Series[kind].Times) == 0 {
			t.Errorf("series %s is empty", kind)
		}
	}
	e := r.Events
	if e.Scheduled != 900 || e.Started+e.Dropped != e.Scheduled || e.AckedValid == 0 || e.AckedInvalid == 0 || e.Late == 0 || e.AckedProbes == 0 {
		t.Errorf("events = %+v", *e)
	}
	if r.Queries.Scheduled != 90 || r.Queries.ByKind["query.timeline"] == 0 {
		t.Errorf("queries scheduled %d (want 90), by kind %v (want timelines among them)", r.Queries.Scheduled, r.Queries.ByKind)
	}
	// The social workload: its setup, every operation kind acknowledged,
	// every probe post timed, pushed and pulled.
	so := r.Social
	if so.Scheduled != 180 || so.Started+so.Dropped != so.Scheduled || so.Users != 300 || so.BigAuthors != 2 || so.FanoutThreshold != 100 || so.Setup == nil || so.Setup.Follows != int64(so.Edges) {
		t.Errorf("social = %+v", *so)
	}
	for _, k := range []string{"post", "probe_post", "follow", "unfollow", "post_delete"} {
		if so.Acked[k] == 0 {
			t.Errorf("social acked %v: no %s", so.Acked, k)
		}
	}
	if so.ProbePostsAcked != so.Acked["probe_post"] || so.ProbePostsTimed != so.ProbePostsAcked || so.DeletesChecked == 0 || so.DrainSeconds < 0 {
		t.Errorf("social probe posts acked %d timed %d, deletes checked %d, drain %v", so.ProbePostsAcked, so.ProbePostsTimed, so.DeletesChecked, so.DrainSeconds)
	}
	var pull, push int
	for _, pa := range so.ProbeAuthors {
		if pa.Lag == nil || pa.Lag.Count == 0 || pa.Lag.Percentiles["p99"] <= 0 {
			t.Errorf("probe author %s: no fan-out lag of its own", pa.User)
		}
		if pa.Pull && pa.Followers > so.FanoutThreshold {
			pull++
		} else if !pa.Pull && pa.Followers <= so.FanoutThreshold && pa.Followers > 0 {
			push++
		}
	}
	if pull != 2 || push == 0 {
		t.Errorf("probe authors %+v: want 2 pulled above the threshold and pushed ones", so.ProbeAuthors)
	}
	if r.DLQ.InDLQ != r.DLQ.InvalidAcked || r.DLQ.ReasonMismatches != 0 {
		t.Errorf("dlq = %+v", *r.DLQ)
	}
	if r.Raw.RatePerSecond <= 0 || r.Server.PeakRSSBytes <= 0 || len(r.Server.Times) == 0 {
		t.Errorf("raw %+v server peak %d", *r.Raw, r.Server.PeakRSSBytes)
	}
	// The raw phase times every publish it sent to its ack (raw.publish);
	// it ran before the load, so it has no series on the load's axis.
	if s := r.Latency["raw.publish"]; s.Count != r.Raw.Messages || s.Percentiles["p99"] <= 0 || len(r.Series["raw.publish"].Times) != 0 {
		t.Errorf("latency raw.publish = %+v with series %v, want every one of the raw phase's %d publishes and no series", s, r.Series["raw.publish"], r.Raw.Messages)
	}
	// The server's counters ride with every sample, running totals.
	if syncs := r.Server.Counters["eventide_storage_wal_syncs_total"]; len(syncs) != len(r.Server.Times) || len(syncs) == 0 ||
		syncs[len(syncs)-1] < r.ServerCounters["eventide_storage_wal_syncs_total"] || len(r.Server.Counters["eventide_storage_compactions_total"]) != len(syncs) {
		t.Errorf("server counters per sample = %v for %d samples, want running totals of WAL fsyncs (%v during the load) and compactions", r.Server.Counters, len(r.Server.Times), r.ServerCounters["eventide_storage_wal_syncs_total"])
	}
	if r.ServerCounters["eventide_writer_batch_messages_sum"] < float64(r.Events.AckedValid) || r.ServerCounters["eventide_storage_wal_syncs_total"] == 0 {
		t.Errorf("server counters over the load = %v, want the writer's batches and WAL fsyncs", r.ServerCounters)
	}
	if tl := r.Tail; tl == nil || tl.Subscribers != 2 || tl.Received != 2*r.Events.AckedProbes || r.Latency["tail"].Count != tl.Received {
		t.Errorf("tail = %+v, want every acked probe (%d) at both subscribers, each timed", tl, r.Events.AckedProbes)
	}
	if !r.Correctness.Passed || len(r.Correctness.Checks) != 7 {
		t.Errorf("correctness = %+v", *r.Correctness)
	}
	for _, c := range r.Correctness.Checks {
		if c.Name == "probe posts reached followers" && strings.Contains(c.Detail, " 0 post-follower pairs checked") {
			t.Errorf("the fan-out check checked nothing: %s", c.Detail)
		}
	}
	if len(r.Objectives) != 3 || !r.Objectives[0].Passed || !r.Objectives[1].Passed || r.Objectives[2].Passed || r.Passed {
		t.Errorf("objectives = %+v, passed %v", r.Objectives, r.Passed)
	}

	// The HTML report parses and its data element holds the same report.
	h, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(h))
	if err != nil {
		t.Fatal(err)
	}
	var data string
	for n := range doc.Descendants() {
		if n.Type == html.ElementNode && n.Data == "script" && n.FirstChild != nil {
			for _, a := range n.Attr {
				if a.Key == "id" && a.Val == report.DataElementID {
					data = n.FirstChild.Data
				}
			}
		}
	}
	var fromHTML report.Report
	if err := json.Unmarshal([]byte(data), &fromHTML); err != nil {
		t.Fatalf("HTML data element: %v", err)
	}
	if fromHTML.Run != r.Run || fromHTML.Events.AckedValid != r.Events.AckedValid || len(fromHTML.Series["publish"].Times) != len(r.Series["publish"].Times) {
		t.Errorf("HTML data differs from the JSON report")
	}
}

// A server that does not fan out the harness's posts (its post types are
// others) fails the fan-out check: the probe posts are missing from the
// followers' timelines, and the run exits 1 naming the check.
func TestSocialCheckFails(t *testing.T) {
	t.Parallel() // with TestFindMaxRamps: both mostly wait on their servers
	var stdout, stderr bytes.Buffer
	code := runMain(context.Background(), []string{
		"run", "--spawn", "--spawn-args", "--post-types other", "--workload", "social", "--duration", "1s",
		"--users", "100", "--fanout-threshold", "20", "--big-authors", "1", "--post-rate", "20", "--post-probe-rate", "5",
		"--follow-rate", "0", "--unfollow-rate", "0", "--delete-rate", "0", "--drain-timeout", "1s", "--seed", "9", "--progress", "off",
	}, &stdout, &stderr)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if code != exitFail {
		t.Fatalf("exit code %d, want %d", code, exitFail)
	}
	if !strings.Contains(stderr.String(), "probe posts reached followers: ") || !strings.Contains(stderr.String(), "is not in the timeline of") {
		t.Errorf("stderr does not name the failed fan-out check")
	}
}

// A server without the fan-out worker cannot take the social workload:
// a configuration error found at the setup, not a wait for the setup
// timeout.
func TestSocialWithoutFanout(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	code := runMain(context.Background(), []string{"run", "--spawn", "--spawn-args", "--fanout=false", "--workload", "social",
		"--users", "50", "--fanout-threshold", "10", "--big-authors", "1", "--progress", "off"}, &stdout, &stderr)
	if code != exitConfig || !strings.Contains(stderr.String(), "is its fan-out worker off (--fanout=false)?") {
		t.Fatalf("exit %d, stderr %s; want exit %d naming the missing fan-out worker", code, stderr.String(), exitConfig)
	}
}

// A server that wants a bearer token the harness was not given is a
// configuration error found at start.
func TestTokenMissing(t *testing.T) {
	t.Parallel()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The server is a binary built here and given with --spawn-bin,
	// which the harness runs without building one.
	bin := filepath.Join(t.TempDir(), "ingest-prebuilt")
	build := exec.Command("go", "build", "-o", bin, "../cmd/ingest")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var stdout, stderr bytes.Buffer
	code := runMain(context.Background(), []string{"run", "--spawn", "--spawn-bin", bin, "--spawn-args", "--http-token-file " + tokenFile, "--progress", "off"}, &stdout, &stderr)
	if code != exitConfig || !strings.Contains(stderr.String(), "refuses the harness (401)") {
		t.Fatalf("exit %d, stderr %s; want exit %d naming the missing token", code, stderr.String(), exitConfig)
	}
	if strings.Contains(stderr.String(), "building cmd/ingest") {
		t.Errorf("--spawn-bin: the harness built cmd/ingest anyway:\n%s", stderr.String())
	}
}

// An objective on something the run as configured does not measure
// would fail with "no data" at the end of the run: it is refused at
// start, saying what to change. Each kind and workload README's
// objectives table lists is taken once where the run cannot measure it,
// and once where it can.
func TestObjectiveNeedsItsWorkload(t *testing.T) {
	social := []string{"--users", "300", "--fanout-threshold", "100", "--big-authors", "2"}
	cases := []struct {
		slo  string
		args []string
		want string // "" for accepted
	}{
		{"p99(publish)<1s", []string{"--workload", "queries"}, "add events to --workload"},
		{"p99(publish)<1s", nil, ""},
		{"p99(queryable)<1s", []string{"--workload", "queries"}, "add events to --workload"},
		{"p99(queryable)<1s", []string{"--probe-rate", "0"}, "set --probe-rate above 0"},
		{"p99(queryable)<1s", nil, ""},
		{"p50(raw.publish)<1s", []string{"--raw-duration", "0"}, "set --raw-duration above 0"},
		{"p50(raw.publish)<1s", []string{"--workload", "queries"}, "add events to --workload"},
		{"p50(raw.publish)<1s", nil, ""},
		{"p50(raw.publish)<1s", []string{"--find-max"}, "not in --find-max's steps: name publish instead"},
		{"p99(query.latest)<1s", []string{"--workload", "events"}, "add queries to --workload"},
		{"p99(query.latest)<1s", []string{"--query-mix", "window=1,counts=2"}, "the query mix (window=1,counts=2) has no latest queries: add latest=N to --query-mix"},
		{"p99(query.latest)<1s", nil, ""},
		{"mean(query.window)<1s", []string{"--query-mix", "latest=1"}, "has no window queries"},
		{"mean(query.window)<1s", nil, ""},
		{"max(query.counts)<1s", []string{"--query-mix", "latest=1"}, "has no counts queries"},
		{"max(query.counts)<1s", nil, ""},
		{"p99(query.timeline)<1s", nil, "query.timeline reads the social workload's timelines: run --workload timelines"},
		{"p99(query.timeline)<1s", append([]string{"--workload", "social,queries", "--query-mix", "latest=1"}, social...), "has no timeline queries"},
		{"p99(query.timeline)<1s", append([]string{"--workload", "timelines"}, social...), ""},
		{"p99(social.publish)<1s", nil, "add social to --workload"},
		{"p99(social.publish)<1s", append([]string{"--workload", "social"}, social...), ""},
		{"p99(fanout.push)<1s", nil, "add social to --workload"},
		{"p99(fanout.push)<1s", append([]string{"--workload", "social", "--post-probe-rate", "0"}, social...), "set --post-probe-rate above 0"},
		{"p99(fanout.push)<1s", append([]string{"--workload", "social", "--probe-authors", "0"}, social...), "set --probe-authors above 0"},
		{"p99(fanout.push)<1s", append([]string{"--workload", "fanout"}, social...), ""},
		{"p99(fanout.pull)<1s", []string{"--workload", "social", "--big-authors", "0", "--users", "300", "--fanout-threshold", "100"}, "set --big-authors above 0"},
		{"p99(fanout.pull)<1s", append([]string{"--workload", "social"}, social...), ""},
		{"p99(tail)<1s", nil, "add tail to --workload"},
		{"p99(tail)<1s", []string{"--workload", "events,tail"}, ""},
		{"drop(events)<1%", []string{"--workload", "queries"}, "add events to --workload"},
		{"errors(queries)<1%", []string{"--workload", "events"}, "add queries to --workload"},
		{"rate(social)>=1", nil, "add social to --workload"},
		{"drop<1%,errors<1%,rate(events)>=1,drop(queries)<1%", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.slo+" "+strings.Join(c.args, " "), func(t *testing.T) {
			_, err := parseConfig(append([]string{"--slo", c.slo}, c.args...), io.Discard)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), "--slo "+c.slo+": ") || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v; want one naming --slo %s and %q", err, c.slo, c.want)
			}
		})
	}
}

// Bad configuration fails at start with exit code 2 and says what is
// wrong.
func TestBadConfiguration(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--workload", "events,bogus"}, "--workload bogus: unknown workload"},
		{[]string{"run", "--workload", "tail"}, "--workload tail follows the events workload's probe events"},
		{[]string{"run", "--workload", "events,tail", "--probe-rate", "0"}, "--workload tail follows the events workload's probe events"},
		{[]string{"run", "--query-mix", "tail=1"}, "--query-mix tail: live tail subscribers are a workload of their own"},
		{[]string{"run", "--workload", "social", "--users", "500"}, "big authors need more than the fan-out threshold (10000) followers"},
		{[]string{"run", "--workload", "social", "--post-rate", "5", "--post-probe-rate", "10"}, "--post-probe-rate 10"},
		{[]string{"run", "--workload", "events,social", "--find-max"}, "run the social workload without it"},
		{[]string{"run", "--workload", "fanout", "--post-type", "Post"}, `post type "Post"`},
		{[]string{"run", "--rate", "0"}, "--rate 0"},
		{[]string{"run", "--rate", "1e9"}, "--rate 1e+09"},
		{[]string{"run", "--query-mix", "timeline=1"}, "--query-mix timeline: timeline queries read the social workload's users"},
		{[]string{"run", "--slo", "p99(query.nope)<1ms"}, "unknown kind"},
		{[]string{"run", "--invalid", "2"}, "invalid ratio 2"},
		{[]string{"run", "--query-types", "click=0"}, "--query-types"},
		{[]string{"run", "--late-max", "10s"}, "late range 1m0s to 10s"},
		{[]string{"run", "--find-max", "--workload", "queries"}, "--find-max ramps the event rate"},
		{[]string{"run", "--nats-url", "nats://" + closed, "--progress", "off"}, "cannot connect to NATS at nats://" + closed},
		{[]string{"walk"}, `unknown command "walk"`},
		{[]string{"run", "--spawn", "--spawn-env", "GOMAXPROCS"}, `--spawn-env "GOMAXPROCS": want KEY=VALUE`},
		{[]string{"run", "--spawn", "--spawn-env", "EVENTIDE_DATA=/x"}, "--spawn-env EVENTIDE_DATA: the server's configuration goes in --spawn-args"},
		{[]string{"run", "--spawn-env", "GOGC=200"}, "--spawn-env needs --spawn"},
		{[]string{"run", "--spawn-bin", "/bin/sh"}, "--spawn-bin needs --spawn"},
		{[]string{"run", "--cpuprofile", "/nonexistent/dir/p.pprof", "--nats-url", "nats://" + closed, "--progress", "off"}, "--cpuprofile: open /nonexistent/dir/p.pprof"},
		{[]string{"run", "--spawn", "--spawn-bin", "/nonexistent/ingest"}, "--spawn-bin: stat /nonexistent/ingest"},
		{[]string{"run", "--spawn", "--spawn-bin", "main_test.go"}, "--spawn-bin main_test.go: not an executable file"},
		{[]string{"run", "--http-token", "a", "--http-token-file", "/nonexistent"}, "--http-token-file excludes --http-token"},
		{[]string{"run", "--http-token-file", "/nonexistent/token"}, "--http-token-file: open /nonexistent/token"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runMain(context.Background(), c.args, &stdout, &stderr)
			if code != exitConfig || !strings.Contains(stderr.String(), c.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, stderr.String(), exitConfig, c.want)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := runMain(context.Background(), []string{"run", "-h"}, &stdout, &stderr); code != exitPass || !strings.Contains(stderr.String(), "-slo") {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
}

// --find-max ramps while the objectives hold, Eventide then raw
// JetStream: two short steps each that both hold report the second rate,
// a ratio of 1, and the run passes.
func TestFindMaxRamps(t *testing.T) {
	t.Parallel()
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	var stdout, stderr bytes.Buffer
	code := runMain(context.Background(), []string{
		"run", "--spawn", "--find-max", "--duration", "1s", "--rate", "200", "--ramp", "2", "--max-steps", "2",
		"--workload", "events", "--raw-duration", "1s", "--probe-rate", "20", "--seed", "5", "--progress", "off",
		"--slo", "p99(queryable)<1h", "--json", jsonPath,
	}, &stdout, &stderr)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if code != exitPass {
		t.Fatalf("exit code %d, want %d", code, exitPass)
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var r report.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	fm := r.FindMax
	if fm == nil || len(fm.Steps) != 2 || fm.MaxRate != 400 || !fm.AllCorrect {
		t.Fatalf("find_max = %+v", fm)
	}
	if fm.Steps[0].TargetRate != 200 || !fm.Steps[0].Held || fm.Steps[1].TargetRate != 400 || !fm.Steps[1].Held {
		t.Errorf("steps = %+v", fm.Steps)
	}
	if fm.Raw == nil || len(fm.Raw.Steps) != 2 || fm.Raw.MaxRate != 400 || fm.Ratio != 1 {
		t.Errorf("raw ramp = %+v, ratio %v", fm.Raw, fm.Ratio)
	} else if p99 := fm.Raw.Steps[1].P99["queryable"]; p99 <= 0 {
		t.Errorf("raw step has no publish-to-consumed p99")
	}
	// Every step says where its load was and what the server spent per
	// event; a raw step also what the server's counters did meanwhile.
	for _, st := range append(slices.Clone(fm.Steps), fm.Raw.Steps...) {
		if st.Started.IsZero() || st.Seconds < 0.5 || st.ServerCores <= 0 || st.ServerMicrosPerEvent <= 0 {
			t.Errorf("step %s: started %v, %v s, %v server cores, %v µs/event: want all set", st.Run, st.Started, st.Seconds, st.ServerCores, st.ServerMicrosPerEvent)
		}
		if st.SettleSeconds < settleWindow.Seconds() || st.SettleSeconds > settleTimeout.Seconds()+1 {
			t.Errorf("step %s waited %v s for the server to go quiet, want one window at least and at most the timeout", st.Run, st.SettleSeconds)
		}
		if st.ServerCounters["process_cpu_seconds_total"] <= 0 {
			t.Errorf("step %s: server counters %v, want the server's CPU among them", st.Run, st.ServerCounters)
		}
	}
	if r.Events.TargetRate != 400 || r.Queries != nil {
		t.Errorf("the report's figures are not those of the 400/s step: events %+v", r.Events)
	}
}

// checkGoroutines fails the test if, within 5 s, the goroutines do not
// come back to before: a run must stop every worker, poller and
// connection it started.
func checkGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines left running, %d before the run:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// README's flag table lists every flag of `loadtest run`, and no other,
// each with the default and the description `run -h` prints.
func TestReadmeListsEveryFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := runMain(context.Background(), []string{"run", "-h"}, &stdout, &stderr); code != exitPass {
		t.Fatalf("run -h: exit %d", code)
	}
	flags := map[string]bool{}
	help := map[string]flagHelp{}
	var last string
	for line := range strings.Lines(stderr.String()) {
		if rest, ok := strings.CutPrefix(line, "  -"); ok {
			last = strings.Fields(rest)[0]
			flags[last] = true
		} else if usage, ok := strings.CutPrefix(line, "    \t"); ok && last != "" {
			help[last] = parseFlagUsage(strings.TrimSpace(usage))
		}
	}
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "<!-- flags: generated from `loadtest run -h` -->")
	table, _, ok2 := strings.Cut(table, "<!-- end of flags -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no flag table between its markers")
	}
	listed := map[string]bool{}
	for line := range strings.Lines(table) {
		if rest, ok := strings.CutPrefix(line, "| `--"); ok {
			name, _, _ := strings.Cut(rest, "`")
			listed[name] = true
			if !flags[name] {
				t.Errorf("README lists --%s, which is not a flag", name)
				continue
			}
			cols := strings.Split(strings.TrimSpace(line), " | ")
			if len(cols) != 3 {
				t.Errorf("README's row of --%s has %d columns, want 3: %s", name, len(cols), line)
				continue
			}
			def := strings.Trim(cols[1], "`")
			what := strings.TrimSuffix(cols[2], " |")
			want := help[name]
			// run -h leaves out zero defaults (0s, 0, false, ""); the
			// table may show them.
			if def != want.def && (want.def != "" || !slices.Contains([]string{"", "0", "0s", "false"}, def)) {
				t.Errorf("README gives --%s the default %q; run -h says %q", name, def, want.def)
			}
			if what != want.what {
				t.Errorf("README describes --%s as %q; run -h says %q", name, what, want.what)
			}
		}
	}
	for f := range flags {
		if !listed[f] {
			t.Errorf("README's flag table does not list --%s", f)
		}
	}
	if len(flags) < 50 {
		t.Errorf("parsed only %d flags from run -h", len(flags))
	}
}

// flagHelp is one flag's usage as flag.PrintDefaults prints it: the
// description and the default after it.
type flagHelp struct{ def, what string }

// parseFlagUsage splits a usage line printed by flag.PrintDefaults at its
// last "(default X)", which is the flag package's own when the default is
// not the zero value, or the usage's own wording of a computed default.
func parseFlagUsage(usage string) flagHelp {
	i := strings.LastIndex(usage, " (default ")
	if i < 0 || !strings.HasSuffix(usage, ")") {
		return flagHelp{what: usage}
	}
	def := strings.TrimSuffix(usage[i+len(" (default "):], ")")
	if unq, err := strconv.Unquote(def); err == nil {
		def = unq
	}
	return flagHelp{def: def, what: usage[:i]}
}

// fanout and timelines are names for parts of the social workload: they
// select it (timelines with the queries, reading timelines only), and the
// social workload adds timelines to the default query mix.
func TestWorkloadNames(t *testing.T) {
	cases := []struct {
		args []string
		want []string // workloads on
		mix  []workload.Weight
	}{
		{[]string{"--workload", "fanout"}, []string{"social"}, nil},
		{[]string{"--workload", "timelines"}, []string{"social", "queries"}, []workload.Weight{{Name: workload.QueryTimeline, Weight: 1}}},
		{[]string{"--workload", "social,queries"}, []string{"social", "queries"},
			[]workload.Weight{{Name: workload.QueryLatest, Weight: 5}, {Name: workload.QueryWindow, Weight: 3}, {Name: workload.QueryCounts, Weight: 2}, {Name: workload.QueryTimeline, Weight: 5}}},
		{[]string{"--workload", "events,queries"}, []string{"events", "queries"},
			[]workload.Weight{{Name: workload.QueryLatest, Weight: 5}, {Name: workload.QueryWindow, Weight: 3}, {Name: workload.QueryCounts, Weight: 2}}},
	}
	for _, c := range cases {
		cfg, err := parseConfig(c.args, io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		for _, w := range c.want {
			if !cfg.Workloads[w] {
				t.Errorf("%v: workload %s is off", c.args, w)
			}
		}
		if c.mix != nil && !reflect.DeepEqual(cfg.QueryMix, c.mix) {
			t.Errorf("%v: query mix %v, want %v", c.args, cfg.QueryMix, c.mix)
		}
	}
}
