// Package schema defines Eventide's tables without touching storage:
// typed tables with partition key, clustering and regular columns (Table),
// their validation and key and row encoding, the cell value format
// (value.go), CQL literals (ParseLiteral), the names and layouts of the
// built-in tables (events, per-minute counts, consumer checkpoints;
// events.go), and the per-type event settings the writer and the reader
// share (EventTypes, ParseEventTypes).
//
// Like all of bucket/, it is pure: it never imports the storage engine (a
// test in bucket/ checks this). Package catalog reads and writes these
// tables in a storage.DB: the persisted catalog of user tables, the
// built-in tables' row writers and decoders, and Table rows in a batch.
//
// Invariants:
//   - Rows are sparse: only present columns are encoded; a missing or nil
//     value yields no cell, so never a tombstone.
//   - Table.EncodeRow validates every column before returning anything,
//     and its error names the table, the column, the expected type and the
//     bad value.
//   - Stored values are self-describing (a type byte), so adding a column
//     is a metadata change and rows decode whatever the schema says today;
//     keys can never change and columns can never be retyped or dropped.
//   - The physical layouts documented on Table, EventsTable, CountsTable
//     and CheckpointsTable, and the value format, are on-disk formats.
package schema
