// Package writer moves events from NATS JetStream into storage: it owns the
// event stream (EVENTS, subjects events.>), the dead-letter stream
// (EVENTS_DLQ, subjects dlq.events.>), the writer's durable pull consumer,
// the validation of events (the wire format and every rejection reason are
// in docs/events.md), and the writer's checkpoint in the built-in
// _checkpoints table.
//
// Use:
//
//	w, err := writer.New(ctx, nc, db, writer.Config{Registerer: reg})
//	...
//	err = w.Run(ctx) // until ctx is cancelled
//
// Each fetch of up to FetchBatch messages and FetchMaxBytes bytes (a
// single larger message is fetched alone) becomes one atomic storage.Batch
// holding every valid event (schema.PutEvent), the per-minute counts
// (schema.AddCount) and the checkpoint (schema.PutCheckpoint with the
// highest stream sequence of the fetch). Rejected messages are published
// to the dead-letter stream, with the reason in the Eventide-Error header,
// before that batch is applied.
//
// Invariants:
//
//   - Ack after durability: a message is acked only after the batch that
//     stores it was applied, which in the default WALSync mode means after
//     its WAL fsync; a reject only after the dead-letter stream acked its
//     copy. A crash at any point loses nothing; JetStream redelivers.
//   - The checkpoint moves atomically with the mutations it covers, so on
//     redelivery a message at or below it is acked without being applied
//     again: events and counts take effect exactly once.
//   - The checkpoint never moves past a message that was not stored or
//     dead-lettered. Deliveries are checked against the consumer's own
//     sequence numbers; when some never arrived (lost on the wire, taken by
//     another client, outstanding from a process that died), and at every
//     start, the consumer is reset to deliver from the message after the
//     checkpoint. A failed Apply is retried with the same batch, never
//     skipped; on shutdown an unstored batch is left unacked.
//   - A stream that restarted its sequences (deleted and recreated) is
//     refused (ErrCheckpointAhead) rather than read as already stored;
//     Config.ResetCheckpoint starts a new checkpoint epoch (checkpoint.go).
//   - Event ids are deterministic: an event sent without an id gets the
//     version 1 UUID of its event time, with clock sequence and node
//     hashed from (stream, checkpoint epoch, stream sequence), so a
//     redelivered message rewrites the same row. The id's time is the
//     event time, which decides its hour partition and count minute.
//   - Two stages: Run's goroutine fetches and validates batch N+1 while
//     another stores and acks batch N. Batches are stored one at a time,
//     in fetch order, each continuing from the checkpoint its predecessor
//     stored; before the consumer is repositioned, the batch being stored
//     is waited for, and a batch prepared behind one that was abandoned
//     (shutdown during a storage outage) is dropped unacked.
//   - Backpressure: at most two batches are held, one being stored and one
//     waiting. While storage stalls Apply blocks, the writer stops fetching
//     and JetStream holds the backlog; InProgress keeps the batch from
//     being redelivered meanwhile.
//
// Bodies are read by a single-pass scanner (jsonscan.go) that accepts
// exactly what encoding/json accepts (a differential fuzz target checks
// it), at a fraction of the cost.
//
// Only one writer may run per consumer name: two would take deliveries
// from each other, which each treats as lost, and would contend for one
// checkpoint.
package writer
