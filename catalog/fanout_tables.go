package catalog

// The fan-out tables: the follow graph, userlines, timelines and the
// fan-out worker's own durable state. fanout/ writes them, reader/ reads
// them; this file is the one place that knows their bytes.
//
// Conventions shared by every table below (values are in the
// self-describing cell format of bucket/schema/value.go: one type byte,
// then the value):
//
//   - A partition that is a user or author name is the name's UTF-8 bytes.
//   - A name clustering key is the text encoding of bucket.ClusteringLayout
//     (ASC, escaped, so "a" < "ab" < "b").
//   - A post_id clustering key is a version 1 TimeUUID encoded DESC
//     (bucket.ClusteringLayout.AppendTimeUUIDKey): byte order is newest
//     first, as in the events table.
//   - Write timestamps are not wall-clock micros but stream positions
//     (fanout.WriteTimestamp: epoch, stream sequence and a sub-step), so a
//     later message always shadows an earlier one whatever the clock or the
//     fan-out's lag does. None of these tables therefore uses TimeWindow
//     compaction (it windows by write timestamp).
//
// Layouts (partition | clustering | columns):
//
//	followers        author       | follower text ASC          | since bigint
//	following        user         | author text ASC            | since bigint
//	userline         author       | post_id timeuuid DESC      | data blob, job bigint (unless the author was large)
//	timeline         user         | post_id timeuuid DESC      | author text, data blob (time timestamp before 2026-11-24)
//	_fanout_jobs     "jobs"       | job bigint ASC, part int ASC | kind text, author text, post_id timeuuid,
//	                                                             data blob, followers bigint,
//	                                                             shards int, cursor text, chunks bigint
//	_fanout_deleted  author       | post_id timeuuid DESC      | "" (row marker, empty value)
//	_fanout_authors  author       | (empty)                    | followers bigint, large boolean
//	_fanout_large    "large"      | author text ASC            | "" (row marker, empty value)
//
// since is the write timestamp of the follow that created the edge: a
// timeline row written before it (a copy from an earlier follow period) is
// not shown. A userline row's job is the write timestamp of its post
// message, which is also the key of its fan-out job if it has one; it is
// present when the author was not large then (the post may have copies,
// pushed or backfilled, that a delete must remove). A job is split into
// parts (fanout: Shards times up to PartsPerShard); a job row's shards column is
// the part count the job was split with, so a restart with other options
// finishes it as it was split. A timeline row's cells expire at the post
// time plus the timeline TTL; the post time is the post id's time (an
// event's id always carries its time), so a copy no longer stores it: a
// third cell per copy was a quarter of the fan-out's CPU. Older copies
// may still hold a time cell, which readers ignore. A _fanout_deleted row
// expires at the post time plus the timeline TTL, when no copy of the
// post can be live any more.

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/storage"
)

// Names of the fan-out tables.
const (
	FollowersTable     = schema.FollowersTable
	FollowingTable     = schema.FollowingTable
	UserlineTable      = schema.UserlineTable
	TimelineTable      = schema.TimelineTable
	FanoutJobsTable    = "_fanout_jobs"
	FanoutDeletedTable = "_fanout_deleted"
	FanoutAuthorsTable = "_fanout_authors"
	FanoutLargeTable   = "_fanout_large"
)

// Column names of the fan-out tables.
const (
	ColSince     = "since"
	ColData      = "data"
	ColJob       = "job"
	ColAuthor    = "author"
	ColTime      = "time" // timeline copies written before 2026-11-24 only
	ColKind      = "kind"
	ColPostID    = "post_id"
	ColFollowers = "followers"
	ColCursor    = "cursor"
	ColChunks    = "chunks"
	ColShards    = "shards"
	ColLarge     = "large"
)

// Fan-out job kinds (the kind column of _fanout_jobs).
const (
	JobKindPost   = "post"
	JobKindDelete = "delete"
)

var (
	// NameClustering is the clustering layout of followers and following.
	NameClustering = bucket.ClusteringLayout{{Name: "name", Type: bucket.TypeText, Order: bucket.Asc}}
	// PostClustering is the clustering layout of userline, timeline and
	// _fanout_deleted: newest first.
	PostClustering = bucket.ClusteringLayout{{Name: "post_id", Type: bucket.TypeTimeUUID, Order: bucket.Desc}}
	// JobClustering is the clustering layout of _fanout_jobs.
	JobClustering = bucket.ClusteringLayout{{Name: "job", Type: bucket.TypeBigint, Order: bucket.Asc}, {Name: "part", Type: bucket.TypeInt, Order: bucket.Asc}}

	jobsPartition  = []byte("jobs")
	largePartition = []byte("large")
)

