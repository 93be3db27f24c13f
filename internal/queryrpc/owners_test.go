package queryrpc

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParseShardSet(t *testing.T) {
	for _, tc := range []struct {
		spec   string
		shards int
		want   []int
		err    string
	}{
		{"", 3, []int{0, 1, 2}, ""},
		{"all", 2, []int{0, 1}, ""},
		{"0-3", 8, []int{0, 1, 2, 3}, ""},
		{"5-7, 0,2,2", 8, []int{0, 2, 5, 6, 7}, ""},
		{"3-1", 8, nil, "N <= M"},
		{"8", 8, nil, "not below the shard count 8"},
		{"x", 8, nil, "not a shard"},
		{"-1", 8, nil, "not a shard"},
		{"0", 0, nil, "shard count 0"},
	} {
		got, err := ParseShardSet(tc.spec, tc.shards)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseShardSet(%q, %d) = %v, %v; want an error containing %q", tc.spec, tc.shards, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseShardSet(%q, %d) = %v, %v; want %v", tc.spec, tc.shards, got, err, tc.want)
		}
	}
}

func TestParseOwners(t *testing.T) {
	got, err := ParseOwners("0-1=node-a, 2-3=node-b", 4)
	if err != nil || !slices.Equal(got, []string{"node-a", "node-a", "node-b", "node-b"}) {
		t.Errorf("got %v, %v", got, err)
	}
	file := filepath.Join(t.TempDir(), "owners")
	if err := os.WriteFile(file, []byte("# the two nodes\n0-1=node-a\n2-3=node-b # second\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := ParseOwners(file, 4); err != nil || !slices.Equal(got, []string{"node-a", "node-a", "node-b", "node-b"}) {
		t.Errorf("from a file: %v, %v", got, err)
	}
	for spec, want := range map[string]string{
		"0-1=node-a":             "shards 2,3 of 4 without an owner",
		"0-3=node-a,3=node-b":    "two owners",
		"0-3=node.a":             "one NATS subject token",
		"0-3":                    "neither",
		"0-3=node-a,junk":        "want SHARDS=NODE",
		"0-3=":                   "empty",
		"0-4=node-a":             "not below",
		filepath.Join(file, "x"): "neither",
	} {
		if _, err := ParseOwners(spec, 4); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseOwners(%q): %v, want an error containing %q", spec, err, want)
		}
	}
}

func FuzzParseOwners(f *testing.F) {
	for _, s := range []string{"0-1=a,2-3=b", "all=local", "0=a,1=b,2=c,3=a", "3-0=a", "0-3=a,0=b"} {
		f.Add(s, 4)
	}
	f.Fuzz(func(t *testing.T, spec string, shards int) {
		if !strings.Contains(spec, "=") || shards > 64 {
			return // a file name, or a needlessly large map
		}
		owners, err := ParseOwners(spec, shards)
		if err != nil {
			return
		}
		if len(owners) != shards {
			t.Fatalf("%d owners for %d shards", len(owners), shards)
		}
		for s, o := range owners {
			if CheckNodeID(o) != nil {
				t.Fatalf("shard %d: owner %q is not a node id", s, o)
			}
		}
	})
}

// FuzzParseShardSet: the --own-shards parser never panics, and what it
// accepts is a sorted set of distinct shards below the shard count that
// parses back to itself, holding every shard a single number names.
func FuzzParseShardSet(f *testing.F) {
	for _, s := range []string{"all", "", "0-3", "0,2,5-7", "3-0", "7", "0,,1", " 1 , 2-3 ", "-1", "1-", "0-99999999999999999999", "5,1-2,1"} {
		f.Add(s, 8)
	}
	f.Fuzz(func(t *testing.T, spec string, shards int) {
		if shards > 1<<12 {
			return // every set is built in full: keep runs fast
		}
		set, err := ParseShardSet(spec, shards)
		if err != nil {
			return
		}
		if len(set) == 0 || len(set) > shards {
			t.Fatalf("ParseShardSet(%q, %d) = %v: want 1 to %d shards", spec, shards, set, shards)
		}
		for i, s := range set {
			if s < 0 || s >= shards || i > 0 && set[i-1] >= s {
				t.Fatalf("ParseShardSet(%q, %d) = %v: not sorted, distinct shards below %d", spec, shards, set, shards)
			}
		}
		items := make([]string, len(set))
		for i, s := range set {
			items[i] = strconv.Itoa(s)
		}
		again, err := ParseShardSet(strings.Join(items, ","), shards)
		if err != nil || !slices.Equal(again, set) {
			t.Fatalf("ParseShardSet(%q, %d) = %v, which parses back as %v, %v", spec, shards, set, again, err)
		}
		for _, part := range strings.Split(spec, ",") {
			if n, err := strconv.Atoi(strings.TrimSpace(part)); err == nil && !slices.Contains(set, n) {
				t.Fatalf("ParseShardSet(%q, %d) = %v lacks %d, named in it", spec, shards, set, n)
			}
		}
	})
}
