// Package consumer is the exactly-once loop between a JetStream durable
// pull consumer and storage: it fetches messages, has a Handler turn them
// into storage mutations, applies those with the consumer's checkpoint in
// one atomic storage batch, acks, and repositions the consumer when
// deliveries went missing. The writer (package writer) is one user; any
// consumer that turns messages into a storage batch (the fan-out worker)
// can be another. The loop owns the checkpoint; the Handler owns what the
// messages mean.
//
// It lives under writer/ because it was the writer's loop and the writer
// is the user that defines it; its API knows nothing of events.
//
// Use:
//
//	c, err := consumer.New(ctx, nc, db, consumer.Config{Stream: "EVENTS", Durable: "eventide-writer", ...}, handler)
//	...
//	err = c.Run(ctx) // until ctx is cancelled
//	st := c.Stats()  // any goroutine: checkpoint, its stream time, pending
//
// Stats is what the stored data reflects (the HTTP API's "freshness"):
// LastAppliedSeq and LastAppliedTime move when a batch is stored; Pending
// is JetStream's count of messages after the last stored batch, taken at
// its fetch, or every 2s while idle; it stops moving when Run stops.
//
// Invariants:
//
//   - Ack after durability: a message is acked only after the storage
//     batch covering it was applied (after its WAL fsync in storage's
//     default sync mode), and after the Handler's Write, which runs first,
//     succeeded (the writer publishes dead letters there and waits for
//     their acks). A crash at any point loses nothing; JetStream
//     redelivers.
//   - The checkpoint (catalog.PutCheckpoint, keys in checkpoint.go) moves
//     atomically with the mutations it covers, so a redelivered message at
//     or below it is acked without reaching the Handler again: effects take
//     place exactly once. The Handler sees each message above the
//     checkpoint in stream order; it may see one again only if the batch
//     holding it was never stored (shutdown, crash), so its mutations must
//     be deterministic per message (the writer's event ids are).
//   - The checkpoint never moves past a message that was not stored.
//     Deliveries are checked against the consumer's own sequence numbers;
//     when some never arrived, and at every start, the consumer is reset to
//     deliver from the message after the checkpoint. A failed Apply is
//     retried with the same batch, never skipped; on shutdown an unstored
//     batch is left unacked.
//   - Before each reset the consumer's acknowledged floor is compared with
//     the checkpoint: messages acked but not stored (storage older than the
//     NATS state) are redelivered if the stream holds them, and reported
//     (error log, metric, Health) if retention removed them.
//   - A stream that restarted its sequences (deleted and recreated) is
//     refused (ErrCheckpointAhead) rather than read as already stored;
//     Config.ResetCheckpoint starts a new checkpoint epoch.
//   - One ack per stored batch. On a limits stream the durable consumer
//     acks cumulatively (JetStream's AckAll: an ack of stream sequence S
//     acks every delivery at or below S), and a stored batch is acked
//     with one ack, of its delivery with the highest stream sequence. It
//     is as safe as acking each message, for these reasons.
//     Ordering: deliveries are checked to follow each other without a
//     gap (consumer sequences), and the stream delivers in stream order,
//     so every delivery at or below S reached this process in this
//     batch or an earlier one; batches are stored one at a time, in fetch
//     order, so all of them are stored (or skipped as already stored)
//     when the ack is sent. A delivery not received, or received after a
//     gap, is never covered: the gap makes the loop reposition before
//     the next batch.
//     Dead letters: the Handler's Write runs before the storage apply
//     and the ack; a message sent to the dead-letter stream is one of the
//     batch's deliveries and is acked with it.
//     Redeliveries: after a reposition the consumer restarts at the
//     message after the checkpoint with nothing pending, so an ack can
//     cover only deliveries made since. A redelivery of a message at or
//     below the checkpoint (AckWait expired, a lost ack) is skipped, and
//     it may come after higher sequences of the same batch, hence the
//     highest sequence rather than the last delivery.
//     MaxAckPending (two fetches) counts unacked deliveries as before: the
//     batch's ack releases all of them at once.
//     InProgress: a held batch still sends InProgress for every delivery,
//     since each delivery's AckWait timer is its own.
//     A lost ack costs redeliveries that the checkpoint skips, or is
//     covered by the next batch's ack.
//     The fan-out worker (package fanout), which reuses this loop, acks the
//     same way for the same reasons: it never acks on its own.
//     Work-queue streams need explicit acks (the server requires them) and
//     an existing consumer of an interest stream cannot be recreated
//     without losing its unacked messages, so both keep AckExplicit and
//     ack every delivery. A durable created by an earlier version with
//     AckExplicit on a limits stream is deleted and recreated (the server
//     refuses to change an ack policy on update); the stream keeps the
//     messages and the start-up reposition puts the new consumer after
//     the checkpoint.
//   - Two stages: Run's goroutine fetches batch N+1 and has the Handler
//     prepare it while another goroutine stores and acks batch N. Batches
//     are stored one at a time, in fetch order.
//   - Backpressure: at most two batches are held. While storage stalls,
//     Apply blocks, fetching stops and JetStream holds the backlog;
//     InProgress keeps held batches from being redelivered meanwhile.
//   - Config.FilterSubjects limits deliveries to some subjects; the
//     checkpoint then skips the other sequences like stored ones.
//   - Each fetch is bounded by FetchBatch messages and FetchMaxBytes bytes
//     (server side); a single larger message is fetched alone.
//   - Batch size: while messages keep coming (the last fetch brought
//     some), a fetch is one pull request that waits up to FetchLinger for
//     the batch to fill, so under load a batch holds what arrives in that
//     time (fewer pull requests, acks, storage batches and fsyncs per
//     message); after a fetch that brought nothing, the next waits for a
//     first message and takes only what else is ready, so a message after
//     a quiet spell is not held back. A lingering pull's deliveries queue
//     in the inbox subscription until the request expires or holds a full
//     batch (looked at every millisecond), and are then taken in one pass:
//     waiting for each as it arrived woke the loop's goroutine once per
//     delivery.
//   - Pull requests (JetStream's CONSUMER.MSG.NEXT, pull.go) go out over
//     one inbox subscription, replaced at every reposition so that
//     deliveries made for requests sent before it are dropped; a fetch
//     subscribes nothing of its own.
//
// Only one process may run per durable name: two would take deliveries
// from each other, which each treats as lost, and would contend for one
// checkpoint.
package consumer
