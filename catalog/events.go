package catalog

import (
	"fmt"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/storage"
	"github.com/google/uuid"
)

// PutEvent adds the cells of e to b: they expire after ttlSeconds (0: never),
// written at timestampMicros. The partition is
// bucket.PartitionKeyFor(e.ID, e.Type, subPartitions).
func PutEvent(b *storage.Batch, e *schema.Event, subPartitions int, ttlSeconds int32, timestampMicros int64) error {
	pk, err := bucket.PartitionKeyFor(e.ID, e.Type, subPartitions)
	if err != nil {
		return fmt.Errorf("cannot store event %s: %w", e.ID, err)
	}
	partition := []byte(pk.String())
	ck, err := schema.AppendEventKey(make([]byte, 0, 16), e.ID)
	if err != nil {
		return fmt.Errorf("cannot store event %s: %w", e.ID, err)
	}
	put := func(column string, t bucket.ColumnType, v any) error {
		value, err := schema.AppendValue(nil, t, v)
		if err != nil {
			return fmt.Errorf("cannot store event %s column %s: %w", e.ID, column, err)
		}
		b.PutTTL(schema.EventsTable, partition, ck, []byte(column), value, timestampMicros, ttlSeconds)
		return nil
	}
	if err := put(schema.ColumnData, bucket.TypeBlob, e.Data); err != nil {
		return err
	}
	if e.User != "" {
		if err := put(schema.ColumnUser, bucket.TypeText, e.User); err != nil {
			return err
		}
	}
	if e.Author != "" {
		if err := put(schema.ColumnAuthor, bucket.TypeText, e.Author); err != nil {
			return err
		}
	}
	return nil
}

// DecodeEvent decodes a row of schema.EventsTable read from partition.
func DecodeEvent(partition []byte, row *storage.Row) (schema.Event, error) {
	pk, err := bucket.ParsePartitionKey(string(partition))
	if err != nil {
		return schema.Event{}, fmt.Errorf("decode event: %w", err)
	}
	e, _, err := DecodeEventOfType(pk.EventType(), row, nil)
	return e, err
}

// DecodeEventOfType decodes a row of schema.EventsTable of a known event type
// (the reader knows it from the partition it sliced). The event's data is
// appended to arena and Data aliases it; the grown arena is returned, so a
// page of events shares a few allocations. Pass nil for a fresh copy.
func DecodeEventOfType(eventType string, row *storage.Row, arena []byte) (schema.Event, []byte, error) {
	id, err := schema.DecodeEventKey(row.Clustering)
	if err != nil {
		return schema.Event{}, arena, fmt.Errorf("decode event: %w", err)
	}
	e := schema.Event{ID: id, Type: eventType}
	for i := range row.Cells {
		c := &row.Cells[i]
		switch string(c.Column) {
		case schema.ColumnData:
			if len(c.Value) == 0 || bucket.ColumnType(c.Value[0]) != bucket.TypeBlob {
				return schema.Event{}, arena, fmt.Errorf("decode event %s column data: %w: not a blob", e.ID, schema.ErrCorruptValue)
			}
			start := len(arena)
			arena = append(arena, c.Value[1:]...)
			e.Data = arena[start:len(arena):len(arena)]
		case schema.ColumnUser, schema.ColumnAuthor:
			v, err := schema.DecodeValue(c.Value)
			s, ok := v.(string)
			if err != nil || !ok {
				return schema.Event{}, arena, fmt.Errorf("decode event %s column %s: %w: not text", e.ID, c.Column, schema.ErrCorruptValue)
			}
			if string(c.Column) == schema.ColumnUser {
				e.User = s
			} else {
				e.Author = s
			}
		}
	}
	return e, arena, nil
}

// AddCount adds delta to the count of eventType in the minute holding t,
// and to its count in the hour in the type index (schema.TypeHoursTable),
// in the same batch.
func AddCount(b *storage.Batch, eventType string, t time.Time, delta int64) error {
	minute := t.UTC().Truncate(time.Minute)
	partition, err := schema.CountsPartition(eventType, minute)
	if err != nil {
		return fmt.Errorf("cannot count event: %w", err)
	}
	ck, err := schema.CountsClustering.Encode(nil, minute)
	if err != nil {
		return fmt.Errorf("cannot count event: %w", err)
	}
	tk, err := schema.TypeHoursClustering.Encode(nil, eventType)
	if err != nil {
		return fmt.Errorf("cannot count event: %w", err)
	}
	b.AddCounter(schema.CountsTable, partition, ck, []byte(schema.ColumnCount), delta)
	b.AddCounter(schema.TypeHoursTable, schema.TypeHoursPartition(minute), tk, []byte(schema.ColumnCount), delta)
	return nil
}

// DecodeTypeHour decodes a row of schema.TypeHoursTable: an event type
// and its number of events in the partition's hour.
func DecodeTypeHour(row *storage.Row) (eventType string, count int64, err error) {
	vals, err := schema.TypeHoursClustering.Decode(row.Clustering)
	if err != nil {
		return "", 0, fmt.Errorf("decode type index row: %w", err)
	}
	for _, c := range row.Cells {
		if string(c.Column) == schema.ColumnCount {
			count += c.CounterValue
		}
	}
	return vals[0].(string), count, nil
}

// DecodeCount decodes a row of schema.CountsTable.
func DecodeCount(row *storage.Row) (minute time.Time, count int64, err error) {
	vals, err := schema.CountsClustering.Decode(row.Clustering)
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("decode count: %w", err)
	}
	for _, c := range row.Cells {
		if string(c.Column) == schema.ColumnCount {
			count += c.CounterValue
		}
	}
	return vals[0].(time.Time), count, nil
}

// EventKeyRange returns the storage slice of schema.EventsTable over the
// event ids from oldest to newest (each bound inclusive or not), walked
// oldest first when ascending: its bounds in storage (byte) order and
// whether the storage walk is reverse. Together with
// schema.EventsClustering it is the one place that maps event time order
// onto key order (event_id is DESC: newest first in storage). The ids must
// be version 1 UUIDs.
func EventKeyRange(oldest uuid.UUID, oldestInclusive bool, newest uuid.UUID, newestInclusive bool, ascending bool) (start, end storage.Bound, reverse bool) {
	lo := storage.Bound{Key: schema.EventClusteringKey(oldest), Inclusive: oldestInclusive}
	hi := storage.Bound{Key: schema.EventClusteringKey(newest), Inclusive: newestInclusive}
	if schema.EventsClustering[0].Order == bucket.Desc {
		return hi, lo, ascending
	}
	return lo, hi, !ascending
}
