package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

const (
	// storeSubdir holds the engine's files; the marker sits beside it so
	// the engine never sees a file it does not own.
	storeSubdir = "store"
	markerFile  = "readbench-params.txt"
	// generatorVersion changes whenever the generated events change, so a
	// store built by older code is not reused.
	generatorVersion = 1
)

// loadResult describes how the store came to be.
type loadResult struct {
	reused       bool
	loadTime     time.Duration // Apply calls, progress included
	flushTime    time.Duration
	compactTime  time.Duration
	eventsPerSec float64
	walMode      string
}

// marker is the content of markerFile for cfg: everything the stored data
// depends on.
func marker(cfg config) string {
	return fmt.Sprintf("readbench store, generator v%d: events=%d types=%d hours=%d batch=%d seed=%d now=%s\n",
		generatorVersion, cfg.events, cfg.types, cfg.hours, cfg.batch, cfg.seed, benchNow.Format(time.RFC3339))
}

// openOrBuild opens the store of dir, reusing it when its marker matches
// cfg, and otherwise loads it. It refuses a directory holding anything
// else rather than deleting it.
func openOrBuild(cfg config, dir string, types *schema.EventTypes) (*storage.DB, loadResult, error) {
	want := marker(cfg)
	storeDir := filepath.Join(dir, storeSubdir)
	got, err := os.ReadFile(filepath.Join(dir, markerFile))
	switch {
	case err == nil && string(got) == want:
		db, err := openStorage(storeDir)
		if err != nil {
			return nil, loadResult{}, err
		}
		fmt.Fprintf(os.Stderr, "reusing the store in %s (%s)\n", dir, want[:len(want)-1])
		return db, loadResult{reused: true}, nil
	case err == nil:
		return nil, loadResult{}, fmt.Errorf("cannot use %s: it holds a store built with other parameters (%q, want %q); pass another -dir or remove it",
			dir, got, want)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, loadResult{}, fmt.Errorf("cannot read the marker of %s: %w", dir, err)
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil, loadResult{}, fmt.Errorf("cannot use %s: it is not empty and holds no %s (an interrupted load?); remove it or pass an empty -dir", dir, markerFile)
	}

	db, err := openStorage(storeDir)
	if err != nil {
		return nil, loadResult{}, err
	}
	res, err := load(db, cfg, types)
	if err != nil {
		db.Close()
		return nil, loadResult{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, markerFile), []byte(want), 0o644); err != nil {
		db.Close()
		return nil, loadResult{}, fmt.Errorf("cannot write the marker of %s: %w", dir, err)
	}
	return db, res, nil
}

// load writes cfg.events events in time order, then flushes and compacts
// everything.
func load(db *storage.DB, cfg config, types *schema.EventTypes) (loadResult, error) {
	res := loadResult{walMode: "WAL periodic, fsync every 100 ms"}
	fmt.Fprintf(os.Stderr, "loading %d events, %d types over %d hours before %s, batches of %d, %s\n",
		cfg.events, cfg.types, cfg.hours, benchNow.Format(time.RFC3339), cfg.batch, res.walMode)
	g := newGenerator(cfg)
	var b storage.Batch
	var counts minuteCounts
	nextReport := 1
	start := time.Now()
	for first := 0; first < cfg.events; first += cfg.batch {
		b.Reset()
		counts.reset()
		for i := first; i < min(first+cfg.batch, cfg.events); i++ {
			e, t, err := g.event(i)
			if err != nil {
				return res, err
			}
			// A live ingest writes each event about when it happens, so
			// the write timestamp is the event time: TimeWindow compaction
			// then groups SSTables by event hour as in production, where
			// the fixed clock's now would put every cell in one window.
			if err := catalog.PutEvent(&b, &e, types.Settings(e.Type).SubPartitions, remainingTTLSeconds(types, e.Type, t), t.UnixMicro()); err != nil {
				return res, err
			}
			counts.add(e.Type, t)
		}
		// One counter addition per type and minute of the batch, as a
		// writer that sums its batch would send.
		for _, c := range counts.list {
			if err := catalog.AddCount(&b, c.eventType, c.minute, c.n); err != nil {
				return res, err
			}
		}
		if err := db.Apply(context.Background(), &b); err != nil {
			return res, fmt.Errorf("cannot apply batch at event %d: %w", first, err)
		}
		if done := min(first+cfg.batch, cfg.events); done*10 >= nextReport*cfg.events {
			el := time.Since(start)
			fmt.Fprintf(os.Stderr, "  %3d%%: %d events in %s, %.0f events/s\n", done*100/cfg.events, done, el.Round(time.Millisecond), float64(done)/el.Seconds())
			for done*10 >= nextReport*cfg.events {
				nextReport++
			}
		}
	}
	res.loadTime = time.Since(start)
	res.eventsPerSec = float64(cfg.events) / res.loadTime.Seconds()

	t0 := time.Now()
	if err := db.Flush(); err != nil {
		return res, fmt.Errorf("cannot flush after the load: %w", err)
	}
	res.flushTime = time.Since(t0)
	t0 = time.Now()
	if err := db.CompactAll(); err != nil {
		return res, fmt.Errorf("cannot compact after the load: %w", err)
	}
	res.compactTime = time.Since(t0)
	fmt.Fprintf(os.Stderr, "loaded in %s (%.0f events/s), flushed in %s, compacted in %s\n",
		res.loadTime.Round(time.Millisecond), res.eventsPerSec, res.flushTime.Round(time.Millisecond), res.compactTime.Round(time.Millisecond))
	return res, nil
}

