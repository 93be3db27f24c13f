package report

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/eventide/eventide/loadtest/internal/hist"
)

// An Objective is one pass/fail condition of --slo, for example
// "p99(query.latest)<10ms" or "drop<0.1%".
//
// Grammar, objectives separated by commas:
//
//	objective = metric op value
//	metric    = "p" number "(" kind ")"   latency percentile, value a duration
//	          | "max(" kind ")" | "mean(" kind ")"
//	          | "drop" | "drop(" workload ")"       dropped / scheduled, value a ratio
//	          | "errors" | "errors(" workload ")"   failed / started, value a ratio
//	          | "rate(" workload ")"               achieved operations per second
//	op        = "<" | "<=" | ">" | ">="
//
// A duration is Go's (10ms, 1.5s); a ratio is a fraction (0.001) or a
// percentage (0.1%); a rate a plain number.
type Objective struct {
	Text string `json:"objective"`
	Func string `json:"func"`          // p99.9, max, mean, drop, errors, rate
	Arg  string `json:"arg,omitempty"` // the kind or workload; "" for all
	Op   string `json:"op"`
	// Value is in seconds (latencies), a fraction (drop, errors) or per
	// second (rate).
	Value float64 `json:"value"`
}

// ObjectiveResult is an objective checked against a run.
type ObjectiveResult struct {
	Objective
	// Measured is the run's value, in Value's unit; absent when the run
	// has no data for it (which fails the objective).
	Measured *float64 `json:"measured,omitempty"`
	Passed   bool     `json:"passed"`
}

// Names says which kinds and workloads an objective may name.
type Names struct {
	Kinds     []string // latency kinds: publish, queryable, query.latest, ...
	Workloads []string // events, queries
}

// ParseObjectives parses a --slo value. Kinds and workloads are checked
// against names so that a typo fails at start, not after the run.
func ParseObjectives(s string, names Names) ([]Objective, error) {
	var out []Objective
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		o, err := parseObjective(part, names)
		if err != nil {
			return nil, fmt.Errorf("objective %q: %w", part, err)
		}
		out = append(out, o)
	}
	if len(out) == 0 && strings.TrimSpace(s) != "" {
		return nil, fmt.Errorf("objectives %q: none given", s)
	}
	return out, nil
}

