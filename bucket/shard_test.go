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