// remainingTTLSeconds is the TTL the writer gives an event of eventType at
// time t, applied at benchNow: what is left of the type's TTL, so the cell
// expires at t + TTL.
func remainingTTLSeconds(types *schema.EventTypes, eventType string, t time.Time) int32 {
	expiresAt := t.Add(time.Duration(types.TTLSeconds(eventType)) * time.Second)
	return int32((expiresAt.Sub(benchNow) + time.Second - 1) / time.Second)
}

// minuteCounts sums a batch's events per type and minute, in first-seen
// order so batches are the same in every run.
type minuteCounts struct {
	list  []minuteCount
	index map[minuteCountKey]int
}

type minuteCountKey struct {
	eventType string
	minute    time.Time
}

type minuteCount struct {
	minuteCountKey
	n int64
}

func (c *minuteCounts) reset() {
	c.list = c.list[:0]
	if c.index == nil {
		c.index = map[minuteCountKey]int{}
	}
	clear(c.index)
}

func (c *minuteCounts) add(eventType string, t time.Time) {
	k := minuteCountKey{eventType, t.UTC().Truncate(time.Minute)}
	i, ok := c.index[k]
	if !ok {
		i = len(c.list)
		c.index[k] = i
		c.list = append(c.list, minuteCount{minuteCountKey: k})
	}
	c.list[i].n++
}

// generator makes the events: event i's time is its share of the span
// plus up to ±2 s of jitter, so ids arrive roughly in time order as from a
// live ingest.
type generator struct {
	cfg        config
	start, end time.Time
	types      []string
	rng        *rand.Rand
	ids        *rand.ChaCha8 // the random clock sequence and node of ids
}

func newGenerator(cfg config) *generator {
	g := &generator{cfg: cfg, end: benchNow, start: benchNow.Add(-time.Duration(cfg.hours) * time.Hour)}
	for i := range cfg.types {
		g.types = append(g.types, typeName(i))
	}
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], cfg.seed)
	g.ids = rand.NewChaCha8(seed)
	g.rng = rand.New(rand.NewPCG(cfg.seed, 0x7265616462656e63))
	return g
}

func typeName(i int) string { return fmt.Sprintf("type%02d", i) }

var (
	pages     = []string{"/", "/products", "/products/item", "/cart", "/checkout", "/search", "/account", "/help"}
	countries = []string{"us", "de", "fr", "jp", "br", "in"}
	devices   = []string{"ios", "android", "web"}
)

// event returns event i and its time. Calls must come in order of i.
func (g *generator) event(i int) (schema.Event, time.Time, error) {
	span := g.end.Sub(g.start)
	t := g.start.Add(time.Duration(float64(span) * float64(i) / float64(g.cfg.events)))
	t = t.Add(time.Duration(g.rng.Int64N(int64(4*time.Second))) - 2*time.Second)
	if t.Before(g.start) {
		t = g.start
	}
	if last := g.end.Add(-time.Microsecond); t.After(last) {
		t = last
	}
	id, err := bucket.NewRandomTimeUUID(t, g.ids)
	if err != nil {
		return schema.Event{}, t, fmt.Errorf("cannot make the id of event %d: %w", i, err)
	}
	// The id holds the time at 100 ns: use that time for the counts too.
	t, _ = bucket.TimeOf(id)
	r := g.rng
	data := fmt.Appendf(nil,
		`{"user":"u%06d","session":"s%08x","page":"%s/%d","referrer":"https://example.com/r/%d","ms":%d,"country":"%s","device":"%s","amount":%d.%02d,"ok":%t}`,
		r.IntN(100000), r.Uint32(), pages[r.IntN(len(pages))], r.IntN(5000), r.IntN(300), r.IntN(2000),
		countries[r.IntN(len(countries))], devices[r.IntN(len(devices))], r.IntN(500), r.IntN(100), r.IntN(10) != 0)
	return schema.Event{ID: id, Type: g.types[r.IntN(len(g.types))], Data: data}, t, nil
}

// dirSize is the total size of the files under dir.
func dirSize(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		total += info.Size()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("cannot measure %s: %w", dir, err)
	}
	return total, nil
}
