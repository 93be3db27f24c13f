package writer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

// errAbandoned is wrapped by commit's error when ctx ended while the
// batch could not be stored yet; nothing of it was acked.
var errAbandoned = errors.New("batch abandoned")

// countKey is one per-minute counter.
type countKey struct {
	eventType string
	minute    time.Time
}

// preparedBatch is one fetch's worth of deliveries, validated and ready to
// be stored: the first half of handling a batch, done by Run's goroutine
// while the previous batch is still being stored.
type preparedBatch struct {
	ds      []delivery
	events  []parsedEvent
	letters []*nats.Msg
	reasons []string
	skipped int
	// from is the checkpoint before this batch, handled the checkpoint
	// once it is stored: the highest sequence stored or dead-lettered.
	from, handled uint64
}

// prepare validates one fetch's worth of deliveries that follow a
// checkpoint at from (the batch before it may not be stored yet):
// deliveries at or below from are skipped (already stored), the rest are
// parsed into events or dead letters.
func (w *Writer) prepare(ds []delivery, from uint64) *preparedBatch {
	w.m.batchSize.Observe(float64(len(ds)))
	now := w.cfg.Now()
	pb := &preparedBatch{ds: ds, from: from, handled: from}
	for _, d := range ds {
		if d.seq <= pb.handled {
			pb.skipped++
			continue
		}
		pb.handled = d.seq
		id := msgIdentity{stream: w.cfg.Stream, epoch: w.ckpt.epoch, seq: d.seq}
		ev, rej := w.validator.parse(d.msg.Subject(), d.msg.Data(), id, now)
		if rej != nil {
			pb.letters = append(pb.letters, w.deadLetter(d.msg, d.seq, rej))
			pb.reasons = append(pb.reasons, rej.reason)
			continue
		}
		pb.events = append(pb.events, ev)
	}
	return pb
}

// commit finishes a prepared batch, in this order:
//
//  1. rejects are published to the dead-letter stream and their acks
//     awaited;
//  2. one storage batch holds every valid event, the per-minute counts and
//     the checkpoint, applied atomically and durably (retried until it
//     succeeds);
//  3. only then is every delivery acked, and the checkpoint moved.
//
// pb.from must be the stored checkpoint: commits happen one at a time, in
// fetch order. If ctx ends while step 1 or 2 keeps failing, nothing is
// acked and the error wraps errAbandoned: JetStream redelivers, and the
// checkpoint did not move.
func (w *Writer) commit(ctx context.Context, pb *preparedBatch) error {
	if pb.from != w.ckpt.seq {
		return fmt.Errorf("BUG: writer: batch prepared after checkpoint %d committed at checkpoint %d", pb.from, w.ckpt.seq)
	}
	if pb.handled > pb.from {
		stop := w.keepAlive(pb.ds)
		err := w.store(ctx, pb.events, pb.letters, pb.handled)
		stop()
		if err != nil {
			return err
		}
	}

	for _, d := range pb.ds {
		// Fire and forget: a lost ack means a redelivery, which the
		// checkpoint turns into a skip.
		if err := d.msg.Ack(); err != nil {
			w.warn.log("writer: cannot ack; the message will be redelivered and skipped", "seq", d.seq, "err", err)
		}
	}

	w.ckpt.seq = pb.handled
	w.lastSeqAt.Store(pb.handled)
	w.m.lastApplied.Set(float64(pb.handled))
	w.ingested.Add(uint64(len(pb.events)))
	w.rejected.Add(uint64(len(pb.letters)))
	w.skipped.Add(uint64(pb.skipped))
	w.m.skipped.Add(float64(pb.skipped))
	perType := map[string]int{}
	for i := range pb.events {
		perType[pb.events[i].event.Type]++
	}
	for typ, n := range perType {
		w.m.ingested.WithLabelValues(w.m.typeLabel(typ)).Add(float64(n))
	}
	for _, r := range pb.reasons {
		w.m.rejected.WithLabelValues(r).Inc()
	}
	return nil
}

// store dead-letters the rejects, then applies the events, their counts
// and the checkpoint as one batch.
func (w *Writer) store(ctx context.Context, events []parsedEvent, letters []*nats.Msg, handled uint64) error {
	if len(letters) > 0 {
		if err := w.publishDeadLetters(ctx, letters); err != nil {
			return fmt.Errorf("%w: %w", errAbandoned, err)
		}
	}
	// One batch, reused: its mutations array is the size of a full fetch,
	// and growing a new one for every fetch was a quarter of the writer's
	// allocations. Reset drops its references to the message bodies.
	b := &w.storeBatch
	b.Reset()
	defer b.Reset()
	writeMicros := w.db.NowMicros()
	var counts []int64
	countIndex := map[countKey]int{}
	var keys []countKey
	for i := range events {
		ev := &events[i]
		if err := catalog.PutEvent(b, &ev.event, ev.subPartitions, ev.remainingTTLSeconds, writeMicros); err != nil {
			return fmt.Errorf("BUG: writer: a validated event does not store: %w", err)
		}
		k := countKey{ev.event.Type, ev.event.Time().Truncate(time.Minute)}
		j, ok := countIndex[k]
		if !ok {
			j = len(counts)
			countIndex[k] = j
			keys = append(keys, k)
			counts = append(counts, 0)
		}
		counts[j]++
	}
	for j, k := range keys {
		if err := catalog.AddCount(b, k.eventType, k.minute, counts[j]); err != nil {
			return fmt.Errorf("BUG: writer: a validated event cannot be counted: %w", err)
		}
	}
	catalog.PutCheckpoint(b, w.ckpt.key, handled)
	return w.apply(ctx, b)
}

// apply applies b, retrying with backoff until it succeeds or ctx ends.
func (w *Writer) apply(ctx context.Context, b *storage.Batch) error {
	w.m.waitingStorage.Set(1)
	defer w.m.waitingStorage.Set(0)
	for attempt := 0; ; attempt++ {
		start := time.Now()
		err := w.db.Apply(b)
		if err == nil {
			w.m.applySeconds.Observe(time.Since(start).Seconds())
			w.storageFailing.Store(false)
			return nil
		}
		w.storageFailing.Store(true)
		w.m.applyFailures.Inc()
		w.warn.log("writer: cannot apply a batch to storage; retrying the same batch", "attempt", attempt+1, "err", err)
		if !sleepBackoff(ctx, attempt) {
			return fmt.Errorf("%w: storage apply failed and the writer is stopping: %w", errAbandoned, err)
		}
	}
}

// keepAlive tells JetStream every third of AckWait that the deliveries are still
// being worked on, so a long storage stall or outage does not turn into
// redeliveries. The returned func stops it and waits for it to finish.
func (w *Writer) keepAlive(ds []delivery) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(w.ackWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				for _, d := range ds {
					_ = d.msg.InProgress() // best effort: a redelivery is skipped anyway
				}
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}
