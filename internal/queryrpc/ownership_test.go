package queryrpc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/internal/natsconn/natstest"
)

func FuzzParseOwnerValue(f *testing.F) {
	for _, s := range []string{"node-a", "node-a>node-b", "", ">", "a>a", "a>b>c", "a.b", "a>"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseOwnerValue(b)
		if err != nil {
			return
		}
		if v.String() != string(b) {
			t.Fatalf("ParseOwnerValue(%q) = %+v, which prints as %q", b, v, v.String())
		}
		if again, err := ParseOwnerValue([]byte(v.String())); err != nil || again != v {
			t.Fatalf("round trip of %q: %+v %v", b, again, err)
		}
	})
}

func FuzzParseOwnerKey(f *testing.F) {
	for _, s := range []string{"shard.0", "shard.7", "shard.8", "shard.-1", "shard.01", "shard.", "x.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		s, err := ParseOwnerKey(key, 8)
		if err != nil {
			return
		}
		if s < 0 || s >= 8 || OwnerKey(s) != key {
			t.Fatalf("ParseOwnerKey(%q) = %d, whose key is %q", key, s, OwnerKey(s))
		}
	})
}

func TestParseOwnerValue(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want OwnerValue
		ok   bool
	}{
		{"node-a", OwnerValue{Owner: "node-a"}, true},
		{"node-a>node-b", OwnerValue{Owner: "node-a", MovingTo: "node-b"}, true},
		{"", OwnerValue{}, false},
		{"a>a", OwnerValue{}, false},
		{"a>", OwnerValue{}, false},
		{"a>b>c", OwnerValue{}, false},
		{"a.b", OwnerValue{}, false},
	} {
		got, err := ParseOwnerValue([]byte(tc.in))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseOwnerValue(%q) = %+v, %v; want %+v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// TestOwnershipCAS: a claim takes only a shard without owner; a move and
// a release apply only to the state they expect, so of two concurrent
// changes from one state one fails with ErrOwnerChanged; the watch sees
// the current state, then every change.
func TestOwnershipCAS(t *testing.T) {
	ns := natstest.Start(t, nil)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kv, err := OwnersBucket(ctx, js, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := ClaimShard(ctx, kv, 0, "a"); !ok || err != nil {
		t.Fatalf("first claim: %v %v", ok, err)
	}
	if ok, err := ClaimShard(ctx, kv, 0, "b"); ok || err != nil {
		t.Fatalf("second node's claim of an owned shard: %v %v, want false", ok, err)
	}
	if ok, err := ClaimShard(ctx, kv, 0, "a"); !ok || err != nil {
		t.Fatalf("owner's claim again: %v %v, want true", ok, err)
	}
	updates := make(chan OwnerUpdate, 16)
	wctx, wcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- WatchOwners(wctx, kv, 4, func(u OwnerUpdate) { updates <- u }, func(err error) { t.Errorf("bad entry: %v", err) })
	}()
	next := func() OwnerUpdate {
		t.Helper()
		select {
		case u := <-updates:
			return u
		case <-ctx.Done():
			t.Fatal("no update from the watch")
			return OwnerUpdate{}
		}
	}
	if u := next(); u.Shard != 0 || u.Value.Owner != "a" || !u.Initial {
		t.Errorf("initial entry %+v", u)
	}
	if u := next(); u.Shard != -1 {
		t.Errorf("want the end of the initial state, got %+v", u)
	}

	if err := MoveShard(ctx, kv, 0, "b", "c"); !errors.Is(err, ErrOwnerChanged) {
		t.Errorf("move from a node that does not own the shard: %v, want ErrOwnerChanged", err)
	}
	if err := MoveShard(ctx, kv, 0, "a", "b"); err != nil {
		t.Fatal(err)
	}
	if u := next(); u.Value != (OwnerValue{Owner: "a", MovingTo: "b"}) || u.Initial {
		t.Errorf("after the move: %+v", u)
	}
	if err := MoveShard(ctx, kv, 0, "a", "c"); !errors.Is(err, ErrOwnerChanged) {
		t.Errorf("a second move while moving: %v, want ErrOwnerChanged", err)
	}
	if err := ReleaseShard(ctx, kv, 0, "a", "c"); !errors.Is(err, ErrOwnerChanged) {
		t.Errorf("release to another node than the move's: %v, want ErrOwnerChanged", err)
	}
	if err := ReleaseShard(ctx, kv, 0, "a", "b"); err != nil {
		t.Fatal(err)
	}
	if u := next(); u.Value != (OwnerValue{Owner: "b"}) {
		t.Errorf("after the release: %+v", u)
	}
	// A stale revision loses even when the value matches again.
	e, _ := kv.Get(ctx, OwnerKey(0))
	if _, err := kv.Update(ctx, OwnerKey(0), []byte("c"), e.Revision()-1); err == nil {
		t.Error("an update with a stale revision applied")
	}
	if err := ForceOwner(ctx, kv, 0, OwnerValue{Owner: "b"}, "c"); err != nil {
		t.Fatal(err)
	}
	if u := next(); u.Value != (OwnerValue{Owner: "c"}) {
		t.Errorf("after the forced change: %+v", u)
	}
	wcancel()
	if err := <-done; err != nil {
		t.Errorf("WatchOwners: %v", err)
	}
}