// FanoutTableDefs returns the storage definitions of the fan-out tables.
//
// Tombstone purging (docs/ARCHITECTURE.md, "Tombstone purging"): the
// tables written only while a message is prepared, in stream order, at
// that message's WriteTimestamp, purge immediately (no write older than a
// deletion can arrive after it); timeline and _fanout_jobs, which chunks
// write at the timestamp of an earlier message, keep gc_grace.
func FanoutTableDefs() []storage.TableDef {
	immediate := storage.TombstoneGCImmediate
	return []storage.TableDef{
		{Name: FollowersTable, Compaction: storage.SizeTiered, TombstoneGC: immediate},
		{Name: FollowingTable, Compaction: storage.SizeTiered, TombstoneGC: immediate},
		{Name: UserlineTable, Compaction: storage.SizeTiered, TombstoneGC: immediate},
		{Name: TimelineTable, Compaction: storage.SizeTiered},
		{Name: FanoutJobsTable, Compaction: storage.SizeTiered},
		{Name: FanoutDeletedTable, Compaction: storage.SizeTiered, TombstoneGC: immediate},
		{Name: FanoutAuthorsTable, Compaction: storage.SizeTiered, TombstoneGC: immediate},
		{Name: FanoutLargeTable, Compaction: storage.SizeTiered, TombstoneGC: immediate},
	}
}

// EnsureFanoutTables creates the fan-out tables in db if they are missing,
// and gives existing ones the tombstone purge policy of FanoutTableDefs
// (stores made before it existed hold the default). It is idempotent.
func EnsureFanoutTables(db *storage.DB) error {
	for _, def := range FanoutTableDefs() {
		if err := ensureTable(db, def); err != nil {
			return fmt.Errorf("cannot create fan-out table %s: %w", def.Name, err)
		}
	}
	return nil
}

// ensureTable creates def's table if missing; an existing one keeps its
// definition but takes def's tombstone purge policy.
func ensureTable(db *storage.DB, def storage.TableDef) error {
	have, ok := db.Table(def.Name)
	if !ok {
		return db.CreateTable(def)
	}
	want := def.TombstoneGC
	if want == "" {
		want = storage.TombstoneGCTimeout
	}
	if have.TombstoneGC == want {
		return nil
	}
	have.TombstoneGC = want
	return db.CreateTable(have)
}

// NameKey returns the clustering key of a name in followers or following.
func NameKey(name string) []byte {
	k, err := NameClustering.Encode(nil, name)
	if err != nil {
		panic("BUG: text clustering key of a validated name: " + err.Error())
	}
	return k
}

// DecodeNameKey decodes a clustering key of followers or following.
func DecodeNameKey(key []byte) (string, error) {
	v, err := NameClustering.Decode(key)
	if err != nil {
		return "", fmt.Errorf("cannot decode name key: %w", err)
	}
	return v[0].(string), nil
}

// AppendNameFromKey decodes a clustering key of followers or following
// and appends the name's bytes to dst: DecodeNameKey without a string per
// key, for callers that stream many (the fan-out's follower lists).
func AppendNameFromKey(dst, key []byte) ([]byte, error) {
	out, err := NameClustering.AppendTextKey(dst, key)
	if err != nil {
		return dst, fmt.Errorf("cannot decode name key: %w", err)
	}
	return out, nil
}

// PostKey returns the clustering key of a post in userline, timeline or
// _fanout_deleted. id must be a version 1 UUID (checked by the caller).
func PostKey(id uuid.UUID) []byte {
	k, err := PostClustering.AppendTimeUUIDKey(make([]byte, 0, 16), id)
	if err != nil {
		panic("BUG: post key of a UUID that is not a post id: " + err.Error())
	}
	return k
}

// DecodePostKey decodes a post clustering key.
func DecodePostKey(key []byte) (uuid.UUID, error) {
	return PostClustering.DecodeTimeUUIDKey(key)
}

// JobKey returns the clustering key of one part of a fan-out job.
func JobKey(job int64, part int32) []byte {
	k, err := JobClustering.Encode(nil, job, part)
	if err != nil {
		panic("BUG: job key: " + err.Error())
	}
	return k
}

// JobPrefixEnd returns the exclusive end of every part of job.
func JobPrefixEnd(job int64) []byte {
	p, err := JobClustering.EncodePrefix(nil, job)
	if err != nil {
		panic("BUG: job prefix: " + err.Error())
	}
	return bucket.PrefixEnd(p)
}

// JobPrefix returns the start of every part of job.
func JobPrefix(job int64) []byte {
	p, err := JobClustering.EncodePrefix(nil, job)
	if err != nil {
		panic("BUG: job prefix: " + err.Error())
	}
	return p
}

// DecodeJobKey decodes a clustering key of _fanout_jobs.
func DecodeJobKey(key []byte) (job int64, part int32, err error) {
	v, err := JobClustering.Decode(key)
	if err != nil {
		return 0, 0, fmt.Errorf("cannot decode fan-out job key: %w", err)
	}
	return v[0].(int64), v[1].(int32), nil
}

// JobsPartition is the partition of _fanout_jobs.
func JobsPartition() []byte { return jobsPartition }

// LargePartition is the partition of _fanout_large.
func LargePartition() []byte { return largePartition }

// BigintValue returns the stored form of a bigint.
func BigintValue(v int64) []byte {
	b, _ := schema.AppendValue(make([]byte, 0, 9), bucket.TypeBigint, v)
	return b
}

