package main

import (
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/eventide/eventide/internal/natstest"
	"github.com/eventide/eventide/internal/queryrpc"
)

// TestWatchOwners: with --owners-kv, routing follows the owners bucket
// once it names every shard, keeps a moving shard on its old owner until
// the release, and follows the release.
func TestWatchOwners(t *testing.T) {
	ns := natstest.StartServer(t)
	nc, js := natstest.Connect(t, ns.ClientURL())
	ctx := t.Context()
	kv, err := queryrpc.OwnersBucket(ctx, js, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := parseConfig([]string{"--shards", "2", "--owners-kv", queryrpc.DefaultOwnersBucket, "--owners", "0-1=node-a"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	client, err := queryrpc.NewClient(nc, queryrpc.ClientConfig{Owners: cfg.Owners})
	if err != nil {
		t.Fatal(err)
	}
	s := &server{cfg: cfg, nc: nc, client: client, logger: slog.New(slog.DiscardHandler), failed: make(chan error, 1)}
	if _, err := queryrpc.ClaimShard(ctx, kv, 0, "node-b"); err != nil {
		t.Fatal(err)
	}
	stop, err := s.watchOwners(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if got := client.Owners(); !slices.Equal(got, []string{"node-a", "node-a"}) {
		t.Errorf("with shard 1 not in the bucket: owners %v, want --owners' [node-a node-a]", got)
	}
	waitOwners := func(want ...string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !slices.Equal(client.Owners(), want); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("owners %v, want %v", client.Owners(), want)
			}
		}
	}
	if _, err := queryrpc.ClaimShard(ctx, kv, 1, "node-c"); err != nil {
		t.Fatal(err)
	}
	waitOwners("node-b", "node-c")
	if err := queryrpc.MoveShard(ctx, kv, 1, "node-c", "node-b"); err != nil {
		t.Fatal(err)
	}
	// Moving: still node-c's until it releases. The watch applies
	// changes in order, so once it shows the change of shard 0 made after
	// the move, it has seen the move.
	if err := queryrpc.ForceOwner(ctx, kv, 0, queryrpc.OwnerValue{Owner: "node-b"}, "node-d"); err != nil {
		t.Fatal(err)
	}
	waitOwners("node-d", "node-c")
	if err := queryrpc.ReleaseShard(ctx, kv, 1, "node-c", "node-b"); err != nil {
		t.Fatal(err)
	}
	waitOwners("node-d", "node-b")
	if got := client.Nodes(); !slices.Equal(got, []string{"node-b", "node-d"}) {
		t.Errorf("nodes %v, want [node-b node-d]", got)
	}
}
