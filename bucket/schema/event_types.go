package schema

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/eventide/eventide/bucket"
)

// DefaultEventTTL is how long events live when their type sets no TTL.
const DefaultEventTTL = 7 * 24 * time.Hour

// TypeSettings are the per-event-type settings the writer and the reader
// share: they must agree, or reads would miss sub-partitions or clamp to
// the wrong TTL.
type TypeSettings struct {
	// TTL is how long an event lives after its event time; 0 means the
	// default. It is rounded up to whole seconds.
	TTL time.Duration
	// SubPartitions splits a hot type over this many partitions per hour
	// (0 or 1: not split).
	SubPartitions int
}

// EventTypes holds the settings of every event type: the settings of one
// version, and through Previous the versions before it.
//
// Settings apply per UTC hour bucket, by the hour of the event time, never
// by when an event arrives: every hour is written and read with one
// sub-partition count and one TTL, whatever the settings are today. A
// changed setting therefore needs a history, which the catalog package
// persists in the store (catalog.RecordEventTypes) and hands to the writer
// and the reader as one *EventTypes whose Since and Previous are set. A
// value from ParseEventTypes has no history: it applies to every hour.
type EventTypes struct {
	// Default applies to types not listed in Types.
	Default TypeSettings
	// Types lists types with their own settings.
	Types map[string]TypeSettings
	// AllowOnlyListed rejects events whose type is not in Types. It is a
	// rule for accepting events, not a layout, so only the newest version's
	// counts.
	AllowOnlyListed bool

	// Since is the first hour bucket (UTC, whole hour) these settings apply
	// to; the zero time means every hour up to the next version.
	Since time.Time
	// Previous is the version in effect before Since, nil if none.
	Previous *EventTypes
}

// At returns the version in effect for the hour bucket holding t.
func (c *EventTypes) At(t time.Time) *EventTypes {
	if c == nil {
		return nil
	}
	hour := bucket.HourOf(t)
	v := c
	for v.Previous != nil && hour.Before(v.Since) {
		v = v.Previous
	}
	return v
}

// SettingsAt returns the settings of eventType for the hour bucket holding
// t: the writer stores an event, and the reader reads an hour, with them.
func (c *EventTypes) SettingsAt(eventType string, t time.Time) TypeSettings {
	return c.At(t).Settings(eventType)
}

// TTLSecondsAt returns the TTL of eventType for the hour bucket holding t,
// in whole seconds, rounded up.
func (c *EventTypes) TTLSecondsAt(eventType string, t time.Time) int64 {
	return c.At(t).TTLSeconds(eventType)
}

// LiveFrom returns the earliest event time of eventType that may still be
// live at now: the TTL clamp of a query. Each version's hours are live for
// that version's TTL, so the bound is the earliest over the versions of
// max(version start, now - its TTL), counting only versions with an hour
// still live. A TTL change thus never hides data written under a longer
// TTL before it: older hours are clamped by the TTL they were written
// with.
func (c *EventTypes) LiveFrom(eventType string, now time.Time) time.Time {
	var from time.Time
	found := false
	var until time.Time // Since of the next newer version; zero for the newest
	for v := c; ; v = v.Previous {
		floor := now.Add(-time.Duration(v.TTLSeconds(eventType)) * time.Second)
		if v != nil && floor.Before(v.Since) {
			floor = v.Since
		}
		if (until.IsZero() || floor.Before(until)) && (!found || floor.Before(from)) {
			from, found = floor, true
		}
		if v == nil || v.Previous == nil {
			return from
		}
		until = v.Since
	}
}

// Settings returns the effective settings of eventType in version c,
// whatever hours it applies to; the settings of an hour are SettingsAt's.
func (c *EventTypes) Settings(eventType string) TypeSettings {
	var s TypeSettings
	if c != nil {
		s = c.Default
		if t, ok := c.Types[eventType]; ok {
			s = t
		}
	}
	if s.TTL <= 0 {
		s.TTL = DefaultEventTTL
		if c != nil && c.Default.TTL > 0 {
			s.TTL = c.Default.TTL
		}
	}
	return s
}

// TTLSeconds returns the TTL of eventType in version c in whole seconds,
// rounded up; the TTL of an hour is TTLSecondsAt's.
func (c *EventTypes) TTLSeconds(eventType string) int64 {
	ttl := c.Settings(eventType).TTL
	return int64((ttl + time.Second - 1) / time.Second)
}

// Allowed reports whether events of eventType are accepted.
func (c *EventTypes) Allowed(eventType string) bool {
	if c == nil || !c.AllowOnlyListed {
		return true
	}
	_, ok := c.Types[eventType]
	return ok
}

// ParseEventTypes parses the command-line form of EventTypes: a
// comma-separated list of type[:ttl=DURATION][:sub=N] entries, where the
// type "*" sets the default, e.g. "*:ttl=168h,click:ttl=24h:sub=4". An
// empty spec gives the defaults.
func ParseEventTypes(spec string) (*EventTypes, error) {
	c := &EventTypes{Types: map[string]TypeSettings{}}
	if strings.TrimSpace(spec) == "" {
		return c, nil
	}
	for _, entry := range strings.Split(spec, ",") {
		parts := strings.Split(strings.TrimSpace(entry), ":")
		name := parts[0]
		var s TypeSettings
		for _, opt := range parts[1:] {
			k, v, ok := strings.Cut(opt, "=")
			if !ok {
				return nil, fmt.Errorf("event type %q: option %q is not key=value (use ttl=24h or sub=4)", name, opt)
			}
			switch k {
			case "ttl":
				d, err := time.ParseDuration(v)
				if err != nil || d <= 0 {
					return nil, fmt.Errorf("event type %q: ttl %q is not a positive duration like 24h", name, v)
				}
				s.TTL = d
			case "sub":
				n, err := strconv.Atoi(v)
				if err != nil || n < 0 || n > 1024 {
					return nil, fmt.Errorf("event type %q: sub %q is not a number of sub-partitions in 0..1024", name, v)
				}
				s.SubPartitions = n
			default:
				return nil, fmt.Errorf("event type %q: unknown option %q (use ttl or sub)", name, k)
			}
		}
		if name == "*" {
			c.Default = s
			continue
		}
		if err := bucket.ValidateEventType(name); err != nil {
			return nil, fmt.Errorf("event types: %w", err)
		}
		if _, dup := c.Types[name]; dup {
			return nil, fmt.Errorf("event type %q is listed twice", name)
		}
		c.Types[name] = s
	}
	return c, nil
}

// String returns the spec ParseEventTypes parses back to c.
func (c *EventTypes) String() string {
	format := func(name string, s TypeSettings) string {
		out := name
		if s.TTL > 0 {
			out += ":ttl=" + s.TTL.String()
		}
		if s.SubPartitions > 0 {
			out += ":sub=" + strconv.Itoa(s.SubPartitions)
		}
		return out
	}
	entries := []string{format("*", c.Default)}
	names := make([]string, 0, len(c.Types))
	for n := range c.Types {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		entries = append(entries, format(n, c.Types[n]))
	}
	return strings.Join(entries, ",")
}