// TextValue returns the stored form of a text value; s must be valid UTF-8.
func TextValue(s string) []byte {
	return append(append(make([]byte, 0, 1+len(s)), byte(bucket.TypeText)), s...)
}

// BlobValue returns the stored form of a blob.
func BlobValue(b []byte) []byte {
	return append(append(make([]byte, 0, 1+len(b)), byte(bucket.TypeBlob)), b...)
}

// TimestampValue returns the stored form of a timestamp.
func TimestampValue(t time.Time) []byte {
	b, _ := schema.AppendValue(make([]byte, 0, 9), bucket.TypeTimestamp, t)
	return b
}

// IntValue returns the stored form of an int.
func IntValue(v int32) []byte {
	b, _ := schema.AppendValue(make([]byte, 0, 5), bucket.TypeInt, v)
	return b
}

// DecodeInt decodes a stored int.
func DecodeInt(stored []byte) (int32, error) {
	v, err := schema.DecodeValue(stored)
	if err != nil {
		return 0, err
	}
	n, ok := v.(int32)
	if !ok {
		return 0, fmt.Errorf("%w: want int, got %T", schema.ErrCorruptValue, v)
	}
	return n, nil
}

// BooleanValue returns the stored form of a boolean.
func BooleanValue(v bool) []byte {
	b, _ := schema.AppendValue(make([]byte, 0, 2), bucket.TypeBoolean, v)
	return b
}

// TimeUUIDValue returns the stored form of a timeuuid.
func TimeUUIDValue(id uuid.UUID) []byte {
	b, err := schema.AppendValue(make([]byte, 0, 17), bucket.TypeTimeUUID, id)
	if err != nil {
		panic("BUG: timeuuid value of a UUID that is not version 1: " + err.Error())
	}
	return b
}

// DecodeBigint decodes a stored bigint.
func DecodeBigint(stored []byte) (int64, error) {
	v, err := schema.DecodeValue(stored)
	if err != nil {
		return 0, err
	}
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("%w: want bigint, got %T", schema.ErrCorruptValue, v)
	}
	return n, nil
}

// DecodeText decodes a stored text value.
func DecodeText(stored []byte) (string, error) {
	v, err := schema.DecodeValue(stored)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%w: want text, got %T", schema.ErrCorruptValue, v)
	}
	return s, nil
}

// DecodeBlob decodes a stored blob, copying it.
func DecodeBlob(stored []byte) ([]byte, error) {
	if len(stored) == 0 || bucket.ColumnType(stored[0]) != bucket.TypeBlob {
		return nil, fmt.Errorf("%w: not a blob", schema.ErrCorruptValue)
	}
	return append([]byte(nil), stored[1:]...), nil
}

// DecodeTimeUUIDValue decodes a stored timeuuid.
func DecodeTimeUUIDValue(stored []byte) (uuid.UUID, error) {
	v, err := schema.DecodeValue(stored)
	if err != nil {
		return uuid.UUID{}, err
	}
	id, ok := v.(uuid.UUID)
	if !ok {
		return uuid.UUID{}, fmt.Errorf("%w: want timeuuid, got %T", schema.ErrCorruptValue, v)
	}
	return id, nil
}

// DecodeBoolean decodes a stored boolean.
func DecodeBoolean(stored []byte) (bool, error) {
	v, err := schema.DecodeValue(stored)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("%w: want boolean, got %T", schema.ErrCorruptValue, v)
	}
	return b, nil
}

// ReadRow reads the one row of partition at clustering key in table; ok
// is false when it has no live cell. Row aliases nothing the caller keeps
// (its slices are copied).
func ReadRow(ctx context.Context, db interface {
	Slice(context.Context, storage.SliceQuery) (storage.Rows, error)
}, table string, partition, key []byte) (row storage.Row, ok bool, err error) {
	it, err := db.Slice(ctx, storage.SliceQuery{Table: table, Partition: partition,
		Start: storage.Bound{Key: key, Inclusive: true}, End: storage.Bound{Key: key, Inclusive: true}, Limit: 1})
	if err != nil {
		return storage.Row{}, false, fmt.Errorf("cannot read %s row: %w", table, err)
	}
	defer it.Close()
	if it.Next() {
		row = CopyRow(it.Row())
		ok = true
	}
	if err := it.Err(); err != nil {
		return storage.Row{}, false, fmt.Errorf("cannot read %s row: %w", table, err)
	}
	return row, ok, nil
}

// CopyRow returns a copy of r that owns its bytes.
func CopyRow(r *storage.Row) storage.Row {
	out := storage.Row{Clustering: append([]byte(nil), r.Clustering...), Cells: make([]storage.Cell, len(r.Cells))}
	for i, c := range r.Cells {
		c.Column = append([]byte(nil), c.Column...)
		c.Value = append([]byte(nil), c.Value...)
		out.Cells[i] = c
	}
	return out
}

// CellOf returns the cell of column name in r.
func CellOf(r *storage.Row, name string) (storage.Cell, bool) {
	for _, c := range r.Cells {
		if string(c.Column) == name {
			return c, true
		}
	}
	return storage.Cell{}, false
}
