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
		{Name: schema.EventsTable, Compaction: storage.TimeWindow, WindowSeconds: 3600},
		{Name: schema.CountsTable, Compaction: storage.SizeTiered, Counters: true},
		{Name: schema.CheckpointsTable, Compaction: storage.SizeTiered},
		// A few rows, written once per settings change.
		{Name: schema.EventTypesTable, Compaction: storage.SizeTiered},
		// One row per type and hour: small, counted like event_counts.
		{Name: schema.TypeHoursTable, Compaction: storage.SizeTiered, Counters: true},
	}
}

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
