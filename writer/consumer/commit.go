package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

// errAbandoned is wrapped by commit's error when ctx ended while the
// batch could not be stored yet; nothing of it was acked.
var errAbandoned = errors.New("batch abandoned")

// preparedBatch is one fetch's worth of deliveries, prepared and ready to
// be stored: the first half of handling a batch, done by Run's goroutine
// while the previous batch is still being stored.
type preparedBatch struct {
	ds      []Delivery
	batch   Batch // nil when every delivery was at or below the checkpoint
	skipped int
	// oldest is the stream time of the first delivery above the
	// checkpoint; zero if none is.
	oldest time.Time
	// newest is the stream time of the last delivery above the
	// checkpoint: what the stored data reflects once the batch is.
	newest time.Time
	// pending is the consumer's NumPending after the batch's last
	// delivery.
	pending uint64
	// from is the checkpoint before this batch, handled the checkpoint
	// once it is stored: the highest sequence handled.
	from, handled uint64
}

// prepare splits one fetch's worth of deliveries that follow a checkpoint
// at from (the batch before it may not be stored yet): deliveries at or
// below from are skipped (already stored), the rest go to the Handler.
func (c *Consumer) prepare(ds []Delivery, from uint64) *preparedBatch {
	c.m.BatchSize.Observe(float64(len(ds)))
	pb := &preparedBatch{ds: ds, from: from, handled: from}
	var fresh []Delivery
	for i, d := range ds {
		if d.Seq <= pb.handled {
			pb.skipped++
			continue
		}
		pb.handled = d.Seq
		pb.newest = d.Time
		if fresh == nil {
			fresh = make([]Delivery, 0, len(ds)-i)
			pb.oldest = d.Time
		}
		fresh = append(fresh, d)
	}
	if len(fresh) > 0 {
		pb.batch = c.h.Prepare(fresh, c.ckpt.Epoch)
	}
	return pb
}

// commit finishes a prepared batch, in this order:
//
//  1. the Handler's Write does what must precede the acks (the writer's
//     dead letters) and adds its mutations to one storage batch;
//  2. that batch, with the checkpoint, is applied atomically and durably
//     (retried until it succeeds);
//  3. only then is every delivery acked, and the checkpoint moved.
//
// pb.from must be the stored checkpoint: commits happen one at a time, in
// fetch order. If ctx ends while step 1 or 2 keeps failing, nothing is
// acked and the error wraps errAbandoned: JetStream redelivers, and the
// checkpoint did not move.
func (c *Consumer) commit(ctx context.Context, pb *preparedBatch) error {
	if pb.from != c.ckpt.Seq {
		return fmt.Errorf("BUG: consumer: batch prepared after checkpoint %d committed at checkpoint %d", pb.from, c.ckpt.Seq)
	}
	if pb.handled > pb.from {
		stop := c.keepAlive(pb.ds)
		err := c.store(ctx, pb)
		stop()
		if err != nil {
			return err
		}
	}

	// Fire and forget: a lost ack means a redelivery, which the
	// checkpoint turns into a skip (under AckAll, the next batch's ack
	// covers it too).
	if c.ackAll {
		// One ack for the batch: AckAll acks every delivery at or below
		// its stream sequence, and every one of those is stored (doc.go).
		last := highestDelivery(pb.ds)
		if err := last.Msg.Ack(); err != nil {
			c.warn.Warn("consumer: cannot ack; the batch's messages will be redelivered and skipped", "seq", last.Seq, "err", err)
		}
	} else {
		for _, d := range pb.ds {
			if err := d.Msg.Ack(); err != nil {
				c.warn.Warn("consumer: cannot ack; the message will be redelivered and skipped", "seq", d.Seq, "err", err)
			}
		}
	}

	c.ckpt.Seq = pb.handled
	if !pb.newest.IsZero() {
		// Not stored with lastSeqAt as one: Stats may pair a sequence
		// with the time of the batch that follows it, one batch apart.
		c.appliedTimeNanos.Store(pb.newest.UnixNano())
	}
	c.lastSeqAt.Store(pb.handled)
	c.setPending(pb.pending)
	c.m.LastApplied.Set(float64(pb.handled))
	c.skipped.Add(uint64(pb.skipped))
	c.m.Skipped.Add(float64(pb.skipped))
	if !pb.oldest.IsZero() {
		// Every fetched message is stored now; the next batch sets it again.
		c.m.oldestUnstored.CompareAndSwap(pb.oldest.UnixNano(), 0)
	}
	if pb.batch != nil {
		pb.batch.Stored()
	}
	return nil
}

// highestDelivery returns the delivery of ds (never empty) with the highest
// stream sequence: the last one, unless a redelivery of an earlier message
// (at or below the checkpoint) came last. Acking it with AckAll covers the
// whole batch.
func highestDelivery(ds []Delivery) Delivery {
	h := ds[0]
	for _, d := range ds[1:] {
		if d.Seq > h.Seq {
			h = d
		}
	}
	return h
}

// store has the Handler write the batch, then applies it with the
// checkpoint.
func (c *Consumer) store(ctx context.Context, pb *preparedBatch) error {
	// One batch, reused: its mutations array is the size of a full fetch,
	// and growing a new one for every fetch was a quarter of the writer's
	// allocations. Reset drops its references to the message bodies.
	b := &c.storeBatch
	b.Reset()
	defer b.Reset()
	if pb.batch != nil {
		if err := pb.batch.Write(ctx, b); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%w: %w", errAbandoned, err)
			}
			return fmt.Errorf("consumer: cannot prepare the storage batch of sequences %d-%d: %w", pb.from+1, pb.handled, err)
		}
	}
	catalog.PutCheckpoint(b, c.ckpt.Key, pb.handled)
	return c.apply(ctx, b)
}

// apply applies b, retrying with backoff until it succeeds or ctx ends.
func (c *Consumer) apply(ctx context.Context, b *storage.Batch) error {
	c.m.WaitingStorage.Set(1)
	defer c.m.WaitingStorage.Set(0)
	for attempt := 0; ; attempt++ {
		start := time.Now()
		err := c.db.Apply(ctx, b)
		if err == nil {
			c.m.ApplySeconds.Observe(time.Since(start).Seconds())
			c.storageFailing.Store(false)
			return nil
		}
		c.storageFailing.Store(true)
		c.m.ApplyFailures.Inc()
		c.warn.Warn("consumer: cannot apply a batch to storage; retrying the same batch", "attempt", attempt+1, "err", err)
		if !Backoff(ctx, attempt) {
			return fmt.Errorf("%w: storage apply failed and the consumer is stopping: %w", errAbandoned, err)
		}
	}
}

// keepAlive tells JetStream every third of AckWait that the deliveries are
// still being worked on, so a long storage stall or outage does not turn
// into redeliveries. The returned func stops it and waits for a round in
// progress to finish. It is a timer, not a goroutine: it runs for every
// batch, twice, and almost never fires.
func (c *Consumer) keepAlive(ds []Delivery) (stop func()) {
	every := c.cfg.AckWait / 3
	var (
		mu      sync.Mutex // held by a round, and by stop
		stopped bool
		t       *time.Timer
	)
	mu.Lock()
	t = time.AfterFunc(every, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		for _, d := range ds {
			_ = d.Msg.InProgress() // best effort: a redelivery is skipped anyway
		}
		t.Reset(every)
	})
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
	}
}
