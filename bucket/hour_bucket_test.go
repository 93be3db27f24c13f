package bucket

import (
	"slices"
	"testing"
	"time"
)

func TestHourOf(t *testing.T) {
	ist := time.FixedZone("IST", 5*3600+1800)
	tests := []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 11, 21, 13, 45, 10, 500, time.UTC), "2026-11-21T13:00:00Z"},
		{time.Date(2026, 11, 21, 13, 0, 0, 0, time.UTC), "2026-11-21T13:00:00Z"},
		{time.Date(2026, 11, 21, 13, 59, 59, 999999999, time.UTC), "2026-11-21T13:00:00Z"},
		// A half-hour zone: the UTC hour, not the local one.
		{time.Date(2026, 11, 21, 19, 15, 0, 0, ist), "2026-11-21T13:00:00Z"},
		{time.Date(2027, 1, 1, 0, 30, 0, 0, ist), "2026-12-31T19:00:00Z"},
		{time.Date(1969, 12, 31, 23, 59, 59, 1, time.UTC), "1969-12-31T23:00:00Z"},
	}
	for _, tt := range tests {
		got := HourOf(tt.in)
		if got.Format(time.RFC3339Nano) != tt.want || got.Location() != time.UTC {
			t.Errorf("HourOf(%s) = %s (%s), want %s UTC", tt.in, got.Format(time.RFC3339Nano), got.Location(), tt.want)
		}
	}
	// The monotonic reading is stripped, so a bucket of time.Now compares with ==.
	now := time.Now()
	if HourOf(now) != HourOf(now.Round(0)) {
		t.Errorf("HourOf keeps a monotonic reading: %v", HourOf(now))
	}
}

func TestBucketsCovering(t *testing.T) {
	h := func(s string) time.Time { return mustTime(t, s) }
	tests := []struct {
		name     string
		from, to string
		want     []string // newest first
	}{
		{"two whole hours", "2026-11-21T13:00:00Z", "2026-11-21T15:00:00Z",
			[]string{"2026-11-21T14:00:00Z", "2026-11-21T13:00:00Z"}},
		{"to one nanosecond into an hour includes it", "2026-11-21T13:30:00Z", "2026-11-21T15:00:00.000000001Z",
			[]string{"2026-11-21T15:00:00Z", "2026-11-21T14:00:00Z", "2026-11-21T13:00:00Z"}},
		{"last nanosecond of an hour", "2026-11-21T13:59:59.999999999Z", "2026-11-21T14:00:00Z",
			[]string{"2026-11-21T13:00:00Z"}},
		{"inside one hour", "2026-11-21T13:10:00Z", "2026-11-21T13:20:00Z",
			[]string{"2026-11-21T13:00:00Z"}},
		{"across a year boundary", "2026-12-31T23:30:00Z", "2027-01-01T00:30:00Z",
			[]string{"2027-01-01T00:00:00Z", "2026-12-31T23:00:00Z"}},
		{"empty window", "2026-11-21T13:00:00Z", "2026-11-21T13:00:00Z", nil},
		{"reversed window", "2026-11-21T15:00:00Z", "2026-11-21T13:00:00Z", nil},
		{"zones are converted", "2026-11-21T14:30:00+01:00", "2026-11-21T13:45:00Z",
			[]string{"2026-11-21T13:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from, to := h(tt.from), h(tt.to)
			var got []string
			for _, b := range BucketsCovering(from, to) {
				got = append(got, b.Format(time.RFC3339Nano))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("BucketsCovering = %v, want %v", got, tt.want)
			}
			var asc []string
			for _, b := range BucketsCoveringAscending(from, to) {
				asc = append(asc, b.Format(time.RFC3339Nano))
			}
			wantAsc := slices.Clone(tt.want)
			slices.Reverse(wantAsc)
			if !slices.Equal(asc, wantAsc) {
				t.Errorf("BucketsCoveringAscending = %v, want %v", asc, wantAsc)
			}
			if n := CountBuckets(from, to); n != int64(len(tt.want)) {
				t.Errorf("CountBuckets = %d, want %d", n, len(tt.want))
			}
		})
	}
}

// TestCountBucketsHugeWindow checks the count stays exact past the ~292 years
// where time.Duration saturates: year 1 to year 10000 is 3,652,059 days.
func TestCountBucketsHugeWindow(t *testing.T) {
	from := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	to := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	if got, want := CountBuckets(from, to), int64(3652059*24); got != want {
		t.Errorf("CountBuckets(year 1, year 10000) = %d, want %d", got, want)
	}
}

func TestBucketsCoveringRandomWindows(t *testing.T) {
	rng := newRand(t)
	base := time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC).UnixNano()
	for i := 0; i < 2000; i++ {
		from := time.Unix(0, base+rng.Int64N(int64(200*time.Hour))).UTC()
		to := from.Add(time.Duration(rng.Int64N(int64(30 * time.Hour))))
		if rng.IntN(4) == 0 {
			to = HourOf(to) // exactly on a boundary
		}
		got := BucketsCovering(from, to)
		if int64(len(got)) != CountBuckets(from, to) {
			t.Fatalf("[%s, %s): %d buckets, CountBuckets %d", from, to, len(got), CountBuckets(from, to))
		}
		if !from.Before(to) {
			if len(got) != 0 {
				t.Fatalf("[%s, %s) is empty but got %v", from, to, got)
			}
			continue
		}
		// Every instant of the window falls in exactly one listed bucket, and
		// every bucket holds some instant of the window.
		if got[0] != HourOf(to.Add(-time.Nanosecond)) || got[len(got)-1] != HourOf(from) {
			t.Fatalf("[%s, %s): buckets %v do not span from %s to %s", from, to, got, HourOf(from), HourOf(to.Add(-1)))
		}
		for j, b := range got {
			if b.Minute() != 0 || b.Second() != 0 || b.Nanosecond() != 0 || b.Location() != time.UTC {
				t.Fatalf("bucket %s is not a UTC hour", b)
			}
			if j > 0 && got[j-1].Sub(b) != time.Hour {
				t.Fatalf("buckets %s and %s are not consecutive newest-first hours", got[j-1], b)
			}
			if !b.Before(to) || !b.Add(time.Hour).After(from) {
				t.Fatalf("bucket %s does not intersect [%s, %s)", b, from, to)
			}
		}
	}
}
