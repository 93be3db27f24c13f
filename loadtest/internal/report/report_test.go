package report

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/eventide/eventide/loadtest/internal/hist"
	"golang.org/x/net/html"
)

var names = Names{
	Kinds:     []string{"publish", "queryable", "query.latest"},
	Workloads: []string{"events", "queries"},
}

func TestParseObjectives(t *testing.T) {
	got, err := ParseObjectives("p99(query.latest)<10ms, drop<0.1%,p99.90(publish)<=1s, errors(events)<0.001, rate(events)>=1000, max(queryable)<2s", names)
	if err != nil {
		t.Fatal(err)
	}
	want := []Objective{
		{Text: "p99(query.latest)<10ms", Func: "p99", Arg: "query.latest", Op: "<", Value: 0.01},
		{Text: "drop<0.1%", Func: "drop", Op: "<", Value: 0.001},
		{Text: "p99.90(publish)<=1s", Func: "p99.9", Arg: "publish", Op: "<=", Value: 1},
		{Text: "errors(events)<0.001", Func: "errors", Arg: "events", Op: "<", Value: 0.001},
		{Text: "rate(events)>=1000", Func: "rate", Arg: "events", Op: ">=", Value: 1000},
		{Text: "max(queryable)<2s", Func: "max", Arg: "queryable", Op: "<", Value: 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestParseObjectivesErrors(t *testing.T) {
	cases := map[string]string{
		"p99(query.timeline)<10ms": "unknown kind",
		"p99(publish)":             "no comparison",
		"p99(publish<1s":           "missing )",
		"p999x(publish)<1s":        "unknown metric",
		"p101(publish)<1s":         "unknown metric",
		"p99(publish)<fast":        "not a duration",
		"drop<lots":                "not a ratio",
		"drop<200%":                "more than 100%",
		"errors(events)<1.5":       "more than 100%",
		"drop(social)<1%":          "unknown workload",
		"rate(events)>-5":          "not a rate",
		"latency<1s":               "unknown metric",
		",":                        "none given",
	}
	for in, want := range cases {
		_, err := ParseObjectives(in, names)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseObjectives(%q) = %v, want an error with %q", in, err, want)
		}
	}
}

func testReport() *Report {
	return &Report{
		FormatVersion: FormatVersion, Tool: "eventide-loadtest", Run: "r1", Seed: 7,
		Started: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC),
		Latency: map[string]hist.Summary{
			"query.latest": {Count: 10, Max: 0.02, Mean: 0.005, Percentiles: map[string]float64{"p50": 0.004, "p99": 0.012}},
		},
		Series: map[string]hist.Series{
			"query.latest": {Times: []float64{1, 2}, Counts: []int64{4, 6}, P50: []float64{0.004, 0.004}, P99: []float64{0.01, 0.012}, Max: []float64{0.01, 0.02}},
		},
		Events:  &EventsResult{Schedule: Schedule{Scheduled: 1000, Started: 998, Dropped: 2, Failed: 1, AchievedRate: 99.7}},
		Queries: &QueriesResult{Schedule: Schedule{Scheduled: 1000, Started: 1000}},
	}
}

func TestCheckObjectives(t *testing.T) {
	objs, err := ParseObjectives("p99(query.latest)<10ms,p50(query.latest)<10ms,drop<0.2%,drop(events)<0.3%,errors<0.1%,rate(events)>99,p99(publish)<1s", names)
	if err != nil {
		t.Fatal(err)
	}
	res := CheckObjectives(objs, testReport())
	want := []bool{false, true, true, true, true, true, false}
	for i, r := range res {
		if r.Passed != want[i] {
			t.Errorf("%s: passed = %v, want %v (%s)", r.Text, r.Passed, want[i], r.Describe())
		}
	}
	// drop over both workloads: 2 of 2000.
	if m := *res[2].Measured; math.Abs(m-0.001) > 1e-12 {
		t.Errorf("drop = %v, want 0.001", m)
	}
	if res[6].Measured != nil || !strings.Contains(res[6].Describe(), "no data") {
		t.Errorf("p99(publish) without data: %s", res[6].Describe())
	}
	if d := res[0].Describe(); d != "p99(query.latest) = 12ms, want < 10ms" {
		t.Errorf("Describe = %q", d)
	}
	if got := Failed(res); len(got) != 2 {
		t.Errorf("Failed = %v, want 2", got)
	}
}

// The HTML report parses, holds the report's JSON in its data element,
// and has uPlot inline.
func TestHTMLHoldsData(t *testing.T) {
	r := testReport()
	r.Run = "</script><b>"
	b, err := r.HTML()
	if err != nil {
		t.Fatal(err)
	}
	data, scripts := parseHTMLReport(t, b)
	var back Report
	if err := json.Unmarshal([]byte(data), &back); err != nil {
		t.Fatalf("data element is not the report's JSON: %v", err)
	}
	if back.Run != r.Run || back.Series["query.latest"].Counts[1] != 6 || back.Events.Dropped != 2 {
		t.Fatalf("data element holds %+v", back)
	}
	if !strings.Contains(scripts, "uPlot") || !strings.Contains(scripts, "uPlot.join") {
		t.Fatal("uPlot and the chart code are not inline")
	}
	if bytes.Contains(b, []byte("src=")) || bytes.Contains(b, []byte("href=")) {
		t.Fatal("the report loads something from elsewhere")
	}
}

// parseHTMLReport parses an HTML report and returns the text of its data
// element and of its other scripts.
func parseHTMLReport(t *testing.T, b []byte) (data, scripts string) {
	t.Helper()
	doc, err := html.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for n := range doc.Descendants() {
		if n.Type != html.ElementNode || n.Data != "script" || n.FirstChild == nil {
			continue
		}
		id := ""
		for _, a := range n.Attr {
			if a.Key == "id" {
				id = a.Val
			}
		}
		if id == DataElementID {
			data, found = n.FirstChild.Data, true
		} else {
			scripts += n.FirstChild.Data
		}
	}
	if !found {
		t.Fatalf("no <script id=%q> in the report", DataElementID)
	}
	return data, scripts
}

func FuzzParseObjectives(f *testing.F) {
	for _, s := range []string{"p99(query.latest)<10ms,drop<0.1%", "p99.9(publish)<=1s", "rate(events)>5", "errors<1", "max(x)<1s", "p(publish)<1s", "drop<%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		objs, err := ParseObjectives(s, names)
		if err != nil {
			return
		}
		for _, o := range objs {
			if o.Value < 0 || math.IsNaN(o.Value) || math.IsInf(o.Value, 0) {
				t.Fatalf("%q: value %v", s, o.Value)
			}
			switch o.Op {
			case "<", "<=", ">", ">=":
			default:
				t.Fatalf("%q: op %q", s, o.Op)
			}
			if _, ok := o.Percentile(); !ok && o.Func != "max" && o.Func != "mean" && o.Func != "drop" && o.Func != "errors" && o.Func != "rate" {
				t.Fatalf("%q: func %q", s, o.Func)
			}
		}
	})
}

