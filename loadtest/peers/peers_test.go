package main

import (
	"testing"
)

// TestEnginesAgree runs every phase of every engine on a small workload
// and checks that they return the same rows and that the delete phase
// removed what it should: the read phases compare engines only when their
// answers are equal.
func TestEnginesAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("builds four stores per engine")
	}
	cfg := config{events: 6000, types: 4, hours: 6, batch: 500, queries: 40, seed: 3, dir: t.TempDir(),
		phases: map[string]bool{"latest": true, "expiry": true, "delete": true}, deleteStrategy: "time_window", deleteRounds: 2, expiryRounds: 3}
	for _, mem := range []memoryConfig{{}, {memtableBytes: 1 << 20, eventideCacheBytes: 4 << 20, pebbleCacheBytes: 4 << 20, goleveldbCacheBytes: 4 << 20, badgerCacheBytes: 4 << 20}} {
		cfg.mem = mem
		rs := map[string]*result{}
		for _, name := range []string{"eventide", "pebble", "goleveldb", "badger"} {
			r, err := runEngine(name, cfg)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			rs[name] = r
		}
		if err := compareRows(rs); err != nil {
			t.Fatal(err)
		}
		e := rs["eventide"]
		if e.latestRows == 0 || e.expiredCells == 0 || e.bytesPerEvent == 0 {
			t.Fatalf("eventide read nothing: %d latest rows, %d expiry cells, %.1f bytes/event", e.latestRows, e.expiredCells, e.bytesPerEvent)
		}
		// Eventide's delete stores are read in deleteRounds rounds, a
		// peer's one store in one.
		if d, p := e.deleted["row"], rs["pebble"].deleted["row"]; d.bg.cold+d.bg.warm != cfg.deleteRounds*cfg.queries || p.bg.cold+p.bg.warm != cfg.queries {
			t.Fatalf("delete phase: %d eventide and %d pebble reads, want %d and %d", d.bg.cold+d.bg.warm, p.bg.cold+p.bg.warm, cfg.deleteRounds*cfg.queries, cfg.queries)
		}
		// Every engine's expiry store is read in expiryRounds rounds,
		// reopened between two.
		for name, r := range rs {
			if n := r.expired.cold + r.expired.warm; n != cfg.expiryRounds*cfg.queries {
				t.Fatalf("%s expiry phase: %d reads, want %d", name, n, cfg.expiryRounds*cfg.queries)
			}
			// goleveldb and Badger write their memtables (the expiring
			// deletes) to a table when they reopen; Eventide and Pebble,
			// flushed before the reads, must not change.
			if !r.expiredTablesKept && (name == "eventide" || name == "pebble") {
				t.Errorf("%s expiry store: the reopenings between rounds changed its table files", name)
			}
		}
		for _, mode := range []string{"cell", "row"} {
			d := e.deleted[mode]
			if d == nil || d.bgCells == 0 || d.bgCells != d.manualCells {
				t.Fatalf("%s deletes: %+v, want live cells read, the same before and after the manual compaction", mode, d)
			}
			// 90% of each partition is deleted: what is left is far less
			// than the full latest-phase reads would find.
			if d.bgCells > cfg.queries*cfg.events/(cfg.types*cfg.hours)/5 {
				t.Fatalf("%s deletes: %d live cells read in %d queries: the deletes did not take", mode, d.bgCells, cfg.queries)
			}
		}
	}
}
