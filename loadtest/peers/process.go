package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Engines in their own processes. With several engines, main runs each in
// a child process of this binary (-engines NAME -result-file F), which
// writes its result as JSON to F, and prints the one table from the
// children's results. In one process the engines share one Go heap: what
// an engine run earlier leaves live (Eventide's memtables and cache, a
// peer's caches) makes every later engine's garbage collection dearer, and
// its peak RSS is not its own. Measured (BENCHMARKS.md, session 8): Pebble
// ingested 345,000-398,000 events/s after an Eventide build that left a
// 170 MiB heap and 547,000-594,000 after one that left 90 MiB, in the same
// round. -same-process keeps the old behaviour (for -reuse studies and
// profiles of several engines at once).

// childArgs is the command line of the child that runs engine name: every
// flag the parent was given explicitly (as visit lists them), but
// -engines, -same-process, -result-file, -dir and -cpuprofile, which the
// child gets its own of: its engine, its result file, the parent's work
// directory (so -dir and the default temporary directory both hold every
// engine's stores) and, with -cpuprofile P, the file P-NAME.
func childArgs(visit func(func(*flag.Flag)), name, resultFile, dir, cpuProfile string) []string {
	var args []string
	visit(func(f *flag.Flag) {
		switch f.Name {
		case "engines", "same-process", "result-file", "dir", "cpuprofile":
			return
		}
		args = append(args, "-"+f.Name+"="+f.Value.String())
	})
	args = append(args, "-engines="+name, "-result-file="+resultFile, "-dir="+dir)
	if cpuProfile != "" {
		args = append(args, "-cpuprofile="+cpuProfile+"-"+name)
	}
	return args
}

// runInChild runs one engine in a child process and returns its result.
func runInChild(name string, cfg config, cpuProfile string) (*result, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cannot find this binary to run %s in its own process: %w", name, err)
	}
	resultFile := filepath.Join(cfg.dir, name+"-result.json")
	cmd := exec.Command(exe, childArgs(flag.Visit, name, resultFile, cfg.dir, cpuProfile)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s's process: %w", name, err)
	}
	data, err := os.ReadFile(resultFile)
	if err != nil {
		return nil, fmt.Errorf("%s's result: %w", name, err)
	}
	var w resultWire
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("%s's result %s: %w", name, resultFile, err)
	}
	return w.result(), nil
}

// writeResult is the child's side: r as JSON in file.
func writeResult(file string, r *result) error {
	data, err := json.Marshal(wireOf(r))
	if err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o644)
}

// resultWire, phaseWire and deleteWire are result, phaseResult and
// deleteResult with exported fields, for JSON between the processes.
type resultWire struct {
	Built                                bool
	IngestSeconds, EventsPerSecond       float64
	PeakRSSBytes, FinalPeakRSSBytes      int64
	BytesPerEvent                        float64
	Latest, Expired, Window              phaseWire
	LatestRows, ExpiredCells, WindowRows int
	ExpiredTablesKept                    bool
	Deleted                              map[string]*deleteWire
}

type phaseWire struct {
	P50, P99, ColdP50, ColdP99, WarmP50, WarmP99 time.Duration
	Cold, Warm                                   int
	FirstRoundP50, FirstRoundP99, UnwaitedP99    time.Duration
	Sum                                          time.Duration
	AllocBytes, GCCycles, MinorFaults            uint64
	CPU                                          time.Duration
}

type deleteWire struct {
	DeletesPerSecond     float64
	BG, Manual           phaseWire
	BGBytes, ManualBytes int64
	BGCells, ManualCells int
	BGCompactedBytes     int64
	BGReadCompactedBytes int64
}

func wireOf(r *result) resultWire {
	w := resultWire{Built: r.built, IngestSeconds: r.ingestSeconds, EventsPerSecond: r.eventsPerSecond,
		PeakRSSBytes: r.peakRSSBytes, FinalPeakRSSBytes: r.finalPeakRSSBytes, BytesPerEvent: r.bytesPerEvent,
		Latest: phaseWireOf(r.latest), Expired: phaseWireOf(r.expired), Window: phaseWireOf(r.window),
		LatestRows: r.latestRows, ExpiredCells: r.expiredCells, WindowRows: r.windowRows, ExpiredTablesKept: r.expiredTablesKept}
	if r.deleted != nil {
		w.Deleted = map[string]*deleteWire{}
		for mode, d := range r.deleted {
			w.Deleted[mode] = &deleteWire{DeletesPerSecond: d.deletesPerSecond, BG: phaseWireOf(d.bg), Manual: phaseWireOf(d.manual),
				BGBytes: d.bgBytes, ManualBytes: d.manualBytes, BGCells: d.bgCells, ManualCells: d.manualCells,
				BGCompactedBytes: d.bgCompactedBytes, BGReadCompactedBytes: d.bgReadCompactedBytes}
		}
	}
	return w
}

func (w *resultWire) result() *result {
	r := &result{built: w.Built, ingestSeconds: w.IngestSeconds, eventsPerSecond: w.EventsPerSecond,
		peakRSSBytes: w.PeakRSSBytes, finalPeakRSSBytes: w.FinalPeakRSSBytes, bytesPerEvent: w.BytesPerEvent,
		latest: w.Latest.phase(), expired: w.Expired.phase(), window: w.Window.phase(),
		latestRows: w.LatestRows, expiredCells: w.ExpiredCells, windowRows: w.WindowRows, expiredTablesKept: w.ExpiredTablesKept}
	if w.Deleted != nil {
		r.deleted = map[string]*deleteResult{}
		for mode, d := range w.Deleted {
			r.deleted[mode] = &deleteResult{deletesPerSecond: d.DeletesPerSecond, bg: d.BG.phase(), manual: d.Manual.phase(),
				bgBytes: d.BGBytes, manualBytes: d.ManualBytes, bgCells: d.BGCells, manualCells: d.ManualCells,
				bgCompactedBytes: d.BGCompactedBytes, bgReadCompactedBytes: d.BGReadCompactedBytes}
		}
	}
	return r
}

func phaseWireOf(p phaseResult) phaseWire {
	return phaseWire{P50: p.p50, P99: p.p99, ColdP50: p.coldP50, ColdP99: p.coldP99, WarmP50: p.warmP50, WarmP99: p.warmP99,
		Cold: p.cold, Warm: p.warm, FirstRoundP50: p.firstRoundP50, FirstRoundP99: p.firstRoundP99, UnwaitedP99: p.unwaitedP99, Sum: p.sum, AllocBytes: p.allocBytes, GCCycles: p.gcCycles, MinorFaults: p.minorFaults, CPU: p.cpu}
}

func (w phaseWire) phase() phaseResult {
	return phaseResult{p50: w.P50, p99: w.P99, coldP50: w.ColdP50, coldP99: w.ColdP99, warmP50: w.WarmP50, warmP99: w.WarmP99,
		cold: w.Cold, warm: w.Warm, firstRoundP50: w.FirstRoundP50, firstRoundP99: w.FirstRoundP99, unwaitedP99: w.UnwaitedP99, sum: w.Sum, allocBytes: w.AllocBytes, gcCycles: w.GCCycles, minorFaults: w.MinorFaults, cpu: w.CPU}
}
