// Package fanout keeps the follow graph and the denormalized timelines:
// follow, unfollow, post and post_delete events become storage batches in
// stream order, and posts are copied (pushed) into their authors'
// followers' timelines by a bounded pool of workers, in checkpointed
// chunks.
//
// How to use it. The input is the stream of events in stream order, each
// with its position (Position: consumer epoch and stream sequence):
//
//	f, _ := fanout.Open(db, fanout.DefaultOptions())
//	var b storage.Batch
//	p, _ := f.Prepare(ctx, &b, msgs)          // effects of msgs, in order
//	catalog.PutCheckpoint(&b, consumer, last) // the consumer's checkpoint, same batch
//	db.Apply(ctx, &b)
//	f.Committed(p)                           // counts skips, wakes the workers
//	go f.Run(ctx)                            // works pending chunks until ctx ends
//
// Apply does Prepare, Apply and Committed for callers (tests, tools) that
// keep no checkpoint of their own.
//
// Worker (worker.go) is that loop over JetStream: its own durable consumer
// (DefaultConsumer, "eventide-fanout") on the writer's event stream,
// through package writer/consumer, so the fan-out's effects are applied
// exactly once per stream message across crashes and redeliveries (the
// checkpoint is in the batch with them). The consumer is filtered to the
// subjects of the fan-out's event types (writer.Parser.TypeSubjects; every
// subject when the stream's subjects do not name types). Each message is
// parsed by the writer's rules (writer.Parser), so a post's id is the id
// of the stored event, derived from (stream, epoch, sequence) when the
// producer sent none; a message the writer rejects is the writer's to
// dead-letter, and the fan-out skips it, counted under the reason
// "rejected_<writer reason>". Parsing uses the message's stream time as
// now, so a redelivery parses the same way; the writer uses its clock, so
// an event at the very edge of max skew or of its TTL can be judged
// differently by the two (it is then stored but not fanned out, or the
// other way round). The ids agree as long as the writer's and the
// fan-out's checkpoint epochs agree (both 0 unless a checkpoint was reset
// after the stream was recreated: reset both).
//
//	w, _ := fanout.NewWorker(ctx, nc, db, f, fanout.WorkerConfig{Writer: wcfg})
//	go w.Run(ctx) // consumes and works chunks until ctx ends
//
// What each event does (tables in catalog/fanout_tables.go):
//   - follow (user, author): the edge in followers and following, the
//     author's follower count; unless the author is large, the author's
//     newest Options.Backfill posts are copied into the user's timeline.
//   - unfollow: the edge is deleted, the count decremented, and the
//     author's copies found in the user's timeline (its newest rows, up to
//     Options.CleanupScan) are deleted.
//   - post (author; its event id is the post id): a userline row; if the
//     author has followers and is not large, a fan-out job (one row per
//     part in _fanout_jobs: Shards times up to Options.PartsPerShard
//     parts, one per shard by default) that workers push chunk by chunk.
//   - post_delete (author, data.post_id): the userline row is deleted, a
//     _fanout_deleted marker is written (the read-time filter), the post's
//     pending job is cancelled and, if it was pushed, a delete job removes
//     the copies chunk by chunk.
//
// Chunks and durability. Chunk batches are applied with
// storage.DB.ApplyNoSync: they are in the WAL in order but their Apply does
// not wait for an fsync (that wait was most of a chunk worker's time). The
// batches that carry the fan-out's stream effects (the job rows, with the
// consumer's checkpoint: what the stream ack waits for) are applied with
// the ordinary, synced Apply, by the caller. Exactly-once still holds:
//   - A stream message is acked only after its synced batch, so its job
//     rows and checkpoint are durable before the ack; a crash before that
//     redelivers the message, and the checkpoint decides as before.
//   - A machine crash loses at most a suffix of the WAL made of unsynced
//     chunk batches (the WAL is ordered; a synced record makes every
//     earlier one durable, and the WAL's flusher fsyncs a lone chunk within
//     storage.Options.WALSyncInterval). Each lost batch is a whole chunk:
//     its timeline rows together with the cursor (or the job row's
//     deletion) that records it done. So after the crash every job's
//     durable cursor says exactly which chunks are durable, and Run redoes
//     the rest from it, writing the same cells at the post's position.
//   - Nothing durable depends on a lost chunk: a batch that read a chunk's
//     cells (an unfollow's cleanup scan or a post_delete's cancellation of
//     the job in the consumer's batch, a trim or the next chunk) was
//     appended to the WAL after the chunk, so it is lost with it or makes
//     it durable. A chunk redone after a later delete or unfollow writes
//     below their timestamps, as a late chunk always does. A process crash (SIGKILL) loses
//     no chunk whose ApplyNoSync returned: it was written to the file.
//
// Invariants:
//   - Every write of a message is timestamped with its stream position
//     (WriteTimestamp), and every later message with a higher one. A chunk
//     of a post's job, however late it runs, writes at the post's position,
//     so the deletes and unfollows that follow it in the stream shadow it:
//     the state converges to applying the events one by one in stream
//     order. Applying a message twice writes the same cells again.
//   - A chunk's timeline writes and its job progress are one atomic batch:
//     a crash redoes at most the chunks whose batch was not yet durable,
//     and redoing a chunk rewrites the same cells.
//   - A chunk skips followers whose edge is newer than the post (their
//     follow backfilled it, or chose not to): only the stream order
//     decides who gets a post.
//   - The fan-out's own memory is bounded by 2 x Options.Workers chunks
//     of Options.ChunkSize followers (one being applied and one read
//     ahead per worker; their batches reused) and the trim length table
//     (8 bytes x Options.TrimTracked, 4 MiB by default, mapped outside
//     the Go heap: lengths.go), whatever an
//     author's follower count: the follower list is streamed from the
//     store, never loaded. The storage engine's memory for the rows
//     written is the engine's (BENCHMARKS.md measures both).
//   - Chunks wait for the engine's flushes: a chunk's batch waits while
//     a frozen memtable is being flushed and the memtables hold more than
//     Options.MaxMemtableBytes (memtables.go), so a large fan-out does not
//     fill the next memtable while the last one is still resident.
//     Ordinary ingest never waits for it.
//   - An author becomes large (pull) when its follower count first passes
//     Options.LargeThreshold, and stays large: its posts from then on are
//     only in its userline, merged into timelines at read time
//     (reader.Timelines). Posts pushed before stay pushed.
//   - Chunk workers yield to ordinary ingest: while Options.WriterBusy
//     reports a backlog (WriterBacklog of the writer, as cmd/ingest
//     wires it), one chunk at a time, at most Options.BusyRowsPerSecond
//     timeline rows a second and Options.BusyShare of the time
//     (throttle.go); full speed otherwise.
//   - Trimming: a timeline past Options.TimelineCap is cut back to it
//     by one range tombstone in a chunk's batch, once it may have grown
//     Options.TrimEvery rows past the cap: chunks keep an upper bound of
//     each timeline's length in a fixed table in memory (lengths.go,
//     Options.TrimTracked timelines) and read a timeline only then. The
//     table is only an optimization: it is lost in a crash, a timeline it
//     does not hold yet is checked within TimelineCap+TrimEvery of the
//     posts pushed to it, and a trim is always computed from the timeline as
//     read, so a trim leaves exactly the newest TimelineCap rows whatever
//     the table said.
//   - Bad input (a follow without user or author, a self-follow, a post
//     without author, a delete of an unknown post, ...) is counted by
//     reason, logged at most once per reason per minute, and skipped;
//     it never blocks.
package fanout
