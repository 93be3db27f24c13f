package writer

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
	"github.com/eventide/eventide/writer/consumer"
)

// The writer is the consumer.Handler of its loop: Prepare validates a
// fetch's messages into events and dead letters; Write publishes the dead
// letters, waits for their acks, and adds the events and their per-minute
// counts to the storage batch the loop applies with the checkpoint.

// minuteCount is one per-minute counter of a batch: the minute as Unix
// seconds / 60 (event times are from the year 2000 on, so the division
// floors), a cheaper map key than a time.Time.
type minuteCount struct {
	eventType  string
	unixMinute int64
}

// eventBatch is one fetch's worth of messages, validated.
type eventBatch struct {
	w      *Writer
	events []parsedEvent
	// stored is how many of events Write put in the batch: those of the
	// partitions the writer owns.
	stored  int
	letters []*nats.Msg
	reasons []string
}

// Prepare validates deliveries into events and dead letters.
func (w *Writer) Prepare(ds []consumer.Delivery, epoch uint64) consumer.Batch {
	now := w.cfg.Now()
	eb := &eventBatch{w: w, events: make([]parsedEvent, 0, len(ds))}
	for _, d := range ds {
		id := msgIdentity{stream: w.cfg.Stream, epoch: epoch, seq: d.Seq}
		ev, rej := w.validator.parse(d.Msg.Subject(), d.Msg.Data(), id, now)
		if rej != nil {
			w.logRejection(d, rej)
			eb.letters = append(eb.letters, w.deadLetter(d.Msg, epoch, d.Seq, rej))
			eb.reasons = append(eb.reasons, rej.reason)
			continue
		}
		ev.seq = d.Seq
		eb.events = append(eb.events, ev)
	}
	return eb
}

// logRejection logs a rejection: each one at debug, and when debug is off
// at most one per rejectLogInterval at info (with the count held back),
// so that a producer sending garbage cannot flood the log.
func (w *Writer) logRejection(d consumer.Delivery, rej *rejection) {
	args := []any{"seq", d.Seq, "subject", d.Msg.Subject(), "reason", rej.reason, "error", rej.message}
	if w.log.Enabled(context.Background(), slog.LevelDebug) {
		w.log.Debug("writer: message rejected to the dead-letter stream", args...)
		return
	}
	w.rejectLog.Log(slog.LevelInfo, "writer: message rejected to the dead-letter stream (at most one line per "+
		rejectLogInterval.String()+" at info; every one at debug)", args...)
}

// Write dead-letters the rejects (returning only once the dead-letter
// stream acked every one, or ctx ended), then adds the events and their
// counts to b.
func (eb *eventBatch) Write(ctx context.Context, b *storage.Batch) error {
	w := eb.w
	if len(eb.letters) > 0 && !w.cfg.NoDeadLetters {
		if err := w.publishDeadLetters(ctx, eb.letters); err != nil {
			return err
		}
	}
	writeMicros := w.db.NowMicros()
	var counts []int64
	countIndex := map[minuteCount]int{}
	var keys []minuteCount
	stores := w.cfg.StoresPartition
	eb.stored = 0
	for i := range eb.events {
		ev := &eb.events[i]
		if err := w.rows.Put(b, &ev.event, ev.subPartitions, ev.remainingTTLSeconds, writeMicros); err != nil {
			return fmt.Errorf("BUG: writer: a validated event does not store: %w", err)
		}
		ev.storedHere = stores == nil || stores(schema.EventsTable, eventPartition(ev))
		if ev.storedHere {
			eb.stored++
		}
		k := minuteCount{ev.event.Type, ev.event.Time().Unix() / 60}
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
		if err := catalog.AddCount(b, k.eventType, time.Unix(k.unixMinute*60, 0), counts[j]); err != nil {
			return fmt.Errorf("BUG: writer: a validated event cannot be counted: %w", err)
		}
	}
	if stores != nil {
		// Every event is counted before the filter, whichever node stores
		// it: its count's partition may be this node's when its own is not.
		b.Filter(stores)
	}
	return nil
}

// eventPartition is the storage partition of ev, as catalog.PutEvent
// computes it.
func eventPartition(ev *parsedEvent) []byte {
	pk, err := bucket.PartitionKeyFor(ev.event.ID, ev.event.Type, ev.subPartitions)
	if err != nil {
		// Validation checked the type and sub-partitions.
		panic(fmt.Sprintf("BUG: writer: a validated event has no partition: %v", err))
	}
	return []byte(pk.String())
}

// Stored counts the batch once it is stored and acked.
func (eb *eventBatch) Stored() {
	w := eb.w
	w.ingested.Add(uint64(eb.stored))
	w.rejected.Add(uint64(len(eb.letters)))
	if w.storedPerType == nil {
		w.storedPerType = map[string]int{}
	}
	perType := w.storedPerType
	for i := range eb.events {
		if eb.events[i].storedHere {
			perType[eb.events[i].event.Type]++
		}
	}
	for typ, n := range perType {
		w.m.ingestedOf(typ).Add(float64(n))
	}
	clear(perType)
	for _, r := range eb.reasons {
		w.m.rejected.WithLabelValues(r).Inc()
	}
	if w.cfg.OnStored != nil && len(eb.events) > 0 {
		// Stored runs on the one committing goroutine: the buffer is
		// reused from batch to batch.
		// A sharded writer reports only the events it stored: a live tail
		// shows what its node holds, and the query service merging the
		// nodes' tails gets each event once.
		buf := w.storedBuf[:0]
		for i := range eb.events {
			if eb.events[i].storedHere {
				buf = append(buf, StoredEvent{Seq: eb.events[i].seq, Event: eb.events[i].event})
			}
		}
		if len(buf) > 0 {
			w.cfg.OnStored(buf)
		}
		clear(buf) // drop the references to the message bodies
		w.storedBuf = buf[:0]
	}
}

// StoredEvent is one event of a stored batch, as Config.OnStored gets it.
type StoredEvent struct {
	// Seq is the stream sequence of the message that carried the event:
	// the live tail's resume position.
	Seq   uint64
	Event schema.Event
}
