package main

import (
	"io"
	"slices"
	"strings"
	"testing"
)

// TestConfigShards: --node-id names the consumers unless they are given,
// --own-shards parses against --shards, and storing part of the shards
// needs a node id of its own.
func TestConfigShards(t *testing.T) {
	c, err := parseConfig(nil, envFrom(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Shard.NodeID != DefaultNodeID || c.Shard.Shards != 1 || !slices.Equal(c.Shard.Own, []int{0}) || c.Shard.sharded() ||
		c.Writer.Consumer != "eventide-writer" || c.Fanout.Consumer != "eventide-fanout" {
		t.Errorf("defaults: %+v, consumers %s %s", c.Shard, c.Writer.Consumer, c.Fanout.Consumer)
	}
	c, err = parseConfig([]string{"--node-id", "node-b", "--shards", "8", "--own-shards", "4-7"}, envFrom(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Shard.Own, []int{4, 5, 6, 7}) || !c.Shard.sharded() ||
		c.Writer.Consumer != "eventide-writer-node-b" || c.Fanout.Consumer != "eventide-fanout-node-b" {
		t.Errorf("node-b: %+v, consumers %s %s", c.Shard, c.Writer.Consumer, c.Fanout.Consumer)
	}
	c, err = parseConfig([]string{"--consumer", "w"}, envFrom(map[string]string{"EVENTIDE_NODE_ID": "n1"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Shard.NodeID != "n1" || c.Writer.Consumer != "w" || c.Fanout.Consumer != "eventide-fanout" {
		t.Errorf("a node id alone keeps the consumers (renaming them would replay the stream): %s, consumers %s %s", c.Shard.NodeID, c.Writer.Consumer, c.Fanout.Consumer)
	}
	c, err = parseConfig([]string{"--node-id", "n2", "--shards", "2", "--own-shards", "1", "--consumer", "w"}, envFrom(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Writer.Consumer != "w" || c.Fanout.Consumer != "eventide-fanout-n2" {
		t.Errorf("explicit --consumer on a sharded node: consumers %s %s", c.Writer.Consumer, c.Fanout.Consumer)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--shards", "8", "--own-shards", "0-3"}, "give --node-id"},
		{[]string{"--node-id", "a", "--shards", "4", "--own-shards", "0-4"}, "not below the shard count 4"},
		{[]string{"--node-id", "a.b"}, "one NATS subject token"},
		{[]string{"--shards", "0"}, "-shards: 0 is outside"},
		{[]string{"--node-id", "a", "--shards", "2", "--subjects", "ev.>"}, "a sharded deployment publishes on events.>"},
		{[]string{"--node-id", "a", "--shards", "2", "--owners-kv", "b", "--node-id", "a", "--restore-node", "x"}, "--restore-node needs --restore-from"},
		{[]string{"--shards", "2", "--owners-kv", "b"}, "--owners-kv needs --node-id"},
		{[]string{"--node-id", "a", "--owners-kv", "b"}, "--owners-kv needs --shards of 2 or more"},
		{[]string{"--node-id", "a", "--shards", "2", "--node-lease", "10s"}, "--node-lease needs --owners-kv"},
		{[]string{"--node-id", "a", "--shards", "2", "--owners-kv", "b", "--node-lease", "500ms"}, "--node-lease 500ms is below 1s"},
	} {
		_, err := parseConfig(tt.args, envFrom(nil), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want an error containing %q", tt.args, err, tt.want)
		}
	}
}
