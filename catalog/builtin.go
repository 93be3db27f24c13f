package catalog

import (
	"fmt"

	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/storage"
)

// BuiltinTableDefs returns the storage definitions of the built-in tables.
func BuiltinTableDefs() []storage.TableDef {
	return []storage.TableDef{
		// Events expire per type (PutTTL); windows of one hour match the
		// partition buckets, so whole expired windows drop unread.
		// The active window merges eight similar-size SSTables at a
		// time (EventsActiveWindowMinThreshold), not four.
		{Name: schema.EventsTable, Compaction: storage.TimeWindow, WindowSeconds: 3600, MinThreshold: EventsActiveWindowMinThreshold},
		{Name: schema.CountsTable, Compaction: storage.SizeTiered, Counters: true},
		{Name: schema.CheckpointsTable, Compaction: storage.SizeTiered},
		// A few rows, written once per settings change.
		{Name: schema.EventTypesTable, Compaction: storage.SizeTiered},
		// One row per type and hour: small, counted like event_counts.
		{Name: schema.TypeHoursTable, Compaction: storage.SizeTiered, Counters: true},
	}
}

// EventsActiveWindowMinThreshold is how many similar-size SSTables the
// events table's active time window merges at once. Each byte of the
// window is rewritten about once per factor of this in size until the
// window closes (then once more, into the window's one zstd SSTable), so
// eight instead of storage's default four rewrites it about a third
// fewer times: about 3.8 instead of 5.7 times in an hour at 60,000
// events/s (1.3 MB flushes), half as often in a 20 s load test. The
// price is more SSTables in the active window for reads to look up: up
// to seven per size tier (about 28 in an hour at that rate, under
// storage's write stall at 48), where four kept three (about 18); a
// latest-N read opens only those holding its newest rows, and looks the
// partition up in the others. Measured in BENCHMARKS.md (s17-ingest).
// Only a table created with it has it: an events table created before
// keeps the threshold it was created with.
const EventsActiveWindowMinThreshold = 8

// EnsureBuiltinTables creates the built-in tables in db if they are
// missing. It is idempotent.
func EnsureBuiltinTables(db *storage.DB) error {
	for _, def := range BuiltinTableDefs() {
		if _, ok := db.Table(def.Name); ok {
			continue
		}
		if err := db.CreateTable(def); err != nil {
			return fmt.Errorf("create built-in table %s: %w", def.Name, err)
		}
	}
	return nil
}
