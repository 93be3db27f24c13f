package bucket

import "time"

// secondsPerHour converts hour-aligned Unix seconds into hour counts. It is
// used instead of time.Duration arithmetic because Duration saturates at about
// 292 years, and a bucket count must stay exact for any pair of times.
const secondsPerHour = 3600

// HourOf returns the hour bucket that holds t: t in UTC, truncated to the hour,
// with any monotonic clock reading stripped (so results compare with ==).
func HourOf(t time.Time) time.Time {
	return t.UTC().Truncate(time.Hour)
}

// CountBuckets returns how many hour buckets intersect the half-open window
// [from, to): 0 when from >= to. Callers that bound the buckets one query may
// touch compare against this before calling BucketsCovering, which allocates
// one time.Time per bucket.
func CountBuckets(from, to time.Time) int64 {
	if !from.Before(to) {
		return 0
	}
	first, last := HourOf(from), lastBucket(to)
	return (last.Unix()-first.Unix())/secondsPerHour + 1
}

// BucketsCovering returns the hour buckets that intersect [from, to), newest
// first: the order a slice that stops at its row limit should walk them.
// It is empty when from >= to. It allocates CountBuckets(from, to) entries;
// bound that first.
func BucketsCovering(from, to time.Time) []time.Time {
	n := CountBuckets(from, to)
	if n == 0 {
		return nil
	}
	out := make([]time.Time, n)
	h := lastBucket(to)
	for i := range out {
		out[i] = h
		h = h.Add(-time.Hour)
	}
	return out
}

// BucketsCoveringAscending is BucketsCovering oldest first.
func BucketsCoveringAscending(from, to time.Time) []time.Time {
	n := CountBuckets(from, to)
	if n == 0 {
		return nil
	}
	out := make([]time.Time, n)
	h := HourOf(from)
	for i := range out {
		out[i] = h
		h = h.Add(time.Hour)
	}
	return out
}

// lastBucket is the bucket of the last instant before the exclusive bound to.
// Go times have nanosecond resolution, so that instant is to - 1ns; a window
// ending exactly on an hour boundary therefore does not include that hour.
func lastBucket(to time.Time) time.Time {
	return HourOf(to.Add(-time.Nanosecond))
}
