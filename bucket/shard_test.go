package bucket

import (
	"strconv"
	"testing"

	"github.com/cespare/xxhash/v2"
)

func TestShard(t *testing.T) {
	// Fixed values: a change of the function moves every stored partition.
	for _, tc := range []struct {
		key    string
		shards int
		want   int
	}{
		{"22112610|click", 1, 0},
		{"anything", 1, 0},
	} {
		if got := Shard([]byte(tc.key), tc.shards); got != tc.want {
			t.Errorf("Shard(%q, %d) = %d, want %d", tc.key, tc.shards, got, tc.want)
		}
	}
	seen := map[int]int{}
	for i := range 1000 {
		key := []byte("22112610|type" + strconv.Itoa(i))
		s := Shard(key, 8)
		if want := int(xxhash.Sum64(key) % 8); s != want {
			t.Fatalf("Shard(%q, 8) = %d, want xxhash64 mod 8 = %d", key, s, want)
		}
		seen[s]++
	}
	if len(seen) != 8 {
		t.Errorf("1000 keys fell in %d of 8 shards: %v", len(seen), seen)
	}
}

func TestEventShard(t *testing.T) {
	// Fixed values, FNV-1a 32 of the subject: a change moves every stored
	// partition, and JetStream's partition(n) computes the same (checked
	// against a real server in writer's TestShardedStreamSubjects).
	for _, tc := range []struct {
		prefix, typ string
		shards      int
		want        int
	}{
		{"events.", "click", 1, 0},
		{"events.", "click", 4, 2},
		{"events.", "page.view", 4, 0},
	} {
		if got := EventShard(tc.prefix, tc.typ, tc.shards); got != tc.want {
			t.Errorf("EventShard(%q, %q, %d) = %d, want %d", tc.prefix, tc.typ, tc.shards, got, tc.want)
		}
	}
	for i := range 200 {
		typ := "type" + strconv.Itoa(i)
		want := EventShard(DefaultEventSubjectPrefix, typ, 8)
		for _, key := range []string{"22112610|" + typ, "22112610|" + typ + "|3"} {
			if got := EventPartitionShard(DefaultEventSubjectPrefix, []byte(key), 8); got != want {
				t.Fatalf("EventPartitionShard(%q) = %d, want the shard of its type %d", key, got, want)
			}
		}
	}
	if got, want := EventPartitionShard("events.", []byte("no-type"), 8), Shard([]byte("no-type"), 8); got != want {
		t.Errorf("EventPartitionShard of a key without '|' = %d, want Shard's %d", got, want)
	}
}
