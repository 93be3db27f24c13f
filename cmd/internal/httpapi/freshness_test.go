package httpapi

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/eventide/eventide/writer"
)

type freshnessBody struct {
	Shards []struct {
		Shard       int     `json:"shard"`
		AppliedSeq  uint64  `json:"applied_seq"`
		AppliedTime string  `json:"applied_time"`
		Pending     *uint64 `json:"pending"`
	} `json:"shards"`
}

// writerFreshness is what cmd/ingest gives the handler: the writer's
// consumer, as shard 0.
func writerFreshness(w *writer.Writer) FreshnessSource {
	return FreshnessFunc(func() []ShardFreshness {
		st := w.Stats()
		return []ShardFreshness{{AppliedSeq: st.LastAppliedSeq, AppliedTime: st.LastAppliedTime, Pending: st.Pending, PendingKnown: st.PendingKnown}}
	})
}

// fixedTimelineTime and fixedFreshness stand in for the fan-out worker,
// which dlqFixture does not run: the timeline endpoints must report their
// own source, not the writer's.
var fixedTimelineTime = time.Date(2026, 11, 22, 12, 3, 7, 500, time.UTC)

var fixedFreshness = FreshnessFunc(func() []ShardFreshness {
	return []ShardFreshness{{AppliedSeq: 1234, AppliedTime: fixedTimelineTime, Pending: 40, PendingKnown: true}}
})

// TestFreshness: with a real writer over embedded NATS, /v1/events and
// /v1/counts say what they reflect, the writer's checkpoint, its message's
// stream time and no backlog once it has caught up, and hold every event
// up to it; the timeline endpoints report the fan-out's source. (That
// pending counts a real backlog is writer/consumer's TestStatsFreshness.)
func TestFreshness(t *testing.T) {
	f, js, _ := dlqFixture(t)
	now := time.Now().UTC()
	var last uint64
	for i := range 3 {
		ack, err := js.Publish(t.Context(), "events.click", fmt.Appendf(nil, `{"time":%q,"data":{"fresh":%d}}`, now.Format(time.RFC3339Nano), i))
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) { // polling with a deadline
		if st := f.writer.Stats(); st.LastAppliedSeq == last && st.PendingKnown && st.Pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writer at %+v after 20s, want sequence %d and nothing pending", f.writer.Stats(), last)
		}
	}
	stream, err := js.Stream(t.Context(), writer.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.GetMsg(t.Context(), last)
	if err != nil {
		t.Fatal(err)
	}
	wantTime := msg.Time.UTC().Format(time.RFC3339Nano)
	check := func(target string, fb *freshnessBody, seq uint64, at string, pending uint64) {
		t.Helper()
		if fb == nil || len(fb.Shards) != 1 {
			t.Fatalf("%s: freshness %+v, want one shard", target, fb)
		}
		s := fb.Shards[0]
		if s.Shard != 0 || s.AppliedSeq != seq || s.AppliedTime != at || s.Pending == nil || *s.Pending != pending {
			t.Errorf("%s: freshness shard %+v (pending %v), want shard 0 at sequence %d, time %s, pending %d",
				target, s, s.Pending, seq, at, pending)
		}
	}

	var eb eventsBody
	get(t, f, "/v1/events?type=click", 200, "application/json", &eb)
	check("/v1/events", eb.Freshness, last, wantTime, 0)
	fresh := 0
	for _, e := range eb.Events {
		if string(e.Data) == `{"fresh":0}` || string(e.Data) == `{"fresh":1}` || string(e.Data) == `{"fresh":2}` {
			fresh++
		}
	}
	if fresh != 3 {
		t.Errorf("/v1/events holds %d of the 3 events up to its applied_seq", fresh)
	}
	var cb countsBody
	get(t, f, "/v1/counts?type=click", 200, "application/json", &cb)
	check("/v1/counts", cb.Freshness, last, wantTime, 0)

	tlTime := fixedTimelineTime.Format(time.RFC3339Nano)
	var tb timelineBody
	get(t, f, "/v1/timeline/nobody", 200, "application/json", &tb)
	check("/v1/timeline", tb.Freshness, 1234, tlTime, 40)
	var fb followsBody
	get(t, f, "/v1/users/nobody/followers", 200, "application/json", &fb)
	check("/v1/users/{user}/followers", fb.Freshness, 1234, tlTime, 40)
	get(t, f, "/v1/users/nobody/following", 200, "application/json", &fb)
	check("/v1/users/{user}/following", fb.Freshness, 1234, tlTime, 40)
}

// TestFreshnessUnknown: before anything is applied or counted, a shard
// reports sequence 0 and leaves out what it does not know, which the
// spec allows.
func TestFreshnessUnknown(t *testing.T) {
	src := FreshnessFunc(func() []ShardFreshness { return []ShardFreshness{{}} })
	got := freshnessOf(src)
	if len(got.Shards) != 1 || got.Shards[0].AppliedSeq != 0 || got.Shards[0].AppliedTime != "" || got.Shards[0].Pending != nil {
		t.Errorf("freshnessOf(nothing known) = %+v, want shard 0 at sequence 0 without time or pending", got)
	}
	if freshnessOf(nil) != nil {
		t.Error("freshnessOf(nil) is not nil: a handler without a source must leave freshness out")
	}
}

// TestFreshnessMemo: requests finding the positions unchanged share one
// encoding; a changed position (sequence, time, pending, or a shard
// more or less) is reported at once, never the memo's older one.
func TestFreshnessMemo(t *testing.T) {
	at := time.Date(2026, 11, 24, 4, 0, 0, 0, time.UTC)
	cur := []ShardFreshness{{Shard: 0, AppliedSeq: 10, AppliedTime: at}, {Shard: 1, AppliedSeq: 7, Pending: 3, PendingKnown: true}}
	src := FreshnessFunc(func() []ShardFreshness { return cur })
	var m freshnessMemo
	first := m.of(src)
	if want := freshnessOf(src); !reflect.DeepEqual(first, want) {
		t.Fatalf("memo = %+v, want %+v", first, want)
	}
	cur = slices.Clone(cur) // equal positions in another slice
	if again := m.of(src); again != first {
		t.Error("unchanged positions were encoded again")
	}
	for _, change := range []func([]ShardFreshness) []ShardFreshness{
		func(s []ShardFreshness) []ShardFreshness { s[0].AppliedSeq++; return s },
		func(s []ShardFreshness) []ShardFreshness {
			s[0].AppliedTime = s[0].AppliedTime.Add(time.Second)
			return s
		},
		func(s []ShardFreshness) []ShardFreshness { s[1].Pending = 0; return s },
		func(s []ShardFreshness) []ShardFreshness { s[1].PendingKnown = false; return s },
		func(s []ShardFreshness) []ShardFreshness { return s[:1] },
		func(s []ShardFreshness) []ShardFreshness { return append(s, ShardFreshness{Shard: 2}) },
	} {
		// The source may change the slice it returned before: the memo
		// must hold its own copy.
		cur = change(cur)
		got, want := m.of(src), freshnessOf(src)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("after a change: memo = %+v, want %+v", got, want)
		}
	}
	if m.of(nil) != nil {
		t.Error("a memo of no source is not nil")
	}
}
