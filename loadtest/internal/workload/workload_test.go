package workload

import (
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

func testEventConfig(seed uint64) EventConfig {
	c := DefaultEventConfig()
	c.Seed = seed
	c.Run = "abc123"
	c.LateRatio, c.OutOfOrderRatio, c.InvalidRatio = 0.02, 0.1, 0.05
	c.ProbeEvery = 100
	return c
}

func generate(t *testing.T, cfg EventConfig, n int) []Event {
	t.Helper()
	g, err := NewEventGen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]Event, n)
	for i := range out {
		out[i] = g.Next(int64(i))
	}
	return out
}

func TestEventsDeterministicBySeed(t *testing.T) {
	a := generate(t, testEventConfig(7), 5000)
	b := generate(t, testEventConfig(7), 5000)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two generators with seed 7 differ")
	}
	c := generate(t, testEventConfig(8), 5000)
	if reflect.DeepEqual(a, c) {
		t.Fatal("seeds 7 and 8 give the same events")
	}
	for i := range a {
		if string(a[i].Body(nil, t0)) != string(b[i].Body(nil, t0)) {
			t.Fatalf("event %d: bodies differ", i)
		}
	}
}

// within fails unless got is within tol (absolute) of want.
func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.4f, want %.4f ± %.4f", what, got, want, tol)
	}
}

func TestEventDistributions(t *testing.T) {
	const n = 200000
	cfg := testEventConfig(42)
	evs := generate(t, cfg, n)
	counts := map[string]int{}
	reasons := map[string]int{}
	var sizes []int
	for _, ev := range evs {
		counts[ev.Kind]++
		if ev.Late {
			counts["late"]++
			if ev.Offset < cfg.LateMin || ev.Offset > cfg.LateMax {
				t.Fatalf("late offset %s outside [%s, %s]", ev.Offset, cfg.LateMin, cfg.LateMax)
			}
		}
		if ev.OutOfOrder {
			counts["ooo"]++
			if ev.Offset < 0 || ev.Offset > cfg.OutOfOrderMax {
				t.Fatalf("out-of-order offset %s outside [0, %s]", ev.Offset, cfg.OutOfOrderMax)
			}
		}
		if ev.Kind == KindInvalid {
			reasons[ev.Reason]++
		}
		if ev.Kind == KindValid {
			counts[ev.Type]++
			sizes = append(sizes, len(ev.Body(nil, t0)))
		}
	}
	if counts[KindProbe] != n/100 {
		t.Errorf("%d probes, want %d", counts[KindProbe], n/100)
	}
	nonProbe := float64(n - n/100)
	within(t, "invalid ratio", float64(counts[KindInvalid])/nonProbe, 0.05, 0.003)
	within(t, "late ratio", float64(counts["late"])/nonProbe, 0.02, 0.002)
	within(t, "out-of-order ratio", float64(counts["ooo"])/nonProbe, 0.1, 0.004)
	for _, r := range InvalidReasons {
		within(t, "share of reason "+r, float64(reasons[r])/float64(counts[KindInvalid]), 1/float64(len(InvalidReasons)), 0.02)
	}
	// Zipf: type k's share is (1/k^s) / H(n, s).
	w := ZipfWeights(cfg.Types, cfg.ZipfS)
	total := 0.0
	for _, x := range w {
		total += x
	}
	valid := float64(counts[KindValid])
	for k := range 3 {
		name := TypeName(cfg.Run, []string{"t00", "t01", "t02"}[k])
		within(t, "share of "+name, float64(counts[name])/valid, w[k]/total, 0.005)
	}
	// Payload sizes: log-normal, median as configured.
	slices.Sort(sizes)
	within(t, "median payload", float64(sizes[len(sizes)/2]), float64(cfg.PayloadMedian), 4)
	if sizes[0] < MinPayload || sizes[len(sizes)-1] > cfg.PayloadMax+8 {
		t.Errorf("payload sizes %d..%d outside [%d, %d]", sizes[0], sizes[len(sizes)-1], MinPayload, cfg.PayloadMax)
	}
}

func TestConfiguredMix(t *testing.T) {
	mix, err := ParseMix("click=3, view=1")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testEventConfig(3)
	cfg.Mix = mix
	cfg.ProbeEvery = 0
	evs := generate(t, cfg, 40000)
	n := map[string]int{}
	for _, ev := range evs {
		n[ev.Type]++
	}
	within(t, "share of click", float64(n["lt-abc123-click"])/40000, 0.75, 0.01)
	if len(n) != 2 {
		t.Errorf("types %v, want click and view only", n)
	}
}

func TestBodies(t *testing.T) {
	cfg := testEventConfig(5)
	for _, ev := range generate(t, cfg, 20000) {
		body := ev.Body(nil, t0)
		var m map[string]any
		err := json.Unmarshal(body, &m)
		switch {
		case ev.Kind == KindInvalid && ev.Reason == "malformed_json":
			if err == nil {
				t.Fatalf("malformed_json body %s parses", body)
			}
		case err != nil:
			t.Fatalf("%s event body %s: %v", ev.Kind, body, err)
		case ev.Kind == KindProbe:
			if m["data"].(map[string]any)["probe"].(float64) != float64(ev.Probe) || m["time"].(float64) != float64(t0.UnixMilli()) {
				t.Fatalf("probe body %s, want probe %d at %d", body, ev.Probe, t0.UnixMilli())
			}
		case ev.Kind == KindValid:
			if m["time"].(float64) != float64(t0.Add(-ev.Offset).UnixMilli()) {
				t.Fatalf("body %s: time is not the intended start minus %s", body, ev.Offset)
			}
		}
	}
}

