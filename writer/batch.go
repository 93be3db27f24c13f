package writer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/storage"
)

// errAbandoned is wrapped by processBatch's error when ctx ended while the
// batch could not be stored yet; nothing of it was acked.
var errAbandoned = errors.New("batch abandoned")

// countKey is one per-minute counter.
type countKey struct {
	eventType string
	minute    time.Time
}

// processBatch handles one fetch's worth of deliveries, in this order:
//
//  1. deliveries at or below the checkpoint are skipped (already stored);
//  2. the rest are validated; rejects are published to the dead-letter
//     stream and their acks awaited;
//  3. one storage batch holds every valid event, the per-minute counts and
//     the checkpoint (the highest sequence handled), applied atomically
//     and durably (retried until it succeeds);
//  4. only then is every delivery acked.
//
// If ctx ends while step 2 or 3 keeps failing, nothing is acked and the
// error wraps errAbandoned: JetStream redelivers, and the checkpoint did
// not move.
func (w *Writer) processBatch(ctx context.Context, ds []delivery) error {
	if len(ds) == 0 {
		return nil
	}
	w.m.batchSize.Observe(float64(len(ds)))
	now := w.cfg.Now()
	handled := w.ckpt.seq // highest sequence stored or dead-lettered once this batch is applied
	var (
		events  []parsedEvent
		letters []*nats.Msg
		reasons []string
		skipped int
	)
	for _, d := range ds {
		if d.seq <= handled {
			skipped++
			continue
		}
		handled = d.seq
		id := msgIdentity{stream: w.cfg.Stream, epoch: w.ckpt.epoch, seq: d.seq}
		ev, rej := w.validator.parse(d.msg.Subject(), d.msg.Data(), id, now)
		if rej != nil {
			letters = append(letters, w.deadLetter(d.msg, d.seq, rej))
			reasons = append(reasons, rej.reason)
			continue
		}
		events = append(events, ev)
	}

	if handled > w.ckpt.seq {
		stop := w.keepAlive(ds)
		err := w.store(ctx, events, letters, handled)
		stop()
		if err != nil {
			return err
		}
	}

	for _, d := range ds {
		// Fire and forget: a lost ack means a redelivery, which the
		// checkpoint turns into a skip.
		if err := d.msg.Ack(); err != nil {
			w.warn.log("writer: cannot ack; the message will be redelivered and skipped", "seq", d.seq, "err", err)
		}
	}

	w.ckpt.seq = handled
	w.lastSeqAt.Store(handled)
	w.m.lastApplied.Set(float64(handled))
	w.ingested.Add(uint64(len(events)))
	w.rejected.Add(uint64(len(letters)))
	w.skipped.Add(uint64(skipped))
	w.m.skipped.Add(float64(skipped))
	for _, ev := range events {
		w.m.ingested.WithLabelValues(w.m.typeLabel(ev.event.Type)).Inc()
	}
	for _, r := range reasons {
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
	var b storage.Batch
	writeMicros := w.db.NowMicros()
	var counts []int64
	countIndex := map[countKey]int{}
	var keys []countKey
	for i := range events {
		ev := &events[i]
		if err := schema.PutEvent(&b, &ev.event, ev.subPartitions, ev.remainingTTLSeconds, writeMicros); err != nil {
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
		if err := schema.AddCount(&b, k.eventType, k.minute, counts[j]); err != nil {
			return fmt.Errorf("BUG: writer: a validated event cannot be counted: %w", err)
		}
	}
	schema.PutCheckpoint(&b, w.ckpt.key, handled)
	return w.apply(ctx, &b)
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
