package queryrpc

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// ParseShardSet parses a set of shards such as "0-3" or "0,2,5-7" out of
// shards (0..shards-1); "all" or "" is every shard. The result is sorted
// and without duplicates.
func ParseShardSet(spec string, shards int) ([]int, error) {
	if shards < 1 || shards > maxShards {
		return nil, fmt.Errorf("shard count %d is not in 1..%d", shards, maxShards)
	}
	spec = strings.TrimSpace(spec)
	if spec == "" || spec == "all" {
		all := make([]int, shards)
		for i := range all {
			all[i] = i
		}
		return all, nil
	}
	seen := make([]bool, shards)
	var out []int
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.Atoi(lo)
		last := first
		if err == nil && isRange {
			last, err = strconv.Atoi(hi)
		}
		if err != nil || first < 0 || last < first {
			return nil, fmt.Errorf("shard set %q: %q is not a shard N or a range N-M with N <= M", spec, part)
		}
		if last >= shards {
			return nil, fmt.Errorf("shard set %q: shard %d is not below the shard count %d", spec, last, shards)
		}
		for s := first; s <= last; s++ {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// ParseOwners parses the static owner map of a deployment: comma- or
// newline-separated items "SHARDS=NODE", SHARDS a shard set as
// ParseShardSet takes it ("0-3=node-a,4-7=node-b"). When spec has no '='
// it names a file holding the same items ('#' starts a comment). Every
// shard must have exactly one owner. The result is the owner of each
// shard, by index.
func ParseOwners(spec string, shards int) ([]string, error) {
	if shards < 1 || shards > maxShards {
		return nil, fmt.Errorf("shard count %d is not in 1..%d", shards, maxShards)
	}
	if !strings.Contains(spec, "=") {
		b, err := os.ReadFile(spec)
		if err != nil {
			return nil, fmt.Errorf("cannot read the owner map: %q is neither SHARDS=NODE items nor a readable file: %w", spec, err)
		}
		var lines []string
		for _, line := range strings.Split(string(b), "\n") {
			line, _, _ = strings.Cut(line, "#")
			if line = strings.TrimSpace(line); line != "" {
				lines = append(lines, line)
			}
		}
		spec = strings.Join(lines, ",")
	}
	owners := make([]string, shards)
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		set, node, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("owner map item %q: want SHARDS=NODE, e.g. 0-3=node-a", item)
		}
		node = strings.TrimSpace(node)
		if err := checkToken("node", node); err != nil {
			return nil, fmt.Errorf("owner map item %q: %w", item, err)
		}
		ss, err := ParseShardSet(set, shards)
		if err != nil {
			return nil, fmt.Errorf("owner map item %q: %w", item, err)
		}
		for _, s := range ss {
			if owners[s] != "" && owners[s] != node {
				return nil, fmt.Errorf("owner map: shard %d has two owners, %s and %s", s, owners[s], node)
			}
			owners[s] = node
		}
	}
	var missing []string
	for s, o := range owners {
		if o == "" {
			missing = append(missing, strconv.Itoa(s))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("owner map %q leaves shards %s of %d without an owner", spec, strings.Join(missing, ","), shards)
	}
	return owners, nil
}

// checkToken refuses a value that cannot be one token of a NATS subject.
func checkToken(what, v string) error {
	if v == "" {
		return fmt.Errorf("%s id is empty", what)
	}
	if strings.ContainsAny(v, ".*> \t\r\n") {
		return fmt.Errorf("%s id %q holds '.', '*', '>' or white space: it must be one NATS subject token", what, v)
	}
	return nil
}

// CheckNodeID refuses a node id that cannot name a node's subjects.
func CheckNodeID(node string) error { return checkToken("node", node) }