func TestEventConfigErrors(t *testing.T) {
	cases := []struct {
		edit func(*EventConfig)
		want string
	}{
		{func(c *EventConfig) { c.Run = "Bad!" }, "run id"},
		{func(c *EventConfig) { c.Types = 0 }, "types 0"},
		{func(c *EventConfig) { c.InvalidRatio = 1.5 }, "invalid ratio"},
		{func(c *EventConfig) { c.LateRatio, c.OutOfOrderRatio = 0.6, 0.6 }, "add up"},
		{func(c *EventConfig) { c.PayloadMedian = 10 }, "payload median"},
		{func(c *EventConfig) { c.Mix = []Weight{{"probe", 1}} }, `"probe"`},
	}
	for _, c := range cases {
		cfg := testEventConfig(1)
		c.edit(&cfg)
		if _, err := NewEventGen(cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err = %v, want one naming %q", err, c.want)
		}
	}
}

func testQueryConfig(seed uint64) QueryConfig {
	return QueryConfig{
		Seed: seed, Types: []string{"lt-x-a", "lt-x-b"}, Weights: []float64{3, 1},
		Mix: DefaultQueryMix, LatestN: 20, WindowMin: time.Minute, WindowMax: 10 * time.Minute, WindowLimit: 500,
	}
}

func TestQueries(t *testing.T) {
	gen := func(seed uint64) []Query {
		g, err := NewQueryGen(testQueryConfig(seed))
		if err != nil {
			t.Fatal(err)
		}
		var out []Query
		for i := range 50000 {
			out = append(out, g.Next(int64(i)))
		}
		return out
	}
	a, b := gen(9), gen(9)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two query generators with seed 9 differ")
	}
	if reflect.DeepEqual(a, gen(10)) {
		t.Fatal("seeds 9 and 10 give the same queries")
	}
	kinds := map[string]int{}
	typeA := 0
	for _, q := range a {
		kinds[q.Kind]++
		if q.Type == "lt-x-a" {
			typeA++
		}
		if q.Kind == QueryWindow && (q.Window < time.Minute || q.Window > 10*time.Minute) {
			t.Fatalf("window %s outside [1m, 10m]", q.Window)
		}
	}
	within(t, "latest share", float64(kinds[QueryLatest])/50000, 0.5, 0.01)
	within(t, "window share", float64(kinds[QueryWindow])/50000, 0.3, 0.01)
	within(t, "counts share", float64(kinds[QueryCounts])/50000, 0.2, 0.01)
	within(t, "type a share", float64(typeA)/50000, 0.75, 0.01)

	w := Query{Kind: QueryWindow, Type: "lt-x-a", Window: 90 * time.Second, Limit: 500}
	if got, want := w.Path(t0), "/v1/events?from=2026-11-23T09%3A58%3A30Z&limit=500&to=2026-11-23T10%3A00%3A00Z&type=lt-x-a"; got != want {
		t.Errorf("window path = %s, want %s", got, want)
	}
}

func TestQueryConfigErrors(t *testing.T) {
	c := testQueryConfig(1)
	c.Mix = []Weight{{"query.tail", 1}}
	if _, err := NewQueryGen(c); err == nil || !strings.Contains(err.Error(), "query.tail") {
		t.Errorf("err = %v, want one naming query.tail", err)
	}
	c.Mix = []Weight{{QueryTimeline, 1}}
	if _, err := NewQueryGen(c); err == nil || !strings.Contains(err.Error(), "social workload's users") {
		t.Errorf("err = %v, want timeline queries refused without users", err)
	}
}

// Timeline queries read the social users' timelines, every user about as
// often, with the configured limit.
func TestQueryTimelines(t *testing.T) {
	c := testQueryConfig(3)
	c.Mix = []Weight{{QueryLatest, 1}, {QueryTimeline, 1}}
	c.Run, c.TimelineUsers, c.TimelineLimit = "r1", 10, 20
	g, err := NewQueryGen(c)
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]int{}
	for i := range 20000 {
		q := g.Next(int64(i))
		if q.Kind != QueryTimeline {
			continue
		}
		users[q.User]++
		if want := "/v1/timeline/" + q.User + "?limit=20"; q.Path(t0) != want {
			t.Fatalf("path %s, want %s", q.Path(t0), want)
		}
	}
	if len(users) != 10 {
		t.Fatalf("timelines of %d users, want 10: %v", len(users), users)
	}
	for u, n := range users {
		if !strings.HasPrefix(u, "lt-r1-u") {
			t.Errorf("user %q is not a social user of run r1", u)
		}
		within(t, "share of "+u, float64(n)/10000, 0.1, 0.015)
	}
}

func TestParseMix(t *testing.T) {
	for _, bad := range []string{"", "a=0", "a=-1", "a=x", "=3", "a,a", "a=NaN", "a=Inf"} {
		if _, err := ParseMix(bad); err == nil {
			t.Errorf("ParseMix(%q) succeeded", bad)
		}
	}
	got, err := ParseMix("a=2.5,b")
	if err != nil || !reflect.DeepEqual(got, []Weight{{"a", 2.5}, {"b", 1}}) {
		t.Errorf("ParseMix = %v, %v", got, err)
	}
}

func FuzzParseMix(f *testing.F) {
	for _, s := range []string{"a=1,b=2", "click", "a=0", "x=1e308,y=1e-308", " a = 3 ,", "a,a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ws, err := ParseMix(s)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, w := range ws {
			if w.Name == "" || !(w.Weight > 0) || math.IsInf(w.Weight, 0) || seen[w.Name] {
				t.Fatalf("ParseMix(%q) = %v: bad entry %v", s, ws, w)
			}
			seen[w.Name] = true
		}
	})
}
