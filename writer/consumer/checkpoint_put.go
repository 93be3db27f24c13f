package consumer

import (
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

// PutCheckpoint adds to b the mutations that make ck's epoch and sequence
// the checkpoint of consumer (under consumer's own keys, whatever ck.Key
// says), and returns that checkpoint. It is for a store that holds no
// checkpoint of consumer yet and receives data from elsewhere with the
// position it covers: a per-shard snapshot's SSTables are ingested
// (storage.DB.Ingest) together with this batch, so the data and the
// checkpoint arrive in one step.
func PutCheckpoint(b *storage.Batch, consumer string, ck Checkpoint) Checkpoint {
	out := Checkpoint{Epoch: ck.Epoch, Key: checkpointKey(consumer, ck.Epoch), Seq: ck.Seq}
	if ck.Epoch > 0 {
		catalog.PutCheckpoint(b, epochKey(consumer), ck.Epoch)
	}
	catalog.PutCheckpoint(b, out.Key, ck.Seq)
	return out
}
