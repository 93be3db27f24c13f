package bucket

import "errors"

// Sentinel errors. Every error this package returns wraps exactly one of these
// (a partition key with a bad event type wraps two), so callers branch with
// errors.Is and never on message text.
var (
	// ErrInvalidEventType is returned when an event type is empty, longer than
	// MaxEventTypeLen bytes, or holds a byte outside a-z, 0-9, '_', '-', '.'.
	ErrInvalidEventType = errors.New("invalid event type")

	// ErrInvalidPartitionKey is returned when a partition key string does not
	// parse (layout, digits, calendar date, shard suffix), or when a key cannot
	// be built: an hour outside the years 2000..2099 that "yy" can name, or a
	// shard count outside 0..MaxShards.
	ErrInvalidPartitionKey = errors.New("invalid partition key")

	// ErrTimeOutOfRange is returned when a time cannot be a TimeUUID timestamp:
	// before 1582-10-15T00:00:00Z or past the 60-bit tick range (year 5236).
	ErrTimeOutOfRange = errors.New("time out of TimeUUID range")

	// ErrNotTimeUUID is returned when a UUID that must be version 1 is not.
	ErrNotTimeUUID = errors.New("not a version 1 (time-based) UUID")

	// ErrInvalidLayout is returned when a column type name is unknown, or a
	// ClusteringLayout holds an unknown column type or order.
	ErrInvalidLayout = errors.New("invalid clustering layout")

	// ErrInvalidClusteringValue is returned by ClusteringLayout.Encode and
	// EncodePrefix when the number of values is wrong or a value does not fit
	// its column: wrong Go type, nil, invalid UTF-8 or ASCII, a non-version-1
	// UUID for a timeuuid column, or a value out of the encodable range.
	ErrInvalidClusteringValue = errors.New("invalid clustering value")

	// ErrCorruptKey is returned when bytes handed to a decoder are not a valid
	// encoding: truncated, trailing garbage, a bad escape or header byte, or a
	// non-canonical form that no encoder produces.
	ErrCorruptKey = errors.New("corrupt key encoding")
)
