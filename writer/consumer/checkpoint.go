package consumer

// Checkpoint keys.
//
// catalog.PutCheckpoint writes a consumer's checkpoint with the sequence as
// the cell timestamp, so a higher sequence always wins. That same rule
// means a checkpoint can never go back down under its key: a lower
// sequence loses, and a deletion would shadow every later checkpoint up to
// the deleted one. Starting over (Config.ResetCheckpoint, after the stream
// was recreated and its sequences restarted at 1) therefore moves the
// checkpoint to a new key, numbered by an epoch:
//
//	partition "<consumer>.epoch"   last_seq = the current epoch (absent: 0)
//	partition "<consumer>"         the checkpoint of epoch 0
//	partition "<consumer>.<n>"     the checkpoint of epoch n >= 1
//
// These keys are the writer's since before this package was split out of
// it: existing data directories keep their checkpoints.
//
// The epoch row is itself written with catalog.PutCheckpoint, so the
// highest epoch wins. '.' cannot occur in a JetStream durable name, so no
// consumer's own key collides with these. The epoch also enters the ids of
// events sent without one, so the recreated stream's sequence n never
// yields the id of the old stream's sequence n.

import (
	"context"
	"fmt"
	"strconv"

	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

func epochKey(consumer string) string { return consumer + ".epoch" }

func checkpointKey(consumer string, epoch uint64) string {
	if epoch == 0 {
		return consumer
	}
	return consumer + "." + strconv.FormatUint(epoch, 10)
}

// Checkpoint is where a consumer stands in its stream.
type Checkpoint struct {
	Epoch uint64
	Key   string // partition of the checkpoint in schema.CheckpointsTable
	Seq   uint64 // last stream sequence whose effects are stored
}

// ReadCheckpoint reads the stored checkpoint of the durable consumer named
// consumer.
func ReadCheckpoint(db *storage.DB, consumer string) (Checkpoint, error) {
	epoch, err := catalog.ReadCheckpoint(db, epochKey(consumer))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("cannot read checkpoint epoch: %w", err)
	}
	key := checkpointKey(consumer, epoch)
	seq, err := catalog.ReadCheckpoint(db, key)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("cannot read checkpoint: %w", err)
	}
	return Checkpoint{Epoch: epoch, Key: key, Seq: seq}, nil
}

// startNewEpoch durably moves consumer's checkpoint to a new epoch whose
// sequence is 0.
func startNewEpoch(db *storage.DB, consumer string, cur Checkpoint) (Checkpoint, error) {
	next := cur.Epoch + 1
	var b storage.Batch
	catalog.PutCheckpoint(&b, epochKey(consumer), next)
	if err := db.Apply(context.Background(), &b); err != nil {
		return Checkpoint{}, fmt.Errorf("cannot start checkpoint epoch %d: %w", next, err)
	}
	return Checkpoint{Epoch: next, Key: checkpointKey(consumer, next)}, nil
}

// CopyCheckpoint makes the checkpoint of consumer to what the checkpoint
// of consumer from is (epoch and sequence), in one batch, and returns it.
// A store restored from another node's snapshot holds that node's
// consumers' checkpoints; copying them to this node's consumer names makes
// this node resume where the snapshot ends instead of replaying the whole
// stream into data that already holds it. It refuses when to already has
// a checkpoint: the store's data then reflects to's position, not from's.
func CopyCheckpoint(db *storage.DB, from, to string) (Checkpoint, error) {
	src, err := ReadCheckpoint(db, from)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("cannot copy the checkpoint of %s: %w", from, err)
	}
	dst, err := ReadCheckpoint(db, to)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("cannot copy a checkpoint to %s: %w", to, err)
	}
	if dst.Seq != 0 || dst.Epoch != 0 {
		return Checkpoint{}, fmt.Errorf("cannot copy the checkpoint of %s to %s: %s already has one (epoch %d, seq %d)", from, to, to, dst.Epoch, dst.Seq)
	}
	out := Checkpoint{Epoch: src.Epoch, Key: checkpointKey(to, src.Epoch), Seq: src.Seq}
	var b storage.Batch
	if src.Epoch > 0 {
		catalog.PutCheckpoint(&b, epochKey(to), src.Epoch)
	}
	catalog.PutCheckpoint(&b, out.Key, src.Seq)
	if err := db.Apply(context.Background(), &b); err != nil {
		return Checkpoint{}, fmt.Errorf("cannot copy the checkpoint of %s to %s: %w", from, to, err)
	}
	return out, nil
}
