package schema

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/storage"
	"github.com/google/uuid"
)

// Names of the built-in tables.
const (
	// EventsTable holds every event: partition "ddmmyyhh|eventtype[|n]"
	// (bucket.PartitionKeyFor), clustering event_id timeuuid DESC, columns
	// data (the event's JSON object, blob), user and author (text, only when
	// the event has them). Cells expire at the event time plus its type's TTL.
	EventsTable = "events"
	// CountsTable holds per-minute counts of events per type: partition
	// "ddmmyyhh|eventtype" (the hour of the minute, never split), clustering
	// minute timestamp ASC, counter column count.
	CountsTable = "event_counts"
	// CheckpointsTable holds, per consumer, the last stream sequence whose
	// effects are in the store: partition the consumer's name, an empty
	// clustering key, column last_seq (bigint). Its cells are written with
	// the sequence itself as their timestamp, so a higher sequence always
	// wins whatever the wall clock does.
	CheckpointsTable = "_checkpoints"
)

// Event column names.
const (
	ColumnData   = "data"
	ColumnUser   = "user"
	ColumnAuthor = "author"
	ColumnCount  = "count"
	ColumnSeq    = "last_seq"
)

// EventsClustering is the clustering layout of EventsTable: newest first.
var EventsClustering = bucket.ClusteringLayout{{Name: "event_id", Type: bucket.TypeTimeUUID, Order: bucket.Desc}}

// CountsClustering is the clustering layout of CountsTable.
var CountsClustering = bucket.ClusteringLayout{{Name: "minute", Type: bucket.TypeTimestamp, Order: bucket.Asc}}

// Event is one stored event.
type Event struct {
	ID   uuid.UUID // version 1; its time is the event time
	Type string
	// User and Author are optional; empty means absent (no cell is written).
	User, Author string
	// Data is the event's JSON object, stored as given.
	Data []byte
}

// Time returns the event time, the time of its id.
func (e *Event) Time() time.Time {
	t, _ := bucket.TimeOf(e.ID)
	return t
}

// EventClusteringKey returns the clustering key of the event with id, as
// EventsClustering encodes it.
func EventClusteringKey(id uuid.UUID) []byte { return eventKey(nil, id) }

// eventKey appends the DESC encoding of id: the complement of
// bucket.EncodeTimeUUID, as EventsClustering.Encode writes it.
func eventKey(dst []byte, id uuid.UUID) []byte {
	start := len(dst)
	dst = bucket.EncodeTimeUUID(dst, id)
	for i := start; i < len(dst); i++ {
		dst[i] = ^dst[i]
	}
	return dst
}

// PutEvent adds the cells of e to b: they expire after ttlSeconds (0: never),
// written at timestampMicros. The partition is
// bucket.PartitionKeyFor(e.ID, e.Type, subPartitions).
func PutEvent(b *storage.Batch, e *Event, subPartitions int, ttlSeconds int32, timestampMicros int64) error {
	pk, err := bucket.PartitionKeyFor(e.ID, e.Type, subPartitions)
	if err != nil {
		return fmt.Errorf("cannot store event %s: %w", e.ID, err)
	}
	partition := []byte(pk.String())
	ck := eventKey(make([]byte, 0, 16), e.ID)
	put := func(column string, t bucket.ColumnType, v any) error {
		value, err := AppendValue(nil, t, v)
		if err != nil {
			return fmt.Errorf("cannot store event %s column %s: %w", e.ID, column, err)
		}
		b.PutTTL(EventsTable, partition, ck, []byte(column), value, timestampMicros, ttlSeconds)
		return nil
	}
	if err := put(ColumnData, bucket.TypeBlob, e.Data); err != nil {
		return err
	}
	if e.User != "" {
		if err := put(ColumnUser, bucket.TypeText, e.User); err != nil {
			return err
		}
	}
	if e.Author != "" {
		if err := put(ColumnAuthor, bucket.TypeText, e.Author); err != nil {
			return err
		}
	}
	return nil
}

// DecodeEvent decodes a row of EventsTable read from partition.
func DecodeEvent(partition []byte, row *storage.Row) (Event, error) {
	pk, err := bucket.ParsePartitionKey(string(partition))
	if err != nil {
		return Event{}, fmt.Errorf("decode event: %w", err)
	}
	e, _, err := DecodeEventOfType(pk.EventType(), row, nil)
	return e, err
}

