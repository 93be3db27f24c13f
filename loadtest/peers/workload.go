package main

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// event is one generated event.
type event struct {
	time           time.Time
	fractionOfHour float64
	partition      string // ddmmyyhh|type
	id             [16]byte
	value          []byte
}

type generator struct {
	cfg   config
	start time.Time
	span  time.Duration
	rng   *rand.Rand
}

func newGenerator(cfg config) *generator {
	return &generator{
		cfg:   cfg,
		start: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
		span:  time.Duration(cfg.hours) * time.Hour,
		rng:   rand.New(rand.NewPCG(cfg.seed, 99)),
	}
}

func (g *generator) end() time.Time { return g.start.Add(g.span) }

var pages = []string{"/", "/products", "/products/item", "/cart", "/checkout", "/search", "/account", "/help"}

// batch returns events [b*batch, (b+1)*batch): the same for every engine
// and run, because its randomness is seeded by the batch number.
func (g *generator) batch(b int) []event {
	rng := rand.New(rand.NewPCG(g.cfg.seed, uint64(b)))
	first := b * g.cfg.batch
	n := min(g.cfg.batch, g.cfg.events-first)
	out := make([]event, n)
	for i := range out {
		idx := first + i
		// Roughly time-ordered: the nominal time plus up to ±2 s jitter.
		t := g.start.Add(time.Duration(float64(g.span) * float64(idx) / float64(g.cfg.events)))
		t = t.Add(time.Duration(rng.Int64N(4_000_000_000)) - 2*time.Second)
		if t.Before(g.start) {
			t = g.start
		}
		if !t.Before(g.end()) {
			t = g.end().Add(-time.Millisecond)
		}
		typ := rng.IntN(g.cfg.types)
		hour := t.Truncate(time.Hour)
		ev := &out[i]
		ev.time = t
		ev.fractionOfHour = float64(t.Sub(hour)) / float64(time.Hour)
		ev.partition = fmt.Sprintf("%s|type%02d", hour.Format("02010615"), typ)
		var node [8]byte
		for j := range node {
			node[j] = byte(rng.Uint32())
		}
		ev.id = newTimeUUID(t, node)
		ev.value = fmt.Appendf(nil,
			`{"user":"u%06d","session":"s%08x","page":"%s/%d","referrer":"https://example.com/r/%d","ms":%d,"country":"%s","device":"%s","amount":%d.%02d,"ok":%t}`,
			rng.IntN(100000), rng.Uint32(), pages[rng.IntN(len(pages))], rng.IntN(5000), rng.IntN(300), rng.IntN(2000),
			[]string{"us", "de", "fr", "jp", "br", "in"}[rng.IntN(6)], []string{"ios", "android", "web"}[rng.IntN(3)],
			rng.IntN(500), rng.IntN(100), rng.IntN(10) != 0)
	}
	return out
}

func (g *generator) randomPartition() string {
	hour := g.start.Add(time.Duration(g.rng.IntN(g.cfg.hours)) * time.Hour)
	return fmt.Sprintf("%s|type%02d", hour.Format("02010615"), g.rng.IntN(g.cfg.types))
}

// benchClock is the injected clock: ingest runs "live" at event time, and
// the expiry phase jumps past the TTLs.
type benchClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *benchClock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func (c *benchClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Now implements storage.Clock.
func (c *benchClock) Now() time.Time { return c.now() }
