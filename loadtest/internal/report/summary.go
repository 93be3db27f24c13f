package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// WriteSummary writes the human summary of r.
func (r *Report) WriteSummary(w io.Writer) {
	var b strings.Builder
	fmt.Fprintf(&b, "Eventide load test %s (seed %d), %.1fs measured, started %s\n", r.Run, r.Seed, r.DurationSeconds, r.Started.UTC().Format("2006-01-02 15:04:05Z"))
	target := "running server"
	if r.Target.Spawned {
		target = "spawned all-in-one"
	}
	fmt.Fprintf(&b, "target: %s, NATS %s, HTTP %s\n", target, r.Target.NATSURL, r.Target.HTTPURL)
	fmt.Fprintf(&b, "machine: %d CPUs %s, %s/%s, %s; git %s%s\n\n", r.Machine.CPUs, r.Machine.CPUModel, r.Machine.OS, r.Machine.Arch, r.Machine.GoVersion, r.Git.Revision, map[bool]string{true: " (dirty)"}[r.Git.Dirty])

	if fm := r.FindMax; fm != nil {
		fmt.Fprintf(&b, "find-max against %s (server and harness: CPU cores used during each step's load):\n", strings.Join(fm.Objectives, ", "))
		writeSteps(&b, "Eventide", "p99 queryable", fm.Steps)
		if fm.Raw != nil {
			writeSteps(&b, "raw JetStream (publish, consume, ack; no storage)", "p99 consumed", fm.Raw.Steps)
			fmt.Fprintf(&b, "highest rates that held: Eventide %.0f/s, raw JetStream %.0f/s: %.3fx\n", fm.MaxRate, fm.Raw.MaxRate, fm.Ratio)
		}
		if fm.MaxRate > 0 {
			fmt.Fprintf(&b, "highest rate that held: %.0f events/s; the figures below are of that step\n\n", fm.MaxRate)
		} else {
			b.WriteString("no rate held; the figures below are of the last step\n\n")
		}
	}
	sched := func(name string, s Schedule) {
		fmt.Fprintf(&b, "%-8s target %.0f/s achieved %.1f/s; scheduled %d, started %d, dropped %d (%.3f%%), failed %d\n",
			name, s.TargetRate, s.AchievedRate, s.Scheduled, s.Started, s.Dropped, 100*s.DroppedRatio, s.Failed)
	}
	if e := r.Events; e != nil {
		sched("events", e.Schedule)
		fmt.Fprintf(&b, "         acked: %d valid (%d late, %d out of order), %d invalid, %d probes; probes queryable %d, missing %d",
			e.AckedValid, e.Late, e.OutOfOrder, e.AckedInvalid, e.AckedProbes, e.ProbesQueryable, e.ProbesMissing)
		if e.DrainSeconds >= 0 {
			fmt.Fprintf(&b, "; all counted %.2fs after the last publish\n", e.DrainSeconds)
		} else {
			b.WriteString("; not all counted within the drain timeout\n")
		}
	}
	if q := r.Queries; q != nil {
		sched("queries", q.Schedule)
	}
	if so := r.Social; so != nil {
		sched("social", so.Schedule)
		fmt.Fprintf(&b, "         %d users, %d follows, %d big authors above the fan-out threshold %d", so.Users, so.Edges, so.BigAuthors, so.FanoutThreshold)
		if st := so.Setup; st != nil {
			fmt.Fprintf(&b, "; setup applied in %.1fs (%.0f follows/s)", st.AppliedSeconds, st.FollowsPerSecond)
		}
		fmt.Fprintf(&b, "\n         acked:")
		for _, k := range slices.Sorted(maps.Keys(so.Acked)) {
			fmt.Fprintf(&b, " %d %s", so.Acked[k], k)
		}
		fmt.Fprintf(&b, "; probe posts timed %d of %d", so.ProbePostsTimed, so.ProbePostsAcked)
		if so.DrainSeconds >= 0 {
			fmt.Fprintf(&b, "; all applied %.2fs after the last publish\n", so.DrainSeconds)
		} else {
			b.WriteString("; not all applied within the drain timeout\n")
		}
		for _, pa := range so.ProbeAuthors {
			how := "pushed"
			if pa.Pull {
				how = "pulled"
			}
			fmt.Fprintf(&b, "         probe author %s, %d followers (%s): ", pa.User, pa.Followers, how)
			if pa.Lag == nil {
				b.WriteString("no probe post timed\n")
				continue
			}
			fmt.Fprintf(&b, "fan-out lag p50 %s, p99 %s, max %s over %d posts\n", FormatSeconds(pa.Lag.Percentiles["p50"]),
				FormatSeconds(pa.Lag.Percentiles["p99"]), FormatSeconds(pa.Lag.Max), pa.Lag.Count)
		}
	}
	if tl := r.Tail; tl != nil {
		fmt.Fprintf(&b, "tail     %d live tail subscribers: %d probe events received, %d reconnects, %d resets\n", tl.Subscribers, tl.Received, tl.Reconnects, tl.Resets)
	}
	if d := r.DLQ; d != nil {
		fmt.Fprintf(&b, "DLQ: %d dead letters for %d invalid events acked, %d with another reason\n", d.InDLQ, d.InvalidAcked, d.ReasonMismatches)
	}
	if raw := r.Raw; raw != nil {
		fmt.Fprintf(&b, "raw JetStream (publish + consume + ack, no storage): %.0f/s over %d messages; events achieved %.3fx of it\n",
			raw.RatePerSecond, raw.Messages, raw.EventsRatio)
	}
	if s := r.Server; s != nil {
		fmt.Fprintf(&b, "server: peak RSS %.1f MiB, %.1f CPU seconds, %.2f cores on average\n",
			float64(s.PeakRSSBytes)/(1<<20), s.CPUSecondsAll, s.AvgCores)
	}
	if line := DescribeCounters(r.ServerCounters, r.DurationSeconds); line != "" {
		fmt.Fprintf(&b, "server during the load: %s\n", line)
	}
	if h := r.Harness; h != nil {
		fmt.Fprintf(&b, "harness: %.1f CPU seconds during the load, %.2f cores on average\n", h.CPUSeconds, h.AvgCores)
	}

	b.WriteString("\nlatency from intended start:\n")
	fmt.Fprintf(&b, "  %-14s %9s %9s %9s %9s %9s %9s %9s\n", "kind", "count", "p50", "p90", "p99", "p99.9", "p99.99", "max")
	for _, kind := range slices.Sorted(maps.Keys(r.Latency)) {
		s := r.Latency[kind]
		fmt.Fprintf(&b, "  %-14s %9d %9s %9s %9s %9s %9s %9s\n", kind, s.Count,
			FormatSeconds(s.Percentiles["p50"]), FormatSeconds(s.Percentiles["p90"]), FormatSeconds(s.Percentiles["p99"]),
			FormatSeconds(s.Percentiles["p99.9"]), FormatSeconds(s.Percentiles["p99.99"]), FormatSeconds(s.Max))
	}
	if len(r.Errors) > 0 {
		b.WriteString("\nerrors:\n")
		for _, k := range slices.Sorted(maps.Keys(r.Errors)) {
			fmt.Fprintf(&b, "  %-40s %d\n", k, r.Errors[k])
		}
	}
	if c := r.Correctness; c != nil {
		fmt.Fprintf(&b, "\ncorrectness: %s\n", passWord(c.Passed))
		for _, ch := range c.Checks {
			fmt.Fprintf(&b, "  %-4s %-26s %s\n", passWord(ch.Passed), ch.Name, ch.Detail)
		}
	}
	if len(r.Objectives) > 0 {
		b.WriteString("\nobjectives:\n")
		for _, o := range r.Objectives {
			fmt.Fprintf(&b, "  %-4s %-28s %s\n", passWord(o.Passed), o.Text, o.Describe())
		}
	}
	fmt.Fprintf(&b, "\nresult: %s\n", passWord(r.Passed))
	io.WriteString(w, b.String())
}

