// Package schema maps Eventide's tables onto the storage engine: typed
// tables with partition key, clustering and regular columns (Table), their
// persisted catalog (Catalog), the cell value format (value.go), CQL
// literals (ParseLiteral), and the built-in tables the pipeline uses:
// events, per-minute counts and consumer checkpoints (events.go), with the
// per-type event settings the writer and the reader share (EventTypes).
//
// Invariants:
//   - Rows are sparse: only present columns are stored; a missing or nil
//     value never writes anything, so never a tombstone.
//   - Every write is validated before anything is added to the batch: a
//     failed Insert leaves the batch unchanged, and its error names the
//     table, the column, the expected type and the bad value.
//   - Stored values are self-describing (a type byte), so adding a column
//     is a metadata change and rows decode whatever the schema says today;
//     keys can never change and columns can never be retyped or dropped.
//   - The catalog lives in the store it describes (table _schemas), so it
//     is durable, recovered and backed up with the data directory.
//   - The physical layouts documented on Table, EventsTable, CountsTable
//     and CheckpointsTable, and the value format, are on-disk formats.
package schema
