package catalog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/storage"
)

// The history of event type settings, in schema.EventTypesTable: one row
// per version, keyed by the first hour bucket it applies to, holding the
// version as schema.EventTypes.String writes it, in the cell value format.
// The oldest version's key is everyHour: it applies to every hour before
// the next one (the data a store held before it recorded a history was
// written with the settings it first recorded).

// eventTypesPartition is the one partition of schema.EventTypesTable.
var eventTypesPartition = []byte("versions")

// everyHour is the first_hour of a version with no start.
const everyHour = math.MinInt64

// ErrEventTypesNotRecorded is returned by CheckEventTypes when a store
// holds a settings history and the settings given are not that history.
var ErrEventTypesNotRecorded = errors.New("event type settings are not the store's recorded history")

// CheckEventTypes returns an error wrapping ErrEventTypesNotRecorded when
// db holds a settings history and types is not exactly it (every version
// and its first hour): events stored with other settings would land where
// readers of the recorded history do not look. A store with no history
// accepts any settings.
func CheckEventTypes(db *storage.DB, types *schema.EventTypes) error {
	recorded, err := LoadEventTypes(db)
	if err != nil || recorded == nil {
		return err
	}
	if types == nil {
		types = &schema.EventTypes{}
	}
	for r, g := recorded, types; r != nil || g != nil; r, g = r.Previous, g.Previous {
		if r == nil || g == nil || r.String() != g.String() || !r.Since.Equal(g.Since) {
			return fmt.Errorf("%w: the store has %s, given %s; pass what catalog.RecordEventTypes returns",
				ErrEventTypesNotRecorded, describeHistory(recorded), describeHistory(types))
		}
	}
	return nil
}

func describeHistory(v *schema.EventTypes) string {
	var parts []string
	for ; v != nil; v = v.Previous {
		since := "every hour"
		if !v.Since.IsZero() {
			since = "from " + v.Since.Format(time.RFC3339)
		}
		parts = append(parts, fmt.Sprintf("%q %s", v.String(), since))
	}
	return strings.Join(parts, ", after ")
}

// LoadEventTypes returns the settings history recorded in db: the newest
// version, with the older ones chained through Previous; nil when none is
// recorded. Every version's AllowOnlyListed is false: it is not recorded.
func LoadEventTypes(db *storage.DB) (*schema.EventTypes, error) {
	if _, ok := db.Table(schema.EventTypesTable); !ok {
		return nil, nil
	}
	return LoadEventTypesFrom(context.Background(), db.Slice)
}

// LoadEventTypesFrom is LoadEventTypes through slice: (*storage.DB).Slice,
// or a remote store's (cmd/query reads the history a storage node
// recorded). The table must exist.
func LoadEventTypesFrom(ctx context.Context, slice func(context.Context, storage.SliceQuery) (storage.Rows, error)) (*schema.EventTypes, error) {
	it, err := slice(ctx, storage.SliceQuery{Table: schema.EventTypesTable, Partition: eventTypesPartition})
	if err != nil {
		return nil, fmt.Errorf("cannot load event type settings: %w", err)
	}
	defer it.Close()
	var head *schema.EventTypes
	for it.Next() {
		row := it.Row()
		var value []byte
		for _, c := range row.Cells {
			if string(c.Column) == schema.ColumnSettings {
				value = c.Value
			}
		}
		v, err := decodeEventTypesVersion(row.Clustering, value)
		if err != nil {
			return nil, fmt.Errorf("cannot load event type settings: %w", err)
		}
		v.Previous = head
		head = v
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("cannot load event type settings: %w", err)
	}
	return head, nil
}

