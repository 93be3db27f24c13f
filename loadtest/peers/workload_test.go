package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/google/uuid"
)

// formatEventJSON is the workload's event JSON as first written, with fmt.
func formatEventJSON(rng *rand.Rand) []byte {
	return fmt.Appendf(nil,
		`{"user":"u%06d","session":"s%08x","page":"%s/%d","referrer":"https://example.com/r/%d","ms":%d,"country":"%s","device":"%s","amount":%d.%02d,"ok":%t}`,
		rng.IntN(100000), rng.Uint32(), pages[rng.IntN(len(pages))], rng.IntN(5000), rng.IntN(300), rng.IntN(2000),
		countries[rng.IntN(6)], devices[rng.IntN(3)],
		rng.IntN(500), rng.IntN(100), rng.IntN(10) != 0)
}

// TestGeneratorMatchesFmt checks that the fmt-free generator produces the
// workload byte for byte as before, so figures stay comparable across runs.
func TestGeneratorMatchesFmt(t *testing.T) {
	for seed := uint64(0); seed < 2000; seed++ {
		a, b := rand.New(rand.NewPCG(seed, 1)), rand.New(rand.NewPCG(seed, 1))
		got, want := appendEventJSON(nil, a), formatEventJSON(b)
		if !bytes.Equal(got, want) {
			t.Fatalf("seed %d: got %s, want %s", seed, got, want)
		}
	}
}

// TestGeneratorEvents checks every generated event against the workload's
// definition, from first principles rather than the generator's own
// helpers: its time lies in the span and near its nominal time, its
// partition is "ddmmyyhh|typeNN" of that time's UTC hour with NN a valid
// type, its id is a version 1 TimeUUID of exactly that time, ids are
// unique, values are JSON objects, and a batch is the same every time.
func TestGeneratorEvents(t *testing.T) {
	cfg := config{events: 10000, types: 20, hours: 48, batch: 1000, seed: 1}
	g := newGenerator(cfg)
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(48 * time.Hour)
	seen := map[[16]byte]bool{}
	typesSeen := map[int]bool{}
	for b := 0; b < cfg.events/cfg.batch; b++ {
		evs := g.batch(b)
		if len(evs) != cfg.batch {
			t.Fatalf("batch %d has %d events, want %d", b, len(evs), cfg.batch)
		}
		again := newGenerator(cfg).batch(b)
		for i, ev := range evs {
			idx := b*cfg.batch + i
			if ev.time.Before(start) || !ev.time.Before(end) {
				t.Fatalf("event %d at %s, outside [%s, %s)", idx, ev.time, start, end)
			}
			nominal := start.Add(time.Duration(float64(48*time.Hour) * float64(idx) / float64(cfg.events)))
			if d := ev.time.Sub(nominal); d < -2*time.Second || d > 2*time.Second {
				t.Fatalf("event %d at %s is %s from its nominal time %s (jitter is at most 2 s)", idx, ev.time, d, nominal)
			}
			hour, typ, ok := strings.Cut(ev.partition, "|")
			u := ev.time.UTC()
			wantHour := fmt.Sprintf("%02d%02d%02d%02d", u.Day(), int(u.Month()), u.Year()%100, u.Hour())
			if !ok || hour != wantHour {
				t.Fatalf("event %d at %s in partition %q, want hour %s", idx, ev.time, ev.partition, wantHour)
			}
			n, err := strconv.Atoi(strings.TrimPrefix(typ, "type"))
			if !strings.HasPrefix(typ, "type") || len(typ) != len("type00") || err != nil || n < 0 || n >= cfg.types {
				t.Fatalf("event %d: partition %q does not name one of %d types as typeNN", idx, ev.partition, cfg.types)
			}
			typesSeen[n] = true
			id := uuid.UUID(ev.id)
			if id.Version() != 1 {
				t.Fatalf("event %d: id %s is version %d", idx, id, id.Version())
			}
			sec, nsec := id.Time().UnixTime()
			if idTime := time.Unix(sec, nsec).UTC(); !idTime.Equal(ev.time.Truncate(100 * time.Nanosecond)) {
				t.Fatalf("event %d: id time %s, event time %s", idx, idTime, ev.time)
			}
			if seen[ev.id] {
				t.Fatalf("event %d: id %s generated twice", idx, id)
			}
			seen[ev.id] = true
			var obj map[string]any
			if err := json.Unmarshal(ev.value, &obj); err != nil || obj["user"] == nil {
				t.Fatalf("event %d: value %s is not the workload's JSON object: %v", idx, ev.value, err)
			}
			if a := again[i]; a.time != ev.time || a.partition != ev.partition || a.id != ev.id || !bytes.Equal(a.value, ev.value) {
				t.Fatalf("event %d differs between two generators with seed %d", idx, cfg.seed)
			}
		}
	}
	if len(typesSeen) != cfg.types {
		t.Fatalf("%d of %d types generated", len(typesSeen), cfg.types)
	}
	if _, err := bucket.ParsePartitionKey(g.batch(0)[0].partition); err != nil {
		t.Fatalf("generated partition is not an Eventide partition key: %v", err)
	}
}

func TestCompareRows(t *testing.T) {
	tests := []struct {
		name    string
		rs      map[string]*result
		wantErr string
	}{
		{"agree", map[string]*result{"eventide": {latestRows: 50, expiredCells: 7}, "pebble": {latestRows: 50, expiredCells: 7}}, ""},
		{"one engine", map[string]*result{"eventide": {latestRows: 50}}, ""},
		{"latest differs", map[string]*result{"eventide": {latestRows: 49, expiredCells: 7}, "pebble": {latestRows: 50, expiredCells: 7}}, "latest-50"},
		{"expiry differs", map[string]*result{"eventide": {latestRows: 50, expiredCells: 8}, "pebble": {latestRows: 50, expiredCells: 7}}, "expiry"},
		{"row deletes differ", map[string]*result{
			"eventide":  {deleted: map[string]*deleteResult{"cell": {bgCells: 5, manualCells: 5}, "row": {bgCells: 6, manualCells: 5}}},
			"goleveldb": {deleted: map[string]*deleteResult{"cell": {bgCells: 5, manualCells: 5}, "row": {bgCells: 5, manualCells: 5}}},
		}, "row-deleted"},
		{"eventide's delete stores differ", map[string]*result{
			"eventide": {deleted: map[string]*deleteResult{"cell": {bgCells: 5, manualCells: 5}, "row": {bgCells: 5, manualCells: 4}}},
		}, "delete stores disagree"},
	}
	for _, tt := range tests {
		err := compareRows(tt.rs)
		if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: compareRows = %v, want an error containing %q", tt.name, err, tt.wantErr)
		}
	}
}
