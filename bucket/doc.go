// Package bucket owns how Eventide names and orders time-series data: hour
// buckets, partition keys, TimeUUIDs, and the order-preserving byte encoding of
// clustering keys. Everything here is a pure function of its inputs: no clock,
// no randomness and no state of its own (callers pass times and random
// sources), so the same event always maps to the same partition and key.
//
// # Partitions
//
// An event lives in the partition "ddmmyyhh|eventtype" of the UTC hour that
// holds it (PartitionKey), or "ddmmyyhh|eventtype|n" when a hot type is split
// into S sub-partitions; n is a fixed hash of the event's TimeUUID
// (PartitionKeyFor). A time window [from, to) maps to the buckets
// BucketsCovering lists newest first, and each bucket to the keys
// PartitionsFor lists; CountBuckets lets a query refuse a window before
// allocating it.
//
// # TimeUUIDs
//
// Event ids are version 1 UUIDs (NewTimeUUID, NewRandomTimeUUID). Their order
// is Cassandra's TimeUUIDType (CompareTimeUUID): 60-bit timestamp, then bytes
// 8..15 as signed bytes. EncodeTimeUUID writes 16 bytes whose bytes.Compare
// order is that order, and MinTimeUUID/MaxTimeUUID give the bounds of a
// millisecond, as Cassandra's minTimeuuid/maxTimeuuid.
//
// # Clustering keys
//
// A ClusteringLayout lists typed columns, each ASC or DESC. Its Encode writes
// bytes whose bytes.Compare order is the CQL clustering order, so the storage
// engine sorts and bounds rows without knowing any types; EncodePrefix and
// PrefixEnd turn conditions on leading columns into byte ranges.
//
// # Invariants
//
//   - Nothing under bucket/ (this package and bucket/schema, tests
//     included) imports the storage engine, directly or indirectly:
//     TestNoStorageImports fails if it does. Code that reads or writes a
//     store lives in package catalog.
//   - For every encoder here, bytes.Compare(enc(a), enc(b)) equals the typed
//     comparison of a and b, including its sign and its zero.
//   - Encodings are prefix-free per component, so concatenated components
//     compare component by component.
//   - Decoders (DecodeTimeUUID, ClusteringLayout.Decode, ParsePartitionKey)
//     accept only canonical input: whatever decodes re-encodes to the same
//     bytes, and any other input is an error (ErrCorruptKey,
//     ErrInvalidPartitionKey), never a panic. Fuzz targets check this.
//   - These byte formats are part of Eventide's on-disk format. They are
//     documented at the top of timeuuid.go, clustering.go, varint.go,
//     decimal.go and partition_key.go and must never change meaning.
//
// Errors wrap the sentinels in errors.go; check them with errors.Is.
package bucket