// RecordEventTypes makes current the event type settings of db and
// returns the history the writer and the reader must both be given
// (writer.Config.Types, reader.Options.Types): current, with Since and
// Previous set; recorded says whether a version was written.
//
// When current differs from the newest recorded version, it is recorded as
// a new version from the first hour bucket no event can have been stored
// in under the old settings: the hour after the one holding now + maxSkew
// (the writer refuses event times further ahead than its max skew), or the
// pending version's hour when one has not begun yet, which current then
// replaces. Late events of earlier hours keep being written, and those
// hours read, with the settings of their hour. The first version recorded
// in a store applies to every hour. Recording the same settings again adds
// nothing. This assumes the previous process's clock was not ahead of now
// and its max skew not larger.
func RecordEventTypes(db *storage.DB, current *schema.EventTypes, now time.Time, maxSkew time.Duration) (history *schema.EventTypes, recorded bool, err error) {
	if current == nil {
		current = &schema.EventTypes{}
	}
	if err := EnsureBuiltinTables(db); err != nil {
		return nil, false, err
	}
	head, err := LoadEventTypes(db)
	if err != nil {
		return nil, false, err
	}
	out := *current
	out.Since, out.Previous = time.Time{}, nil
	if head != nil && head.String() == current.String() {
		out.Since, out.Previous = head.Since, head.Previous
		return &out, false, nil
	}
	if head != nil {
		out.Since = bucket.HourOf(now.Add(max(maxSkew, 0))).Add(time.Hour)
		out.Previous = head
		if !out.Since.After(head.Since) {
			// head has not begun: no event was stored under it.
			out.Since, out.Previous = head.Since, head.Previous
		}
	}
	key, value, err := encodeEventTypesVersion(&out)
	if err != nil {
		return nil, false, err
	}
	var b storage.Batch
	b.Put(schema.EventTypesTable, eventTypesPartition, key, []byte(schema.ColumnSettings), value, db.NowMicros())
	if err := db.Apply(context.Background(), &b); err != nil {
		return nil, false, fmt.Errorf("cannot record event type settings %q: %w", out.String(), err)
	}
	return &out, true, nil
}

// encodeEventTypesVersion returns the clustering key and the settings
// value of version v.
func encodeEventTypesVersion(v *schema.EventTypes) (key, value []byte, err error) {
	first := int64(everyHour)
	if !v.Since.IsZero() {
		first = v.Since.Unix()
	}
	key, err = schema.EventTypesClustering.Encode(nil, first)
	if err != nil {
		return nil, nil, fmt.Errorf("BUG: cannot encode event type settings key %d: %w", first, err)
	}
	value, err = schema.AppendValue(nil, bucket.TypeText, v.String())
	if err != nil {
		return nil, nil, fmt.Errorf("cannot encode event type settings %q: %w", v.String(), err)
	}
	return key, value, nil
}

// decodeEventTypesVersion decodes one row of the history: its clustering
// key and settings value. Anything but what encodeEventTypesVersion
// writes is an error wrapping storage.ErrCorruption.
func decodeEventTypesVersion(key, value []byte) (*schema.EventTypes, error) {
	vals, err := schema.EventTypesClustering.Decode(key)
	if err != nil {
		return nil, fmt.Errorf("%w: event type settings key %x: %w", storage.ErrCorruption, key, err)
	}
	first := vals[0].(int64)
	var since time.Time
	if first != everyHour {
		since = time.Unix(first, 0).UTC()
		if first%3600 != 0 || since.Year() > 9999 {
			return nil, fmt.Errorf("%w: event type settings key %d is not the unix second of an hour", storage.ErrCorruption, first)
		}
	}
	if value == nil {
		return nil, fmt.Errorf("%w: event type settings from %d have no %s cell", storage.ErrCorruption, first, schema.ColumnSettings)
	}
	stored, typ, err := schema.DecodeTypedValue(value)
	if err != nil || typ != bucket.TypeText {
		return nil, fmt.Errorf("%w: event type settings from %d: value is not text (%v)", storage.ErrCorruption, first, err)
	}
	v, err := schema.ParseEventTypes(stored.(string))
	if err != nil {
		return nil, fmt.Errorf("%w: event type settings from %d: %w", storage.ErrCorruption, first, err)
	}
	v.Since = since
	return v, nil
}
