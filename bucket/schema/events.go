package schema

import (
	"time"

	"github.com/eventide/eventide/bucket"
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
	// EventTypesTable holds the history of the event type settings
	// (EventTypes): partition "versions", clustering first_hour bigint ASC
	// (the unix second of the first hour bucket a version applies to, or
	// the smallest int64 for "every hour before the next version"), column
	// settings (text) holding the version as EventTypes.String writes it.
	// Written by catalog.RecordEventTypes only; never expires.
	EventTypesTable = "_event_types"
	// TypeHoursTable is the type index: which event types have events in
	// each hour bucket, and how many. Partition the hour bucket
	// "ddmmyyhh" (UTC), clustering type text ASC, counter column count.
	// Written with CountsTable (catalog.AddCount adds to both in the same
	// batch, so it is exactly as exact), never expires. Queries that need
	// the types of an hour (an event by id without its type, the top types
	// of a window) read it instead of guessing partitions.
	TypeHoursTable = "_type_hours"
)

// BuiltinTables lists the names of the built-in tables; user tables
// cannot take them. The catalog package creates them in a store.
var BuiltinTables = []string{EventsTable, CountsTable, CheckpointsTable, EventTypesTable, TypeHoursTable}

// The fan-out's public tables (catalog/fanout_tables.go defines them with
// its internal ones, whose names start with "_" and so are never a user
// table's). User tables may not take these names either: a user table of
// the same name would share the storage table.
const (
	FollowersTable = "followers"
	FollowingTable = "following"
	UserlineTable  = "userline"
	TimelineTable  = "timeline"
)

// FanoutTables lists the fan-out's public table names.
var FanoutTables = []string{FollowersTable, FollowingTable, UserlineTable, TimelineTable}

// Event column names.
const (
	ColumnData   = "data"
	ColumnUser   = "user"
	ColumnAuthor = "author"
	ColumnCount  = "count"
	ColumnSeq    = "last_seq"
	// ColumnSettings is the settings column of EventTypesTable.
	ColumnSettings = "settings"
)

// EventsClustering is the clustering layout of EventsTable: newest first.
var EventsClustering = bucket.ClusteringLayout{{Name: "event_id", Type: bucket.TypeTimeUUID, Order: bucket.Desc}}

// EventTypesClustering is the clustering layout of EventTypesTable.
var EventTypesClustering = bucket.ClusteringLayout{{Name: "first_hour", Type: bucket.TypeBigint, Order: bucket.Asc}}

// TypeHoursClustering is the clustering layout of TypeHoursTable.
var TypeHoursClustering = bucket.ClusteringLayout{{Name: "type", Type: bucket.TypeText, Order: bucket.Asc}}

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
// AppendEventKey writes it. id must be a version 1 UUID (MinTimeUUID
// bounds and page tokens are checked before they get here); anything else
// is a bug.
func EventClusteringKey(id uuid.UUID) []byte {
	key, err := AppendEventKey(make([]byte, 0, 16), id)
	if err != nil {
		panic("BUG: event key of a UUID that is not an event id: " + err.Error())
	}
	return key
}

// AppendEventKey appends the clustering key of the event with id to dst:
// EventsClustering's encoding, the one place that knows event keys are
// stored newest first. It fails, leaving dst unchanged, when id is not a
// version 1 UUID.
func AppendEventKey(dst []byte, id uuid.UUID) ([]byte, error) {
	return EventsClustering.AppendTimeUUIDKey(dst, id)
}

// DecodeEventKey decodes a clustering key of EventsTable into the event id.
// Anything but what AppendEventKey writes is an error wrapping
// bucket.ErrCorruptKey.
func DecodeEventKey(key []byte) (uuid.UUID, error) {
	return EventsClustering.DecodeTimeUUIDKey(key)
}

// TypeHoursPartition returns the TypeHoursTable partition of the hour
// bucket holding t: its "ddmmyyhh".
func TypeHoursPartition(t time.Time) []byte {
	return bucket.HourOf(t).AppendFormat(make([]byte, 0, 8), "02010615")
}

// CountsPartition returns the CountsTable partition holding minute.
func CountsPartition(eventType string, minute time.Time) ([]byte, error) {
	pk, err := bucket.NewPartitionKey(minute, eventType)
	if err != nil {
		return nil, err
	}
	return []byte(pk.String()), nil
}
