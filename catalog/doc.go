// Package catalog is the storage-facing half of Eventide's schemas: it
// reads and writes the tables that bucket/schema defines in a storage.DB.
// It owns
//
//   - the persisted Catalog of user tables (Open), kept in the store's own
//     _schemas table, so schemas are durable, recovered and backed up with
//     the data directory;
//   - the built-in tables (BuiltinTableDefs, EnsureBuiltinTables): the row
//     writers and decoders of events (PutEvent, EventRowBuilder for many
//     events with few allocations, DecodeEvent), per-minute
//     counts (AddCount, DecodeCount) and consumer checkpoints
//     (PutCheckpoint, ReadCheckpoint);
//   - the history of the event type settings (RecordEventTypes,
//     LoadEventTypes, CheckEventTypes): each version of --types with the
//     first hour bucket it applies to, so every hour is written and read
//     with one sub-partition count and one TTL whatever the flag says
//     today;
//   - the fan-out tables (fanout_tables.go: followers, following,
//     userline, timeline and the fan-out worker's own state), their byte
//     layouts, key encoders and value helpers, written by fanout/ and read
//     by reader/ (FanoutTableDefs, EnsureFanoutTables);
//   - a schema.Table's writes into a storage.Batch (Insert, Update,
//     DeleteRow, DeletePartition) and the decoding of a storage.Row
//     (DecodeRow).
//
// bucket/schema holds everything that does not touch storage (table and
// column definitions, validation, the cell value format, literals, event
// type settings), so that bucket/... stays a set of pure functions; a test
// in bucket/ fails if anything under it imports storage/.
//
// Invariants:
//   - Every write is validated (schema.Table.EncodeRow) before anything is
//     added to the batch: a failed Insert leaves the batch unchanged.
//   - Missing or nil values write nothing, so never a tombstone.
//   - The physical layouts documented on schema.Table, schema.EventsTable,
//     schema.CountsTable and schema.CheckpointsTable are on-disk formats;
//     this package writes and reads exactly them.
//   - A definition change is compatible or refused: keys never change,
//     columns are only added, never dropped or retyped.
//   - An event type settings version only ever starts at an hour no event
//     can have been stored in yet, and a version is never removed, so an
//     hour's settings never change once it may hold data.
package catalog