func passWord(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func writeSteps(b *strings.Builder, title, lastCol string, steps []FindMaxStep) {
	fmt.Fprintf(b, "  %s:\n", title)
	fmt.Fprintf(b, "  %-12s %12s %12s %9s %12s %13s %7s %8s %7s  %s\n", "run", "target/s", "achieved/s", "dropped", "p99 publish", lastCol, "server", "µs/event", "harness", "result")
	for _, st := range steps {
		verdict := "held"
		if !st.Held {
			verdict = "broke: " + strings.Join(st.Failed, "; ")
		}
		if !st.Correct {
			verdict += " (correctness check FAILED)"
		}
		if st.Retry {
			verdict = "retry, " + verdict
		}
		fmt.Fprintf(b, "  %-12s %12.0f %12.1f %8.3f%% %12s %13s %7.2f %8.2f %7.2f  %s\n", st.Run, st.TargetRate, st.AchievedRate, 100*st.DroppedRatio,
			FormatSeconds(st.P99["publish"]), FormatSeconds(st.P99["queryable"]), st.ServerCores, st.ServerMicrosPerEvent, st.HarnessCores, verdict)
		if line := DescribeCounters(st.ServerCounters, 0); line != "" {
			fmt.Fprintf(b, "  %12s %s\n", "", line)
		}
	}
}

// DescribeCounters says, from counter deltas, what the server's writer
// and storage did: batches and their mean size and apply time, WAL
// fsyncs and their mean time, flushes, compactions, stalls. seconds, if
// positive, turns counts into rates. Empty without writer counters.
func DescribeCounters(c map[string]float64, seconds float64) string {
	if len(c) == 0 {
		return ""
	}
	var parts []string
	mean := func(sum, count string) float64 {
		if c[count] == 0 {
			return 0
		}
		return c[sum] / c[count]
	}
	if n := c["eventide_writer_batch_messages_count"]; n > 0 {
		parts = append(parts, fmt.Sprintf("%.0f writer batches (mean %.0f messages, apply %s)", n,
			mean("eventide_writer_batch_messages_sum", "eventide_writer_batch_messages_count"),
			FormatSeconds(mean("eventide_writer_apply_duration_seconds_sum", "eventide_writer_apply_duration_seconds_count"))))
	}
	if n := c["eventide_storage_wal_syncs_total"]; n > 0 {
		parts = append(parts, fmt.Sprintf("%.0f WAL fsyncs (mean %s)", n, FormatSeconds(mean("eventide_storage_wal_sync_seconds_total", "eventide_storage_wal_syncs_total"))))
	}
	parts = append(parts, fmt.Sprintf("%.0f flushes, %.0f compactions, %.0f write stalls (%s)",
		c["eventide_storage_flushes_total"], c["eventide_storage_compactions_total"], c["eventide_storage_write_stalls_total"],
		FormatSeconds(c["eventide_storage_write_stall_seconds_total"])))
	if cpu := c["process_cpu_seconds_total"]; cpu > 0 && seconds > 0 {
		parts = append(parts, fmt.Sprintf("%.2f cores", cpu/seconds))
	}
	return strings.Join(parts, "; ")
}
