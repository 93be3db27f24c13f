// Command readbench measures Eventide's read path (issue 3) through package
// reader, on a store built the way the writer fills it.
//
// Workload: N events (default 2,000,000) over 20 types (type00..type19) and
// the 48 hours before a fixed "now", generated in time order (±2 s jitter)
// with random TimeUUIDs and ~200-byte JSON data, stored with
// catalog.PutEvent and catalog.AddCount in batches of 1,000 under the default
// 7-day TTL, then flushed and fully compacted. The clock of the engine and
// of the reader is that fixed "now", so TTLs and TTL clamps are the same in
// every run and nothing expires.
//
// Queries, against the targets:
//   - latest 100: the 100 newest events of a random type in the last 24
//     hours (order desc); target p99 <= 1 ms.
//   - hour scan: every event of a random type in one random hour of the 48,
//     paged with limit 10,000; target >= 1,000,000 rows/s. Each scan's row
//     count is checked against reader.Counts for that hour.
//
// Run from the module root:
//
//	go run ./loadtest/readbench -events 2000000 -queries 2000
//
// With -dir the store is kept there and reused by later runs with the same
// workload parameters (a marker file records them), so the query phase can
// be repeated without loading again. -cpuprofile profiles the query phase
// only; -memprofile takes a heap profile just before it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/reader"
	"github.com/eventide/eventide/storage"
)

// benchNow is the fixed "now" of the engine and reader clocks: the events
// span the hours before it.
var benchNow = time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC)

// config is the command line.
type config struct {
	events, types, hours, batch int
	seed                        uint64

	queries, hourScans, pageLimit, warmup int
	scanOrder                             reader.Order

	dir                    string
	keep                   bool
	cpuProfile, memProfile string
}

// fixedClock is the engine clock: always benchNow.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "readbench: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := parseFlags()
	if err != nil {
		return err
	}
	command := "go run ./loadtest/readbench " + strings.Join(os.Args[1:], " ")

	dir := cfg.dir
	if dir == "" {
		dir, err = os.MkdirTemp("", "eventide-readbench-")
		if err != nil {
			return fmt.Errorf("cannot create a temporary directory: %w", err)
		}
		if cfg.keep {
			fmt.Fprintf(os.Stderr, "keeping the store in %s\n", dir)
		} else {
			defer os.RemoveAll(dir)
		}
	}

	types := &schema.EventTypes{} // every type: 7-day TTL, one partition per hour
	db, ld, err := openOrBuild(cfg, dir, types)
	if err != nil {
		return err
	}
	defer func() {
		if err := db.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "readbench: cannot close the store: %v\n", err)
		}
	}()
	diskBytes, err := dirSize(filepath.Join(dir, storeSubdir))
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "store (%d bytes on disk, %.1f bytes/event):\n%s", diskBytes, float64(diskBytes)/float64(cfg.events), db.Metrics().String())

	rd, err := reader.New(db, reader.Options{Types: types, Now: func() time.Time { return benchNow }})
	if err != nil {
		return fmt.Errorf("cannot create reader: %w", err)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	liveHeap := ms.HeapAlloc
	if cfg.memProfile != "" {
		if err := writeHeapProfile(cfg.memProfile); err != nil {
			return err
		}
	}
	if cfg.cpuProfile != "" {
		stop, err := startCPUProfile(cfg.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	res, err := runQueries(context.Background(), rd, cfg)
	if err != nil {
		return err
	}
	res.load = ld
	res.diskBytes = diskBytes
	res.mem = readMemory()
	res.mem.liveHeapBefore = liveHeap

	printReport(os.Stdout, cfg, command, res)
	return nil
}

func parseFlags() (config, error) {
	var cfg config
	flag.IntVar(&cfg.events, "events", 2_000_000, "events to load")
	flag.IntVar(&cfg.types, "types", 20, "event types (type00, type01, ...)")
	flag.IntVar(&cfg.hours, "hours", 48, "hours before the fixed now that the events span")
	flag.IntVar(&cfg.batch, "batch", 1000, "events per applied batch")
	flag.Uint64Var(&cfg.seed, "seed", 1, "workload seed")
	flag.IntVar(&cfg.queries, "queries", 2000, "latest-100 queries")
	flag.IntVar(&cfg.hourScans, "hourscans", 200, "hour scans (random type and hour)")
	flag.IntVar(&cfg.pageLimit, "pagelimit", reader.MaxLimit, "page size of hour scans")
	flag.IntVar(&cfg.warmup, "warmup", 0, "latest-100 queries run before the measured ones, not recorded")
	order := flag.String("scanorder", "desc", "order of hour scans: desc (storage order) or asc")
	flag.StringVar(&cfg.dir, "dir", "", "keep the store in this directory and reuse it when it holds one built with the same workload flags (default: a new temporary directory, removed after)")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the temporary directory")
	flag.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the query phase to this file")
	flag.StringVar(&cfg.memProfile, "memprofile", "", "write a heap profile taken just before the query phase (after a GC) to this file")
	flag.Parse()
	if flag.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	var err error
	if cfg.scanOrder, err = reader.ParseOrder(*order); err != nil {
		return cfg, fmt.Errorf("flag -scanorder: %w", err)
	}
	switch {
	case cfg.events <= 0:
		return cfg, errors.New("flag -events must be positive")
	case cfg.types <= 0 || cfg.types > 100:
		return cfg, fmt.Errorf("flag -types is %d, want 1..100", cfg.types)
	case cfg.hours < 25:
		// latest-100 reads the last 24 hours and must find 100 events.
		return cfg, fmt.Errorf("flag -hours is %d, want at least 25", cfg.hours)
	case cfg.batch <= 0:
		return cfg, errors.New("flag -batch must be positive")
	case cfg.queries <= 0 || cfg.hourScans <= 0:
		return cfg, errors.New("flags -queries and -hourscans must be positive")
	case cfg.pageLimit <= 0 || cfg.pageLimit > reader.MaxLimit:
		return cfg, fmt.Errorf("flag -pagelimit is %d, want 1..%d", cfg.pageLimit, reader.MaxLimit)
	}
	return cfg, nil
}

// startCPUProfile starts profiling into path; stop ends the profile.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cannot create CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot start CPU profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "readbench: cannot close CPU profile: %v\n", err)
		}
	}, nil
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("cannot create heap profile: %w", err)
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("cannot write heap profile: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cannot write heap profile: %w", err)
	}
	return nil
}

// openStorage opens the store of dir with the fixed clock.
func openStorage(dir string) (*storage.DB, error) {
	opts := storage.DefaultOptions()
	opts.Clock = fixedClock{benchNow}
	// The load phase does not need each batch fsynced: a crash only loses
	// a run whose marker was never written.
	opts.WALSyncMode = storage.WALPeriodic
	db, err := storage.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("cannot open store in %s: %w", dir, err)
	}
	if err := catalog.EnsureBuiltinTables(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("cannot create tables in %s: %w", dir, err)
	}
	return db, nil
}
