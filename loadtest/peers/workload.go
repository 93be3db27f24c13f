package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
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
	names [][]string // partitionName's cache, by hour and type
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
		ev.partition = g.partitionName(int(hour.Sub(g.start)/time.Hour), typ)
		var node [8]byte
		for j := range node {
			node[j] = byte(rng.Uint32())
		}
		ev.id = newTimeUUID(t, node)
		ev.value = appendEventJSON(make([]byte, 0, 224), rng)
	}
	return out
}

func (g *generator) randomPartition() string {
	h := g.rng.IntN(g.cfg.hours)
	return g.partitionName(h, g.rng.IntN(g.cfg.types))
}

// partitionName is "ddmmyyhh|typeNN" for hour h of the span, made once.
// The generator runs inside the timed ingest loop of every engine, so
// what it costs dilutes the engines' ratio: it builds names and values
// without fmt.
func (g *generator) partitionName(h, typ int) string {
	if g.names == nil {
		g.names = make([][]string, g.cfg.hours)
	}
	if g.names[h] == nil {
		g.names[h] = make([]string, g.cfg.types)
	}
	if g.names[h][typ] == "" {
		hour := g.start.Add(time.Duration(h) * time.Hour)
		g.names[h][typ] = fmt.Sprintf("%s|type%02d", hour.Format("02010615"), typ)
	}
	return g.names[h][typ]
}

var (
	countries = []string{"us", "de", "fr", "jp", "br", "in"}
	devices   = []string{"ios", "android", "web"}
)

// appendEventJSON appends one event's JSON, drawing its fields from rng in
// this order (the workload's definition; formatEventJSON in the tests is
// the same with fmt):
//
//	{"user":"u%06d","session":"s%08x","page":"%s/%d","referrer":"https://example.com/r/%d",
//	 "ms":%d,"country":"%s","device":"%s","amount":%d.%02d,"ok":%t}
func appendEventJSON(dst []byte, rng *rand.Rand) []byte {
	dst = append(dst, `{"user":"u`...)
	dst = appendPadded(dst, uint64(rng.IntN(100000)), 10, 6)
	dst = append(dst, `","session":"s`...)
	dst = appendPadded(dst, uint64(rng.Uint32()), 16, 8)
	dst = append(dst, `","page":"`...)
	dst = append(dst, pages[rng.IntN(len(pages))]...)
	dst = append(dst, '/')
	dst = strconv.AppendInt(dst, int64(rng.IntN(5000)), 10)
	dst = append(dst, `","referrer":"https://example.com/r/`...)
	dst = strconv.AppendInt(dst, int64(rng.IntN(300)), 10)
	dst = append(dst, `","ms":`...)
	dst = strconv.AppendInt(dst, int64(rng.IntN(2000)), 10)
	dst = append(dst, `,"country":"`...)
	dst = append(dst, countries[rng.IntN(len(countries))]...)
	dst = append(dst, `","device":"`...)
	dst = append(dst, devices[rng.IntN(len(devices))]...)
	dst = append(dst, `","amount":`...)
	dst = strconv.AppendInt(dst, int64(rng.IntN(500)), 10)
	dst = append(dst, '.')
	dst = appendPadded(dst, uint64(rng.IntN(100)), 10, 2)
	dst = append(dst, `,"ok":`...)
	dst = strconv.AppendBool(dst, rng.IntN(10) != 0)
	return append(dst, '}')
}

// appendPadded appends v in base (10 or 16, lower case) with leading
// zeros to at least width digits.
func appendPadded(dst []byte, v uint64, base, width int) []byte {
	var buf [20]byte
	d := strconv.AppendUint(buf[:0], v, base)
	for i := len(d); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, d...)
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
