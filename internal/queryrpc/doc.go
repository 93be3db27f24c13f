// Package queryrpc is the storage service of Eventide's split mode: each
// storage process (cmd/ingest) serves its reads as a NATS micro service,
// and the stateless query service (cmd/query) reads them through Client,
// a reader.Store, so the same reader and HTTP handler run in both modes.
//
// A node registers the service "eventide-storage" (Serve) with five
// endpoints on subjects of its own, <prefix>.<node>.<endpoint>, prefix
// "eventide.storage" by default:
//
//   - slice: one storage.SliceQuery (table, partition, bounds, order,
//     limit, tombstone budget) with the caller's deadline, run under that
//     deadline; the rows come back in one reply bounded by a byte budget,
//     with a "more" flag when the budget cut them (the client asks again
//     from after the last row, with the limit and tombstone budget
//     reduced by what it has);
//   - walk: a whole event query's walk (reader.Walk: groups of
//     partitions, one per hour bucket, walked in order until the limit of
//     the whole walk), run on the node in one request (walk.go); the rows
//     come back with their group, cut by the byte budget and resumed as
//     a slice's;
//   - freshness: the positions of the node's writer and fan-out
//     consumers, and the shards it owns;
//   - health: whether the node is ready, and why not;
//   - stats: the node's storage.Metrics and consumer positions (JSON: one
//     small document, not rows), for the stats route.
//
// Live tail: each node publishes the events it stores on the core NATS
// subject eventide.tail.<node> (TailPublisher, gathering what is stored
// within DefaultTailCoalesce into one message; ListenedTailPublisher, on a
// server that can say whether anything subscribes, only while something
// does); a query service relays them, in stream order, into its own
// tail.Broadcaster (StartTailRelay, TailRelay.Feed). See tail.go.
//
// The messages are a versioned compact binary format documented byte by
// byte at the top of wire.go; every decoder refuses unknown versions and
// malformed input with an error wrapping ErrBadMessage, and has a fuzz
// target.
//
// Routing: a partition's shard is ShardOf: for the events and counts
// tables the shard of its event type (bucket.EventPartitionShard, the
// shard JetStream's partition() files the type's subject under), for the
// others bucket.Shard(partition key, shards). The owner map (ParseOwners,
// e.g. "0-3=node-a,4-7=node-b", or the KV bucket of ownership.go, which
// Client.SetOwners follows) names each shard's node. The events and counts tables are sharded (IsSharded): only the
// owner stores a partition, so only the owner is asked. Every other table
// (event type settings, follow graph, timelines, the fan-out's tables) is
// replicated on every node, so the owner of the partition's shard is asked
// first and the others in turn when it does not answer.
//
// Partial answers: a node that does not answer within the node timeout
// (ClientConfig.NodeTimeout, capped by the request's deadline) makes its
// shard missing. Under a context from TrackMisses the slice is then empty
// and the shard recorded, so a query merges what the other shards hold
// and the HTTP API reports "partial" with the missing shards; without it
// the slice fails with ErrShardUnavailable. A request whose own deadline
// passes fails with the context's error instead (a timeout, not a
// partial answer).
//
// Invariants:
//   - A remote slice returns exactly the rows the owner's store returns
//     for the same query, in the same order, whatever the byte budget; a
//     remote walk exactly the rows, and groups, reader.RunWalk gives over
//     the owner's store.
//   - A node runs each slice or walk under min(request deadline,
//     MaxSliceTime) and at most MaxConcurrent of them at once.
//   - Errors keep their meaning across the wire: too many tombstones
//     arrives as storage.ErrTooManyTombstones.
package queryrpc
