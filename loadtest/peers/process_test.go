package main

import (
	"encoding/json"
	"flag"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestChildArgs: a child gets every flag the parent was given but the
// ones it gets its own of, and those once.
func TestChildArgs(t *testing.T) {
	for _, tc := range []struct {
		name       string
		parent     []string
		cpuProfile string
		want       []string
	}{
		{"defaults", nil, "", []string{"-engines=pebble", "-result-file=/w/r.json", "-dir=/w"}},
		{"flags pass through, own ones replaced",
			[]string{"-events=500", "-engines=eventide,pebble", "-equal-memory", "-dir=/x", "-same-process=false", "-cpuprofile=/p"}, "/p",
			[]string{"-equal-memory=true", "-events=500", "-engines=pebble", "-result-file=/w/r.json", "-dir=/w", "-cpuprofile=/p-pebble"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("peers", flag.ContinueOnError)
			fs.Int("events", 0, "")
			fs.String("engines", "", "")
			fs.Bool("equal-memory", false, "")
			fs.String("dir", "", "")
			fs.Bool("same-process", false, "")
			fs.String("cpuprofile", "", "")
			fs.String("result-file", "", "")
			if err := fs.Parse(tc.parent); err != nil {
				t.Fatal(err)
			}
			got := childArgs(fs.Visit, "pebble", "/w/r.json", "/w", tc.cpuProfile)
			if !slices.Equal(got, tc.want) {
				t.Errorf("child args %q, want %q", got, tc.want)
			}
		})
	}
}

// TestResultWireRoundTrip: a result with every field set comes back whole
// from a child's JSON. A field added to result, phaseResult or
// deleteResult but not to the wire types fails allSet first, then the
// comparison.
func TestResultWireRoundTrip(t *testing.T) {
	phase := func(k time.Duration) phaseResult {
		return phaseResult{p50: k, p99: 2 * k, coldP50: 3 * k, coldP99: 4 * k, warmP50: 5 * k, warmP99: 6 * k,
			cold: int(k), warm: 2 * int(k), firstRoundP50: 9 * k, firstRoundP99: 10 * k, unwaitedP99: 11 * k, sum: 7 * k, allocBytes: uint64(k), gcCycles: 3, minorFaults: 4, cpu: 8 * k}
	}
	del := func(k int) *deleteResult {
		return &deleteResult{deletesPerSecond: float64(k), bg: phase(time.Duration(k)), manual: phase(time.Duration(k + 1)),
			bgBytes: int64(k), manualBytes: int64(k + 2), bgCells: k, manualCells: k + 3, bgCompactedBytes: int64(k + 4), bgReadCompactedBytes: int64(k + 5)}
	}
	in := &result{built: true, ingestSeconds: 1.5, eventsPerSecond: 2.5, peakRSSBytes: 3, finalPeakRSSBytes: 8, bytesPerEvent: 4.5,
		latest: phase(10), expired: phase(20), window: phase(30), latestRows: 5, expiredCells: 6, windowRows: 7, expiredTablesKept: true,
		deleted: map[string]*deleteResult{"cell": del(40), "row": del(50)}}
	allSet(t, reflect.ValueOf(*in), "result")
	allSet(t, reflect.ValueOf(*in.deleted["cell"]), "deleteResult")
	data, err := json.Marshal(wireOf(in))
	if err != nil {
		t.Fatal(err)
	}
	var w resultWire
	if err := json.Unmarshal(data, &w); err != nil {
		t.Fatal(err)
	}
	if out := w.result(); !reflect.DeepEqual(out, in) {
		t.Errorf("round trip gave %+v, want %+v", out, in)
	}
}

// allSet fails for every zero field of the struct v, recursively.
func allSet(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	for i := range v.NumField() {
		f, name := v.Field(i), path+"."+v.Type().Field(i).Name
		if f.IsZero() {
			t.Errorf("%s is not set in the test's result: add it here and to the wire types", name)
		}
		if f.Kind() == reflect.Struct && f.Type() != reflect.TypeOf(time.Duration(0)) {
			allSet(t, f, name)
		}
	}
}
