package bucket

import (
	"bytes"
	"hash/fnv"

	"github.com/cespare/xxhash/v2"
)

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

// DefaultEventSubjectPrefix is the prefix of the subjects events are
// published to (events.<type>), as writer.DefaultSubject "events.>" has it.
const DefaultEventSubjectPrefix = "events."

// EventShard returns the shard of the events of eventType published on
// subjectPrefix+eventType (DefaultEventSubjectPrefix for the default
// stream): FNV-1a 32 of that subject modulo shards. It is exactly what a
// JetStream stream subject transform "<prefix>>" -> "<prefix>{{partition(N)}}.>"
// computes (nats-server's partition(n) without token indexes hashes the
// whole source subject with FNV-1a 32), so the shard JetStream files an
// event under is the shard the writer stores it in and the query service
// routes it to. JetStream can hash only subject tokens, and the subject
// carries the event type but not the hour, so the events and counts tables
// are sharded by type: every partition "ddmmyyhh|type[|n]" of a type is
// in one shard (see PartitionShard).
//
// shards must be positive; EventShard panics otherwise.
func EventShard(subjectPrefix, eventType string, shards int) int {
	if shards <= 0 {
		panic("BUG: bucket.EventShard: shard count must be positive")
	}
	h := fnv.New32a()
	h.Write([]byte(subjectPrefix))
	h.Write([]byte(eventType))
	return int(h.Sum32() % uint32(shards))
}

// EventPartitionShard returns the shard of a partition of the events or
// counts table ("ddmmyyhh|type" or "ddmmyyhh|type|n"): EventShard of its
// event type, the part between the first and second '|'. A key without
// '|' has no type to route by; it falls back to Shard so that every key
// has one shard.
func EventPartitionShard(subjectPrefix string, partitionKey []byte, shards int) int {
	i := bytes.IndexByte(partitionKey, '|')
	if i < 0 {
		return Shard(partitionKey, shards)
	}
	eventType := partitionKey[i+1:]
	if j := bytes.IndexByte(eventType, '|'); j >= 0 {
		eventType = eventType[:j]
	}
	return EventShard(subjectPrefix, string(eventType), shards)
}
