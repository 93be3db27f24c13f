// Package writer moves events from NATS JetStream into storage: it owns the
// event stream (EVENTS, subjects events.>), the dead-letter stream
// (EVENTS_DLQ, subjects dlq.events.>, or dlq.<DLQStream>.> for another
// name), the writer's durable pull consumer,
// the validation of events (the wire format and every rejection reason are
// in docs/events.md), and the writer's checkpoint in the built-in
// _checkpoints table.
//
// Use:
//
//	w, err := writer.New(ctx, nc, db, writer.Config{Registerer: reg})
//	...
//	err = w.Run(ctx) // until ctx is cancelled
//	...
//	err = w.Health() // for readiness: nil, or what is wrong
//
// Each fetch of up to FetchBatch messages and FetchMaxBytes bytes (a
// single larger message is fetched alone; under load a fetch waits up to
// FetchLinger for its batch to fill) becomes one atomic storage.Batch
// holding every valid event (catalog.PutEvent), the per-minute counts
// (catalog.AddCount) and the checkpoint (catalog.PutCheckpoint with the
// highest stream sequence of the fetch). Rejected messages are published
// to the dead-letter stream, with the reason in the Eventide-Error header,
// before that batch is applied.
//
// A sharded stream (Config.Shards above 1) is partitioned by JetStream:
// a subject transform stores events.<type> as events.<shard>.<type>
// (shard = bucket.EventShard), and a writer's consumer is filtered to its
// Config.Shard, so a node runs one writer, consumer and checkpoint per
// shard it owns (cmd/ingest). Config.StoresPartition, when set, keeps only
// the rows of a batch it accepts, while every message is still
// checkpointed and acked; Config.NoDeadLetters leaves rejects out of the
// dead-letter stream (for deployments where several writers read the same
// messages).
//
// The loop that fetches, stores with the checkpoint, acks and
// repositions is package writer/consumer, whose doc lists the invariants
// it keeps (ack after durability, exactly-once effect through the
// checkpoint, repositioning after lost deliveries, the ack-floor check,
// ErrCheckpointAhead and checkpoint epochs, two stages, backpressure). The
// writer is its Handler (batch.go) and adds:
//
//   - A reject is acked only after the dead-letter stream acked its copy:
//     Write publishes the batch's dead letters and waits for every ack,
//     retrying, before the storage batch is applied; while the dead-letter
//     stream is missing or refuses writes nothing after the reject is
//     acked either.
//   - Event ids are deterministic: an event sent without an id gets the
//     version 1 UUID of its event time, with clock sequence and node
//     hashed from (stream, checkpoint epoch, stream sequence), so a
//     redelivered message rewrites the same row. The id's time is the
//     event time, which decides its hour partition and count minute.
//
// Parser (parser.go) gives other consumers of the stream (the fan-out
// worker) the writer's validation and its event ids, so they see exactly
// the events the writer stores.
//
// Bodies are read by a single-pass scanner (jsonscan.go) that accepts
// exactly what encoding/json accepts (a differential fuzz target checks
// it), at a fraction of the cost.
//
// Only one writer may run per consumer name: two would take deliveries
// from each other, which each treats as lost, and would contend for one
// checkpoint.
package writer
