package bucket

import (
	"testing"
	"time"
)

func TestHasPartitionKey(t *testing.T) {
	for _, tc := range []struct {
		at   time.Time
		want bool
	}{
		{time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC), false},
		{time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{time.Date(2099, 12, 31, 23, 59, 59, 0, time.UTC), true},
		{time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC), false},
		// The year is the UTC one: 00:30+01:00 on 2000-01-01 is 1999 in UTC.
		{time.Date(2000, 1, 1, 0, 30, 0, 0, time.FixedZone("", 3600)), false},
	} {
		if got := HasPartitionKey(tc.at); got != tc.want {
			t.Errorf("HasPartitionKey(%s) = %v, want %v", tc.at, got, tc.want)
		}
		_, err := NewPartitionKey(tc.at, "click")
		if (err == nil) != tc.want {
			t.Errorf("NewPartitionKey(%s): %v, disagrees with HasPartitionKey", tc.at, err)
		}
	}
}