// DecodeEventOfType decodes a row of EventsTable of a known event type
// (the reader knows it from the partition it sliced). The event's data is
// appended to arena and Data aliases it; the grown arena is returned, so a
// page of events shares a few allocations. Pass nil for a fresh copy.
func DecodeEventOfType(eventType string, row *storage.Row, arena []byte) (Event, []byte, error) {
	if len(row.Clustering) != 16 {
		return Event{}, arena, fmt.Errorf("decode event: %w: clustering key has %d bytes, want 16", bucket.ErrCorruptKey, len(row.Clustering))
	}
	var key [16]byte
	for i, b := range row.Clustering {
		key[i] = ^b // event_id is DESC: stored complemented
	}
	id, _, err := bucket.DecodeTimeUUID(key[:])
	if err != nil {
		return Event{}, arena, fmt.Errorf("decode event: %w", err)
	}
	e := Event{ID: id, Type: eventType}
	for i := range row.Cells {
		c := &row.Cells[i]
		switch string(c.Column) {
		case ColumnData:
			if len(c.Value) == 0 || bucket.ColumnType(c.Value[0]) != bucket.TypeBlob {
				return Event{}, arena, fmt.Errorf("decode event %s column data: %w: not a blob", e.ID, ErrCorruptValue)
			}
			start := len(arena)
			arena = append(arena, c.Value[1:]...)
			e.Data = arena[start:len(arena):len(arena)]
		case ColumnUser, ColumnAuthor:
			v, err := DecodeValue(c.Value)
			s, ok := v.(string)
			if err != nil || !ok {
				return Event{}, arena, fmt.Errorf("decode event %s column %s: %w: not text", e.ID, c.Column, ErrCorruptValue)
			}
			if string(c.Column) == ColumnUser {
				e.User = s
			} else {
				e.Author = s
			}
		}
	}
	return e, arena, nil
}

// CountsPartition returns the CountsTable partition holding minute.
func CountsPartition(eventType string, minute time.Time) ([]byte, error) {
	pk, err := bucket.NewPartitionKey(minute, eventType)
	if err != nil {
		return nil, err
	}
	return []byte(pk.String()), nil
}

// AddCount adds delta to the count of eventType in the minute holding t.
func AddCount(b *storage.Batch, eventType string, t time.Time, delta int64) error {
	minute := t.UTC().Truncate(time.Minute)
	partition, err := CountsPartition(eventType, minute)
	if err != nil {
		return fmt.Errorf("cannot count event: %w", err)
	}
	ck, err := CountsClustering.Encode(nil, minute)
	if err != nil {
		return fmt.Errorf("cannot count event: %w", err)
	}
	b.AddCounter(CountsTable, partition, ck, []byte(ColumnCount), delta)
	return nil
}

// DecodeCount decodes a row of CountsTable.
func DecodeCount(row *storage.Row) (minute time.Time, count int64, err error) {
	vals, err := CountsClustering.Decode(row.Clustering)
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("decode count: %w", err)
	}
	for _, c := range row.Cells {
		if string(c.Column) == ColumnCount {
			count += c.CounterValue
		}
	}
	return vals[0].(time.Time), count, nil
}

// PutCheckpoint records in b that consumer has applied every message up to
// stream sequence seq.
func PutCheckpoint(b *storage.Batch, consumer string, seq uint64) {
	b.Put(CheckpointsTable, []byte(consumer), nil, []byte(ColumnSeq), binary.BigEndian.AppendUint64(nil, seq), int64(seq))
}

// ReadCheckpoint returns the last sequence recorded for consumer, 0 if none.
func ReadCheckpoint(db *storage.DB, consumer string) (uint64, error) {
	it, err := db.Slice(context.Background(), storage.SliceQuery{Table: CheckpointsTable, Partition: []byte(consumer), Limit: 1})
	if err != nil {
		return 0, fmt.Errorf("read checkpoint of %s: %w", consumer, err)
	}
	defer it.Close()
	var seq uint64
	for it.Next() {
		for _, c := range it.Row().Cells {
			if string(c.Column) == ColumnSeq {
				if len(c.Value) != 8 {
					return 0, fmt.Errorf("read checkpoint of %s: %w: value has %d bytes, want 8", consumer, storage.ErrCorruption, len(c.Value))
				}
				seq = binary.BigEndian.Uint64(c.Value)
			}
		}
	}
	if err := it.Err(); err != nil {
		return 0, fmt.Errorf("read checkpoint of %s: %w", consumer, err)
	}
	return seq, nil
}
