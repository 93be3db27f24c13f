package catalog

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/storage"
	"github.com/google/uuid"
)

// PutEvent adds the cells of e to b: they expire after ttlSeconds (0: never),
// written at timestampMicros. The partition is
// bucket.PartitionKeyFor(e.ID, e.Type, subPartitions). A writer adding many
// events uses an EventRowBuilder, which writes the same cells with fewer
// allocations.
func PutEvent(b *storage.Batch, e *schema.Event, subPartitions int, ttlSeconds int32, timestampMicros int64) error {
	r := EventRowBuilder{oneShot: true}
	return r.Put(b, e, subPartitions, ttlSeconds, timestampMicros)
}

// The column names of the events table, as the storage batch takes them;
// never written to.
var (
	columnData   = []byte(schema.ColumnData)
	columnUser   = []byte(schema.ColumnUser)
	columnAuthor = []byte(schema.ColumnAuthor)
)

// eventRowChunk is the size of the chunks EventRowBuilder appends keys and
// values to: a few hundred events of ~200 bytes.
const eventRowChunk = 64 << 10

// maxCachedPartitions bounds EventRowBuilder's partition keys (event types
// times hours times sub-partitions seen); past it they are forgotten.
const maxCachedPartitions = 4096

// EventRowBuilder adds events' cells to storage batches as PutEvent does,
// with few allocations: keys and values are appended to chunks of memory
// shared by many events (a new chunk when one is full; nothing is ever
// written twice, so every slice a batch holds stays as it was), and the
// partition key of each hour and type is made once. A batch holds slices
// of those chunks until it is dropped, which keeps them alive; storage
// copies what it keeps. The zero value is ready; it is not safe for
// concurrent use.
type EventRowBuilder struct {
	// free is the unused end of the current chunk: empty, with its
	// capacity the room left.
	free       []byte
	partitions map[bucket.PartitionKey][]byte
	// oneShot: a builder for one event (PutEvent) allocates what the
	// event needs, and caches no partition key.
	oneShot bool
}

// Put adds the cells of e to b, as PutEvent.
func (r *EventRowBuilder) Put(b *storage.Batch, e *schema.Event, subPartitions int, ttlSeconds int32, timestampMicros int64) error {
	pk, err := bucket.PartitionKeyFor(e.ID, e.Type, subPartitions)
	if err != nil {
		return fmt.Errorf("cannot store event %s: %w", e.ID, err)
	}
	if e.User != "" && !utf8.ValidString(e.User) {
		return fmt.Errorf("cannot store event %s column %s: %w: text value %.48q is not valid UTF-8", e.ID, schema.ColumnUser, schema.ErrInvalidValue, e.User)
	}
	if e.Author != "" && !utf8.ValidString(e.Author) {
		return fmt.Errorf("cannot store event %s column %s: %w: text value %.48q is not valid UTF-8", e.ID, schema.ColumnAuthor, schema.ErrInvalidValue, e.Author)
	}
	// Every key and value of the row, in one piece of a chunk: the
	// clustering key (16 bytes), then each value, its type byte first
	// (schema.AppendValue's encoding of blobs and text).
	// An events key is 16 bytes; were it longer, an append would only move
	// buf to a new array.
	need := 16 + 1 + len(e.Data) + 1 + len(e.User) + 1 + len(e.Author)
	if cap(r.free) < need {
		size := need
		if !r.oneShot {
			size = max(eventRowChunk, need)
		}
		r.free = make([]byte, 0, size)
	}
	buf, err := schema.AppendEventKey(r.free, e.ID)
	if err != nil {
		return fmt.Errorf("cannot store event %s: %w", e.ID, err)
	}
	ck := buf[:len(buf):len(buf)]
	partition := r.partition(pk)
	at := len(buf)
	buf = append(append(buf, byte(bucket.TypeBlob)), e.Data...)
	b.PutTTL(schema.EventsTable, partition, ck, columnData, buf[at:len(buf):len(buf)], timestampMicros, ttlSeconds)
	if e.User != "" {
		at = len(buf)
		buf = append(append(buf, byte(bucket.TypeText)), e.User...)
		b.PutTTL(schema.EventsTable, partition, ck, columnUser, buf[at:len(buf):len(buf)], timestampMicros, ttlSeconds)
	}
	if e.Author != "" {
		at = len(buf)
		buf = append(append(buf, byte(bucket.TypeText)), e.Author...)
		b.PutTTL(schema.EventsTable, partition, ck, columnAuthor, buf[at:len(buf):len(buf)], timestampMicros, ttlSeconds)
	}
	// What follows buf was never handed out. (Had an append outgrown the
	// chunk, buf would be in a new array, and its rest just as unused.)
	r.free = buf[len(buf):len(buf)]
	return nil
}

// partition returns the storage form of pk, made once per key. Equal keys
// (==) have the same storage form.
func (r *EventRowBuilder) partition(pk bucket.PartitionKey) []byte {
	if r.oneShot {
		return []byte(pk.String())
	}
	if p, ok := r.partitions[pk]; ok {
		return p
	}
	if r.partitions == nil || len(r.partitions) >= maxCachedPartitions {
		r.partitions = make(map[bucket.PartitionKey][]byte)
	}
	p := []byte(pk.String())
	r.partitions[pk] = p
	return p
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
			// Text as schema.DecodeValue reads it, without boxing the
			// string in an interface: an allocation per field of every
			// event a query returns.
			if len(c.Value) == 0 || (bucket.ColumnType(c.Value[0]) != bucket.TypeText && bucket.ColumnType(c.Value[0]) != bucket.TypeASCII) {
				return schema.Event{}, arena, fmt.Errorf("decode event %s column %s: %w: not text", e.ID, c.Column, schema.ErrCorruptValue)
			}
			s := string(c.Value[1:])
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