func TestDescribeCounters(t *testing.T) {
	got := DescribeCounters(map[string]float64{
		"eventide_writer_batch_messages_count": 10, "eventide_writer_batch_messages_sum": 5000,
		"eventide_writer_apply_duration_seconds_count": 10, "eventide_writer_apply_duration_seconds_sum": 0.03,
		"eventide_storage_wal_syncs_total": 8, "eventide_storage_wal_sync_seconds_total": 0.016,
		"eventide_storage_flushes_total": 1, "process_cpu_seconds_total": 3,
	}, 2)
	want := "10 writer batches (mean 500 messages, apply 3ms); 8 WAL fsyncs (mean 2ms); 1 flushes, 0 compactions, 0 write stalls (0s); 1.50 cores"
	if got != want {
		t.Errorf("DescribeCounters =\n%s\nwant\n%s", got, want)
	}
	if DescribeCounters(nil, 1) != "" {
		t.Error("no counters described as something")
	}
}

// The social workload's schedule answers drop(social), errors(social)
// and rate(social), and counts in drop and errors over every workload.
func TestSocialMetrics(t *testing.T) {
	r := testReport()
	r.Social = &SocialResult{Schedule: Schedule{Scheduled: 1000, Started: 990, Dropped: 10, Failed: 9, AchievedRate: 98.1}}
	for _, c := range []struct {
		fn, arg string
		want    float64
	}{
		{"drop", "social", 0.01}, {"errors", "social", 9.0 / 990}, {"rate", "social", 98.1},
		{"drop", "", 12.0 / 3000}, {"errors", "", 10.0 / 2988},
	} {
		if got, ok := r.Metric(c.fn, c.arg); !ok || math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Metric(%s, %s) = %v, %v; want %v", c.fn, c.arg, got, ok, c.want)
		}
	}
	var b bytes.Buffer
	r.WriteSummary(&b)
	if !strings.Contains(b.String(), "social   target") {
		t.Errorf("summary has no social line:\n%s", b.String())
	}
}
