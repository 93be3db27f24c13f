// Package base holds the types every part of the storage engine agrees on:
// cells, deletion times, range tombstones and their fragments (sorted,
// disjoint, with a cursor that moves with a scan: fragments.go), clustering
// bounds, the ordering of keys, Cassandra's reconciliation rules and the
// corruption marker error.
//
// Invariants:
//   - Within a table, data is ordered by (partition key bytes, clustering key
//     bytes, column name bytes), each compared with bytes.Compare. Callers
//     encode clustering keys order-preservingly (see package bucket), so the
//     engine never interprets them.
//   - Reconcile is a total, deterministic choice between two versions of one
//     cell: the result never depends on argument order (commutative), so
//     sources may be merged in any order.
//   - A DeletionTime with MarkedForDeleteAt == LiveMarkedForDeleteAt deletes
//     nothing.
package base
