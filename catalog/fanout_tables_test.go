package catalog

import (
	"testing"

	"github.com/eventide/eventide/storage"
)

// TestFanoutTablesPurgePolicy checks which fan-out tables purge
// tombstones immediately (those written in stream order only, see
// FanoutTableDefs), and that EnsureFanoutTables gives the policy to
// tables of a store created before it, keeping the rest of their
// definition.
func TestFanoutTablesPurgePolicy(t *testing.T) {
	want := map[string]storage.TombstoneGCMode{
		FollowersTable: storage.TombstoneGCImmediate, FollowingTable: storage.TombstoneGCImmediate,
		UserlineTable: storage.TombstoneGCImmediate, FanoutDeletedTable: storage.TombstoneGCImmediate,
		FanoutAuthorsTable: storage.TombstoneGCImmediate, FanoutLargeTable: storage.TombstoneGCImmediate,
		// Chunks write these at an earlier message's timestamp.
		TimelineTable: storage.TombstoneGCTimeout, FanoutJobsTable: storage.TombstoneGCTimeout,
	}
	dir := t.TempDir()
	db := openDB(t, dir)
	// A store made before the policy: every table with the default, one
	// with a setting of its own.
	for _, def := range FanoutTableDefs() {
		def.TombstoneGC = ""
		if def.Name == FollowersTable {
			def.MinThreshold = 6
		}
		if err := db.CreateTable(def); err != nil {
			t.Fatal(err)
		}
	}
	if err := EnsureFanoutTables(db); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, dir)
	defer db.Close()
	for name, mode := range want {
		def, ok := db.Table(name)
		if !ok || def.TombstoneGC != mode {
			t.Errorf("%s: tombstone_gc %q (exists %v), want %q", name, def.TombstoneGC, ok, mode)
		}
	}
	if def, _ := db.Table(FollowersTable); def.MinThreshold != 6 {
		t.Errorf("followers lost its min_threshold: %d", def.MinThreshold)
	}
}
