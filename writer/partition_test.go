package writer

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/storage"
)

// TestShardedStreamSubjects runs one writer per shard of a stream sharded
// by JetStream's own partitioning, each with its own store and filtered
// consumer: the server files every event under the shard bucket.EventShard
// computes, each writer is delivered and stores exactly its shard's events
// and counts, together they hold every event and count once, and a reject
// is dead-lettered once, by its shard's writer.
func TestShardedStreamSubjects(t *testing.T) {
	rng := newRand(t)
	s := startNATS(t, t.TempDir(), -1)
	nc := connect(t, s.ClientURL())
	types := testTypes(t)
	const shards = 2
	dbs := []*storage.DB{openDB(t, t.TempDir()), openDB(t, t.TempDir())}
	ws := make([]*Writer, shards)
	for i := range ws {
		ws[i] = newWriter(t, nc, dbs[i], Config{Types: types, Consumer: fmt.Sprintf("w-s%d", i), Shards: shards, Shard: i})
		runWriter(t, ws[i])
	}
	js := jsFor(t, nc)
	now := time.Now()
	evs := genEvents(rng, 0, 1000, testEventTypes, now.Add(-3*time.Hour+time.Minute), 3*time.Hour-2*time.Minute)
	if err := publishAll(context.Background(), js, evs); err != nil {
		t.Fatal(err)
	}
	rejectSeq := publishOne(t, js, "events.view", []byte(`{"data":{}}`))
	perShard := make([]int, shards)
	for _, ev := range evs {
		perShard[bucket.EventShard(bucket.DefaultEventSubjectPrefix, ev.typ, shards)]++
	}
	if perShard[0] == 0 || perShard[1] == 0 {
		t.Fatalf("events per shard %v: the test types must fall in both shards", perShard)
	}
	waitFor(t, 60*time.Second, func() bool {
		return ws[0].Stats().Ingested+ws[1].Stats().Ingested >= uint64(len(evs)) && ws[0].Stats().Rejected+ws[1].Stats().Rejected >= 1
	}, func() string {
		return fmt.Sprintf("writers at %+v and %+v of %d events", ws[0].Stats(), ws[1].Stats(), len(evs))
	})

	// The server's partition(n) and bucket.EventShard agree.
	st, err := js.Stream(context.Background(), DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 50; seq++ {
		m, err := st.GetMsg(context.Background(), seq)
		if err != nil {
			t.Fatal(err)
		}
		rest, _ := strings.CutPrefix(m.Subject, bucket.DefaultEventSubjectPrefix)
		shard, typ, _ := strings.Cut(rest, ".")
		if want := fmt.Sprint(bucket.EventShard(bucket.DefaultEventSubjectPrefix, typ, shards)); shard != want {
			t.Fatalf("the stream stored seq %d as %s: shard %s, bucket.EventShard says %s", seq, m.Subject, shard, want)
		}
	}

	from, to := now.Add(-3*time.Hour), now
	seen := map[int]int{}
	for shard, db := range dbs {
		got := readEvents(t, db, types, testEventTypes, from, to)
		for _, ev := range got {
			seen[ev.n]++
			if s := bucket.EventShard(bucket.DefaultEventSubjectPrefix, ev.Type, shards); s != shard {
				t.Fatalf("writer of shard %d stores event %d of type %s, shard %d", shard, ev.n, ev.Type, s)
			}
		}
		if n := ws[shard].Stats().Ingested; n != uint64(perShard[shard]) {
			t.Errorf("writer of shard %d ingested %d events, want its shard's %d", shard, n, perShard[shard])
		}
	}
	if len(seen) != len(evs) {
		t.Errorf("the shards hold %d distinct events, want %d", len(seen), len(evs))
	}
	for n, c := range seen {
		if c != 1 {
			t.Errorf("event %d stored %d times across the shards", n, c)
		}
	}
	total := map[countKey]int64{}
	for _, db := range dbs {
		for k, v := range readCounts(t, db, testEventTypes, from, to) {
			total[k] += v
		}
	}
	if want := wantCounts(evs); !maps.Equal(total, want) {
		t.Errorf("counts summed over the shards differ from the events published (%d vs %d minutes)", len(total), len(want))
	}
	if got := deadLettersBySeq(t, js, DefaultDLQStream); len(got) != 1 || got[rejectSeq] != 1 {
		t.Errorf("dead letters by origin seq: %v, want exactly one of seq %d", got, rejectSeq)
	}
}

func TestShardedConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Shards: 2, Shard: 2},
		{Shards: 2, Shard: -1},
		{Shards: 2, Subjects: []string{"a.>", "b.>"}},
		{Shards: 2, Subjects: []string{"events.*"}},
	} {
		if _, err := cfg.withDefaults(); err == nil {
			t.Errorf("config %+v: no error", cfg)
		}
	}
}
