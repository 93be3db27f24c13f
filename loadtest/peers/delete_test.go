package main

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"weak"
)

// logEngine is an engine that does nothing but append what is asked of it
// to a log it shares with the other stores of a test, so the test can
// check the order in which the delete phase drives its stores.
type logEngine struct {
	mode string
	log  *[]string
	// opening counts the openings of the store before this one: its
	// disk bytes are 10 + opening, so a test can tell which opening a
	// figure came from.
	opening int
}

func (e *logEngine) name() string { return "log" }
func (e *logEngine) record(format string, args ...any) {
	*e.log = append(*e.log, e.mode+" "+fmt.Sprintf(format, args...))
}
func (e *logEngine) ingest(evs []event, _ []int32) error { e.record("ingest %d", len(evs)); return nil }
func (e *logEngine) expire([]event) error                { return nil }
func (e *logEngine) deleteEvents(evs []event) error {
	e.record("deleteEvents %d", len(evs))
	return nil
}
func (e *logEngine) deleteRows(evs []event) error   { e.record("deleteRows %d", len(evs)); return nil }
func (e *logEngine) compactedBytes() (int64, error) { return 0, nil }
func (e *logEngine) flush() error                   { e.record("flush"); return nil }
func (e *logEngine) flushAndCompact() error         { e.record("compact"); return nil }
func (e *logEngine) latest(string, int) (int, error) {
	return 0, nil
}
func (e *logEngine) all(p string) (int, error) { e.record("read %s", p); return len(p), nil }
func (e *logEngine) window(string, []byte, []byte) (int, error) {
	return 0, nil
}
func (e *logEngine) diskBytes() (int64, error) { return int64(10 + e.opening), nil }
func (e *logEngine) close() error              { e.record("close"); return nil }

// TestDeleteStoresInterleaved: the delete phase builds and reads its
// stores side by side, so that each query's partition is read from every
// store within microseconds of each other, the store read first
// alternating, and each store's deletes run batch by batch alternately
// with the other's (so both settle from the same instant); each read pass
// runs deleteRounds rounds of queries, every store reopened between two.
func TestDeleteStoresInterleaved(t *testing.T) {
	cfg := config{events: 2000, types: 2, hours: 2, batch: 500, seed: 5, queries: 6}
	const rounds = 3
	var log []string
	store := func(mode string) deleteStore {
		openings := 0
		first := &logEngine{mode: mode, log: &log}
		last := weak.Make(first)
		open := func() (engine, error) {
			log = append(log, mode+" open")
			// The store being reopened is closed: nothing of the phase
			// may hold it any more, or a real store's memory would stay
			// resident until the phase ends.
			runtime.GC()
			if last.Value() != nil {
				t.Errorf("%s store: opening %d of the store is still reachable when it is reopened", mode, openings)
			}
			openings++
			e := &logEngine{mode: mode, log: &log, opening: openings}
			last = weak.Make(e)
			return e, nil
		}
		return deleteStore{mode: mode, e: first, open: open}
	}
	stores := []deleteStore{store("cell"), store("row")}
	ds, err := deleteStores(cfg, &benchClock{}, stores, rounds)
	if err != nil {
		t.Fatal(err)
	}
	var ingests, deletes, reads []string
	var order strings.Builder // "r" a read, "c" a close, "o" an opening
	for _, l := range log {
		switch f := strings.Fields(l); f[1] {
		case "ingest":
			ingests = append(ingests, f[0])
		case "deleteEvents", "deleteRows":
			deletes = append(deletes, f[0]+" "+f[1])
		case "read":
			reads = append(reads, l)
			order.WriteString("r")
		case "close":
			order.WriteString("c")
		case "open":
			order.WriteString("o")
		}
	}
	// Per pass: a round of reads, then both stores closed and reopened
	// before each further round.
	round := strings.Repeat("r", 2*cfg.queries)
	pass := round + strings.Repeat("coco"+round, rounds-1)
	if got, want := order.String(), pass+pass; got != want {
		t.Errorf("reads (r), closes (c) and opens (o) in order:\n%s, want\n%s", got, want)
	}
	batches := cfg.events / cfg.batch
	if want := strings.Repeat("cell row ", batches); strings.Join(ingests, " ")+" " != want {
		t.Errorf("ingests by store %q, want each batch into cell then row", ingests)
	}
	var wantDeletes []string
	for b := range batches {
		pair := []string{"cell deleteEvents", "row deleteRows"}
		if b%2 == 1 {
			pair[0], pair[1] = pair[1], pair[0]
		}
		wantDeletes = append(wantDeletes, pair...)
	}
	if strings.Join(deletes, ",") != strings.Join(wantDeletes, ",") {
		t.Errorf("deletes %q, want %q (cell deletes in the cell store, row deletes in the row store, the first alternating by batch)", deletes, wantDeletes)
	}
	// Two read passes (background only, after the manual compaction), each
	// of rounds x queries queries reading one partition from both
	// stores.
	queries := rounds * cfg.queries
	if len(reads) != 2*2*queries {
		t.Fatalf("%d reads, want %d: %q", len(reads), 2*2*queries, reads)
	}
	for i := 0; i < len(reads); i += 2 {
		q := i / 2 % queries
		first, second := strings.Fields(reads[i]), strings.Fields(reads[i+1])
		wantFirst := "cell"
		if q%2 == 1 {
			wantFirst = "row"
		}
		if first[0] != wantFirst || second[0] == first[0] || first[2] != second[2] {
			t.Errorf("query %d read %q then %q, want the same partition from both stores, %s first", q, reads[i], reads[i+1], wantFirst)
		}
	}
	// A query is cold when it is the first of its partition in its round:
	// each round reads freshly opened stores.
	wantCold := 0
	for r := range rounds {
		seen := map[string]bool{}
		for q := r * cfg.queries; q < (r+1)*cfg.queries; q++ {
			seen[strings.Fields(reads[2*q])[2]] = true
		}
		wantCold += len(seen)
	}
	for i, d := range ds {
		if d.bg.cold != wantCold || d.bg.cold+d.bg.warm != queries {
			t.Errorf("%s store: %d cold and %d warm queries, want %d cold of %d", stores[i].mode, d.bg.cold, d.bg.warm, wantCold, queries)
		}
		if d.deletesPerSecond <= 0 || d.bgCells == 0 || d.bgCells != d.manualCells {
			t.Errorf("%s store's result %+v, want deletes/s and the same cells read in both passes", stores[i].mode, d)
		}
		// Disk bytes are measured after a pass's first round, before the
		// store is reopened: the background-only pass's on the store as
		// the deletes left it (opening 0), the manual pass's on the one
		// the background pass's last reopening opened.
		if want := int64(10); d.bgBytes != want {
			t.Errorf("%s store: background-only disk bytes %d, want %d (measured before the first reopening)", stores[i].mode, d.bgBytes, want)
		}
		if want := int64(10 + rounds - 1); d.manualBytes != want {
			t.Errorf("%s store: manual disk bytes %d, want %d (measured before the pass's first reopening)", stores[i].mode, d.manualBytes, want)
		}
	}
}
