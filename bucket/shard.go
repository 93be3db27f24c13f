package bucket

import "github.com/cespare/xxhash/v2"

// Shard returns the shard of a storage partition: xxhash64 of the
// partition key's bytes modulo shards. It is the one shard function of
// Eventide: storage nodes own shards (cmd/ingest --own-shards), the query
// service routes a slice of a partition to its shard's owner, and the
// fan-out groups timeline writes by it. The shard count is fixed for a
// deployment; changing it moves partitions between shards.
//
// shards must be positive; Shard panics otherwise (a broken invariant of
// the caller's configuration, which validates it first).
func Shard(partitionKey []byte, shards int) int {
	if shards <= 0 {
		panic("BUG: bucket.Shard: shard count must be positive")
	}
	return int(xxhash.Sum64(partitionKey) % uint64(shards))
}
