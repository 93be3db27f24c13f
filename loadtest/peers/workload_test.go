package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
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
	g := newGenerator(config{events: 10000, types: 20, hours: 48, batch: 1000, seed: 1})
	for b := 0; b < 10; b++ {
		for _, ev := range g.batch(b) {
			hour := ev.time.Truncate(time.Hour)
			if want := fmt.Sprintf("%s|type%s", hour.Format("02010615"), ev.partition[len(ev.partition)-2:]); ev.partition != want {
				t.Fatalf("partition %q, want %q", ev.partition, want)
			}
		}
	}
}
