package writer

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/storage"
)

// TestShardedWriters runs two writers, as two nodes of a sharded
// deployment, on one stream with their own consumers and stores: each
// stores exactly the events and counts of the partitions of its shard,
// together they hold every event and count once, and only the node that
// dead-letters publishes a reject.
func TestShardedWriters(t *testing.T) {
	rng := newRand(t)
	s := startNATS(t, t.TempDir(), -1)
	nc := connect(t, s.ClientURL())
	types := testTypes(t)
	const shards = 2
	// As cmd/ingest's nodes: the events and counts tables sharded, the
	// rest (the checkpoint) stored by every node.
	owns := func(shard int) func(string, []byte) bool {
		return func(table string, p []byte) bool {
			return (table != schema.EventsTable && table != schema.CountsTable) || bucket.Shard(p, shards) == shard
		}
	}
	dbs := []*storage.DB{openDB(t, t.TempDir()), openDB(t, t.TempDir())}
	// What each node reports stored (its live tail's feed): the events of
	// its shard only.
	var reportedMu sync.Mutex
	reported := [2]map[uuid.UUID]int{{}, {}}
	onStored := func(node int) func([]StoredEvent) {
		return func(evs []StoredEvent) {
			reportedMu.Lock()
			defer reportedMu.Unlock()
			for _, e := range evs {
				reported[node][e.Event.ID]++
			}
		}
	}
	ws := []*Writer{
		newWriter(t, nc, dbs[0], Config{Types: types, Consumer: "w-node-a", StoresPartition: owns(0), OnStored: onStored(0)}),
		newWriter(t, nc, dbs[1], Config{Types: types, Consumer: "w-node-b", StoresPartition: owns(1), NoDeadLetters: true, OnStored: onStored(1)}),
	}
	for _, w := range ws {
		runWriter(t, w)
	}
	js := jsFor(t, nc)
	now := time.Now()
	// A minute clear of the short type's 3h TTL at the old end: an event
	// drawn at now-3h would expire on its way (a dead letter, not stored).
	evs := genEvents(rng, 0, 3000, testEventTypes, now.Add(-3*time.Hour+time.Minute), 3*time.Hour-2*time.Minute)
	if err := publishAll(context.Background(), js, evs); err != nil {
		t.Fatal(err)
	}
	rejectSeq := publishOne(t, js, "events.view", []byte(`{"data":{}}`))
	for _, w := range ws {
		waitApplied(t, w, js, DefaultStream, 60*time.Second)
	}

	from, to := now.Add(-3*time.Hour), now
	seen := map[int]int{}
	for shard, db := range dbs {
		stored := readEvents(t, db, types, testEventTypes, from, to)
		deadline := time.Now().Add(30 * time.Second)
		for {
			reportedMu.Lock()
			n := len(reported[shard])
			reportedMu.Unlock()
			if n >= len(stored) || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		reportedMu.Lock()
		if len(reported[shard]) != len(stored) {
			t.Errorf("node of shard %d reports %d events stored (OnStored), holds %d", shard, len(reported[shard]), len(stored))
		}
		for _, ev := range stored {
			if reported[shard][ev.ID] != 1 {
				t.Errorf("node of shard %d: OnStored reported event %d %d times, want once", shard, ev.n, reported[shard][ev.ID])
				break
			}
		}
		reportedMu.Unlock()
		for _, ev := range stored {
			seen[ev.n]++
			pk, err := bucket.PartitionKeyFor(ev.ID, ev.Type, types.SettingsAt(ev.Type, ev.Time()).SubPartitions)
			if err != nil {
				t.Fatal(err)
			}
			if got := bucket.Shard([]byte(pk.String()), shards); got != shard {
				t.Fatalf("node of shard %d stores event %d of partition %s, shard %d", shard, ev.n, pk, got)
			}
		}
		if n := ws[shard].Stats().Ingested; n == 0 || n == uint64(len(evs)) {
			t.Errorf("node of shard %d reports %d events ingested of %d: want its share", shard, n, len(evs))
		}
	}
	if len(seen) != len(evs) {
		t.Errorf("the two nodes hold %d distinct events, want %d", len(seen), len(evs))
	}
	for n, c := range seen {
		if c != 1 {
			t.Errorf("event %d stored %d times across the nodes", n, c)
		}
	}
	total := map[countKey]int64{}
	for _, db := range dbs {
		for k, v := range readCounts(t, db, testEventTypes, from, to) {
			total[k] += v
		}
	}
	if want := wantCounts(evs); !maps.Equal(total, want) {
		t.Errorf("counts summed over the nodes differ from the events published (%d vs %d minutes)", len(total), len(want))
	}
	for i, db := range dbs {
		if len(readCounts(t, db, testEventTypes, from, to)) == 0 {
			t.Errorf("node %d holds no counts: the counts table is not sharded as expected", i)
		}
	}
	if got := deadLettersBySeq(t, js, DefaultDLQStream); len(got) != 1 || got[rejectSeq] != 1 {
		t.Errorf("dead letters by origin seq: %v, want exactly one of seq %d", got, rejectSeq)
	}
}
