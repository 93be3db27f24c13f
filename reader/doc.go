// Package reader plans and runs Eventide's queries: bounded slices over
// Cassandra-style wide rows that stop before tombstones.
//
// It owns:
//   - event queries (Events): a type and a time window become hour-bucket
//     partitions, walked newest first (or oldest first) and merged across
//     the sub-partitions of hot types, stopping as soon as the limit is met
//     (a caller done with a page may Release it: its memory then serves a
//     later page);
//   - count queries (Counts) over the per-minute counts the writer keeps;
//   - generic slices (Slice) over schema tables: a partition, bounds on any
//     prefix of the clustering columns, order, limit;
//   - timelines (Timelines.Timeline): the pushed timeline merged with the
//     userlines of the large authors the user follows, newest first, with
//     one page token, hiding at read time deleted posts and unfollowed
//     authors that background cleanup has not reached; and pages of
//     followers and following (timeline.go);
//   - paging tokens, traces, and the per-query tombstone thresholds.
//
// Invariants:
//   - A query never walks cells that its table's TTL has expired: the lower
//     time bound of an event query is clamped to now - TTL of the type.
//   - A query touches at most Options.MaxBuckets hour buckets (after the
//     clamp); a wider window is refused with ErrInvalidQuery before any read.
//   - Reads stop after limit+1 live rows: the extra row only decides whether
//     a next page exists. A page token is returned exactly when more rows
//     may follow; a short page is not the end, only a missing token is.
//   - Concatenating the pages of a query equals the unpaged result, with no
//     duplicates and no gaps, even when rows are written between pages
//     (rows are keyed by clustering key, and a token resumes strictly after
//     the last key returned).
//   - A Reader reads through Store (*storage.DB, or a client of remote
//     storage nodes); every query takes a context, and its deadline or
//     cancellation stops the reads under way. An event query's walk over
//     its hour buckets is one Walk (walk.go): a Store that is also a
//     GroupWalker (the remote client) runs it where the data is, in one
//     request; otherwise, and locally, RunWalk slices partition by
//     partition. Both give the same rows.
//   - Tombstones scanned are counted across every partition of a query: past
//     Options.WarnTombstones the query logs a warning and a metric counts it;
//     past Options.FailTombstones it fails with ErrTooManyTombstones naming
//     the partition and suggesting a bound.
//   - Every error caused by the query itself wraps ErrInvalidQuery and says
//     what to change; anything else is a server-side failure.
package reader