func parseObjective(s string, names Names) (Objective, error) {
	o := Objective{Text: s}
	i := strings.IndexAny(s, "<>")
	if i < 0 {
		return o, errors.New("no comparison: use <, <=, > or >=")
	}
	metric, rest := strings.TrimSpace(s[:i]), s[i:]
	o.Op = rest[:1]
	rest = rest[1:]
	if strings.HasPrefix(rest, "=") {
		o.Op += "="
		rest = rest[1:]
	}
	value := strings.TrimSpace(rest)

	o.Func, o.Arg = metric, ""
	if open := strings.IndexByte(metric, '('); open >= 0 {
		if !strings.HasSuffix(metric, ")") {
			return o, fmt.Errorf("metric %q: missing )", metric)
		}
		o.Func, o.Arg = metric[:open], strings.TrimSpace(metric[open+1:len(metric)-1])
	}
	switch {
	case o.Func == "max" || o.Func == "mean" || isPercentile(o.Func):
		if isPercentile(o.Func) {
			p, _ := strconv.ParseFloat(o.Func[1:], 64)
			o.Func = hist.PercentileName(p) // p99.90 is p99.9
		}
		if !contains(names.Kinds, o.Arg) {
			return o, fmt.Errorf("%s(%s): unknown kind (known: %s)", o.Func, o.Arg, strings.Join(names.Kinds, ", "))
		}
		d, err := time.ParseDuration(value)
		if err != nil || d < 0 {
			return o, fmt.Errorf("%q is not a duration such as 10ms", value)
		}
		o.Value = d.Seconds()
	case o.Func == "drop" || o.Func == "errors":
		if o.Arg != "" && !contains(names.Workloads, o.Arg) {
			return o, fmt.Errorf("%s(%s): unknown workload (known: %s)", o.Func, o.Arg, strings.Join(names.Workloads, ", "))
		}
		v, err := parseRatio(value)
		if err != nil {
			return o, err
		}
		o.Value = v
	case o.Func == "rate":
		if !contains(names.Workloads, o.Arg) {
			return o, fmt.Errorf("rate(%s): unknown workload (known: %s)", o.Arg, strings.Join(names.Workloads, ", "))
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil || !(v >= 0) || math.IsInf(v, 0) {
			return o, fmt.Errorf("%q is not a rate (operations per second)", value)
		}
		o.Value = v
	default:
		return o, fmt.Errorf("unknown metric %q: use pNN(kind), max(kind), mean(kind), drop, errors or rate(workload)", metric)
	}
	return o, nil
}

// Percentile returns the percentile of a percentile objective, and
// whether it is one.
func (o Objective) Percentile() (float64, bool) {
	if !isPercentile(o.Func) {
		return 0, false
	}
	p, _ := strconv.ParseFloat(o.Func[1:], 64)
	return p, true
}

func isPercentile(f string) bool {
	if !strings.HasPrefix(f, "p") {
		return false
	}
	p, err := strconv.ParseFloat(f[1:], 64)
	return err == nil && p > 0 && p <= 100 && !strings.ContainsAny(f[1:], "eE+-xXpP_")
}

func parseRatio(s string) (float64, error) {
	pct := strings.HasSuffix(s, "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(s, "%")), 64)
	if err != nil || !(v >= 0) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a ratio such as 0.1%% or 0.001", s)
	}
	if pct {
		v /= 100
	}
	if v > 1 {
		// drop and errors are fractions of the operations: such a bound
		// would hold (or fail) whatever the run did.
		return 0, fmt.Errorf("%q is more than 100%%: drop and errors are fractions of the operations, at most 1 (100%%)", s)
	}
	return v, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Metrics answers an objective's metric: the value and whether the run
// has it.
type Metrics interface {
	Metric(fn, arg string) (float64, bool)
}

// CheckObjectives evaluates objectives against m.
func CheckObjectives(objectives []Objective, m Metrics) []ObjectiveResult {
	out := make([]ObjectiveResult, 0, len(objectives))
	for _, o := range objectives {
		r := ObjectiveResult{Objective: o}
		if v, ok := m.Metric(o.Func, o.Arg); ok {
			r.Measured = &v
			switch o.Op {
			case "<":
				r.Passed = v < o.Value
			case "<=":
				r.Passed = v <= o.Value
			case ">":
				r.Passed = v > o.Value
			case ">=":
				r.Passed = v >= o.Value
			}
		}
		out = append(out, r)
	}
	return out
}

// Failed returns the objectives of results that failed.
func Failed(results []ObjectiveResult) []ObjectiveResult {
	var out []ObjectiveResult
	for _, r := range results {
		if !r.Passed {
			out = append(out, r)
		}
	}
	return out
}

// Describe says what a result measured, for a person: "p99(query.latest)
// = 12.3ms, want < 10ms".
func (r ObjectiveResult) Describe() string {
	measured := "no data"
	if r.Measured != nil {
		measured = r.format(*r.Measured)
	}
	return fmt.Sprintf("%s = %s, want %s %s", r.metricName(), measured, r.Op, r.format(r.Value))
}

func (r ObjectiveResult) metricName() string {
	if r.Arg == "" {
		return r.Func
	}
	return r.Func + "(" + r.Arg + ")"
}

func (r ObjectiveResult) format(v float64) string {
	switch r.Func {
	case "drop", "errors":
		return strconv.FormatFloat(v*100, 'g', 4, 64) + "%"
	case "rate":
		return strconv.FormatFloat(v, 'f', 1, 64) + "/s"
	}
	return FormatSeconds(v)
}

// FormatSeconds prints seconds as a short duration: 1.23ms, 45.6µs.
func FormatSeconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	default:
		return d.Round(100 * time.Nanosecond).String()
	}
}
