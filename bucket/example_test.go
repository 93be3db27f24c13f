package bucket_test

import (
	"bytes"
	"fmt"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/google/uuid"
)

func ExampleNewPartitionKey() {
	at := time.Date(2026, 11, 21, 13, 42, 0, 0, time.UTC)
	k, err := bucket.NewPartitionKey(at, "click")
	if err != nil {
		panic(err)
	}
	fmt.Println(k)
	_, err = bucket.NewPartitionKey(at, "Click")
	fmt.Println(err)
	// Output:
	// 21112613|click
	// invalid partition key: invalid event type "Click": character 'C' at offset 0 is not allowed (use a-z, 0-9, '_', '-', '.')
}

func ExampleBucketsCovering() {
	from := time.Date(2026, 11, 21, 22, 30, 0, 0, time.UTC)
	to := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC) // exclusive: the 01:00 bucket is not read
	fmt.Println(bucket.CountBuckets(from, to), "buckets")
	for _, h := range bucket.BucketsCovering(from, to) {
		keys, _ := bucket.PartitionsFor(h, "click", 2)
		fmt.Println(keys)
	}
	// Output:
	// 3 buckets
	// [22112600|click|0 22112600|click|1]
	// [21112623|click|0 21112623|click|1]
	// [21112622|click|0 21112622|click|1]
}

func ExampleMinTimeUUID() {
	at := time.UnixMilli(0)
	min, _ := bucket.MinTimeUUID(at)
	max, _ := bucket.MaxTimeUUID(at)
	fmt.Println(min)
	fmt.Println(max)
	// Output:
	// 13814000-1dd2-11b2-8080-808080808080
	// 1381670f-1dd2-11b2-7f7f-7f7f7f7f7f7f
}

// A slice of the events table for [from, to): with event_id DESC, the newest
// row comes first, so the start bound is the largest id before to and the end
// bound the smallest id at from.
func ExampleClusteringLayout_Encode() {
	events := bucket.ClusteringLayout{{Name: "event_id", Type: bucket.TypeTimeUUID, Order: bucket.Desc}}
	from := time.Date(2026, 11, 21, 13, 0, 0, 0, time.UTC)
	to := from.Add(time.Hour)

	hi, _ := bucket.MaxTimeUUID(to.Add(-time.Millisecond))
	lo, _ := bucket.MinTimeUUID(from)
	start, _ := events.Encode(nil, hi) // inclusive
	end, _ := events.Encode(nil, lo)   // inclusive

	id, _ := bucket.NewTimeUUID(from.Add(30*time.Minute), [8]byte{0x80, 1, 2, 3, 4, 5, 6, 7})
	key, _ := events.Encode(nil, id)
	fmt.Println(bytes.Compare(start, key) <= 0 && bytes.Compare(key, end) <= 0)

	values, _ := events.Decode(key)
	fmt.Println(values[0].(uuid.UUID) == id)
	// Output:
	// true
	// true
}

// Rows whose leading columns equal a prefix form one byte range.
func ExamplePrefixEnd() {
	l := bucket.ClusteringLayout{
		{Name: "user", Type: bucket.TypeText},
		{Name: "seq", Type: bucket.TypeBigint, Order: bucket.Desc},
	}
	p, _ := l.EncodePrefix(nil, "ann")
	end := bucket.PrefixEnd(p)
	for _, user := range []string{"ann", "anna", "an"} {
		k, _ := l.Encode(nil, user, int64(7))
		fmt.Println(user, bytes.Compare(p, k) <= 0 && bytes.Compare(k, end) < 0)
	}
	// Output:
	// ann true
	// anna false
	// an false
}
