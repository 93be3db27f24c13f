package main

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/eventide/eventide/internal/queryrpc"
)

// TestFreshnessRefreshDoesNotHoldRequests: once the nodes' positions are
// known, a request finding them stale answers with them at once while a
// refresh runs in the background, rather than wait for a round trip to
// every node; the next request after the refresh sees the new positions.
func TestFreshnessRefreshDoesNotHoldRequests(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1795000000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	release := make(chan struct{})
	calls := make(chan int, 10)
	n := 0
	p := &nodePositions{now: clock, fetch: func(context.Context) map[string]*queryrpc.NodeFreshness {
		n++
		calls <- n
		if n > 1 {
			<-release // a node slow to answer
		}
		return map[string]*queryrpc.NodeFreshness{"node-a": {Writer: &queryrpc.ConsumerPosition{AppliedSeq: uint64(n)}, Shards: 1}}
	}}
	seq := func(m map[string]*queryrpc.NodeFreshness) uint64 { return m["node-a"].Writer.AppliedSeq }

	if got := seq(p.get()); got != 1 {
		t.Fatalf("first answer: seq %d, want 1", got)
	}
	<-calls
	mu.Lock()
	now = now.Add(2 * freshnessMaxAge)
	mu.Unlock()

	done := make(chan uint64)
	go func() { done <- seq(p.get()) }()
	select {
	case got := <-done:
		if got != 1 {
			t.Fatalf("answer while refreshing: seq %d, want the previous 1", got)
		}
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("a request waited for the freshness refresh")
	}
	<-calls // the refresh started
	if got := seq(p.get()); got != 1 {
		t.Fatalf("second answer while refreshing: seq %d, want 1", got)
	}
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for seq(p.get()) != 2 {
		if time.Now().After(deadline) {
			t.Fatal("the refreshed positions never showed")
		}
		time.Sleep(time.Millisecond)
	}
	if len(calls) != 0 {
		t.Fatalf("%d more refreshes than one", len(calls))
	}
}

// TestFreshnessFollowsRefresh: the per-shard list a data response
// reports is built once per refresh of the nodes' positions, and a
// refresh shows in the next response.
func TestFreshnessFollowsRefresh(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1795000000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	seq := uint64(0)
	refreshed := make(chan struct{}, 10)
	p := &nodePositions{now: clock, fetch: func(context.Context) map[string]*queryrpc.NodeFreshness {
		mu.Lock()
		seq++
		s := seq
		mu.Unlock()
		defer func() { refreshed <- struct{}{} }()
		return map[string]*queryrpc.NodeFreshness{
			"node-a": {Writer: &queryrpc.ConsumerPosition{AppliedSeq: s}},
			"node-b": {Writer: &queryrpc.ConsumerPosition{AppliedSeq: 100 + s}},
		}
	}}
	s := &server{cfg: &config{Owners: []string{"node-a", "node-b", "node-a"}}, positions: p}
	src := s.freshness(func(f *queryrpc.NodeFreshness) *queryrpc.ConsumerPosition { return f.Writer })
	seqs := func() []uint64 {
		var out []uint64
		for _, sh := range src.Freshness() {
			out = append(out, sh.AppliedSeq)
		}
		return out
	}
	if got, want := seqs(), []uint64{1, 101, 1}; !slices.Equal(got, want) {
		t.Fatalf("first answer: %v, want %v", got, want)
	}
	<-refreshed
	a, b := src.Freshness(), src.Freshness()
	if &a[0] != &b[0] {
		t.Error("the list was built again for unchanged positions")
	}
	mu.Lock()
	now = now.Add(2 * freshnessMaxAge)
	mu.Unlock()
	src.Freshness() // starts the refresh
	<-refreshed
	deadline := time.Now().Add(10 * time.Second)
	for want := []uint64{2, 102, 2}; !slices.Equal(seqs(), want); {
		if time.Now().After(deadline) {
			t.Fatalf("after a refresh: %v, want %v", seqs(), want)
		}
		time.Sleep(time.Millisecond)
	}
}
