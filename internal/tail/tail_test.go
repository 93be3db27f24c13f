package tail

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventide/eventide/bucket"
)

var base = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func events(t *testing.T, typ string, seqs ...uint64) []Event {
	t.Helper()
	out := make([]Event, 0, len(seqs))
	for _, s := range seqs {
		id, err := bucket.NewTimeUUID(base.Add(time.Duration(s)*time.Second), [8]byte{7: byte(s)})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Event{Seq: s, ID: id, Type: typ, Data: fmt.Appendf(nil, `{"seq":%d}`, s)})
	}
	return out
}

// seqs takes what s has queued, as "type:seq" strings.
func take(t *testing.T, s *Subscription) ([]string, error) {
	t.Helper()
	evs, err := s.Take(nil)
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s:%d", e.Type, e.Seq))
	}
	return out, err
}

func TestLiveAndFilter(t *testing.T) {
	b := New(Options{}, 0)
	all, err := b.Subscribe(nil, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	clicks, err := b.Subscribe([]string{"click"}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	b.Publish(events(t, "click", 1, 2))
	b.Publish(events(t, "view", 3))
	b.Publish(events(t, "click", 4))
	<-all.Ready()
	got, err := take(t, all)
	if err != nil || strings.Join(got, " ") != "click:1 click:2 view:3 click:4" {
		t.Errorf("every type: %v %v", got, err)
	}
	got, _ = take(t, clicks)
	if strings.Join(got, " ") != "click:1 click:2 click:4" {
		t.Errorf("click only: %v", got)
	}
	// Publish copied the data: the caller may reuse its buffers.
	evs := events(t, "click", 5)
	b.Publish(evs)
	evs[0].Data[0] = 'X'
	got2, _ := all.Take(nil)
	if string(got2[0].Data) != `{"seq":5}` || !strings.Contains(string(got2[0].JSON()), `"data":{"seq":5}`) {
		t.Errorf("event data %q / JSON %s, want the copy of what was published", got2[0].Data, got2[0].JSON())
	}
}

// TestResume: a client resuming after a position gets exactly the events
// after it, then the live ones; from before the ring it is told of the gap.
func TestResume(t *testing.T) {
	b := New(Options{Replay: 5}, 10) // events up to 10 were stored before
	for s := uint64(11); s <= 18; s++ {
		typ := "click"
		if s%2 == 0 {
			typ = "view"
		}
		b.Publish(events(t, typ, s))
	}
	// The ring holds 14..18.
	sub, err := b.Subscribe(nil, 15, true)
	if err != nil {
		t.Fatal(err)
	}
	if gap, _ := sub.Gap(); gap {
		t.Error("resume from 15: gap reported, want none")
	}
	b.Publish(events(t, "click", 19))
	got, _ := take(t, sub)
	if strings.Join(got, " ") != "view:16 click:17 view:18 click:19" {
		t.Errorf("resume from 15: %v", got)
	}
	// The ring holds 15..19 now.
	sub, _ = b.Subscribe([]string{"view"}, 14, true)
	if gap, _ := sub.Gap(); gap {
		t.Error("resume from 14 (the ring's floor): gap reported, want none")
	}
	if got, _ := take(t, sub); strings.Join(got, " ") != "view:16 view:18" {
		t.Errorf("resume views from 14: %v", got)
	}
	sub, _ = b.Subscribe(nil, 13, true)
	gap, oldest := sub.Gap()
	if !gap || oldest != 15 {
		t.Errorf("resume from 13: gap %v oldest %d, want a gap from 15", gap, oldest)
	}
	if got, _ := take(t, sub); len(got) != 5 {
		t.Errorf("resume from 13: %v, want the 5 the ring holds", got)
	}
	fresh := New(Options{}, 100)
	sub, _ = fresh.Subscribe(nil, 99, true)
	if gap, _ := sub.Gap(); !gap {
		t.Error("resume from before the process started: no gap reported")
	}
	sub, _ = fresh.Subscribe(nil, 100, true)
	if gap, _ := sub.Gap(); gap {
		t.Error("resume from the start position: gap reported")
	}
}

// TestSlowClientDropped: a subscriber that never takes is dropped once its
// queue passes the bound, its queue is freed, and the others go on.
func TestSlowClientDropped(t *testing.T) {
	b := New(Options{ClientBuffer: 10, ClientBufferBytes: 1 << 20, Replay: 100}, 0)
	slow, _ := b.Subscribe(nil, 0, false)
	fast, _ := b.Subscribe(nil, 0, false)
	var seen int
	for s := uint64(1); s <= 100000; s++ {
		b.Publish(events(t, "click", s))
		if len(slow.queue) > 10 {
			t.Fatalf("seq %d: the slow client holds %d events, more than its buffer of 10", s, len(slow.queue))
		}
		evs, err := fast.Take(nil)
		if err != nil {
			t.Fatalf("seq %d: the fast client was dropped: %v", s, err)
		}
		seen += len(evs)
	}
	if seen != 100000 {
		t.Errorf("the fast client got %d events, want 100000", seen)
	}
	if _, err := slow.Take(nil); !errors.Is(err, ErrSlowClient) {
		t.Fatalf("slow client: Take error %v, want ErrSlowClient", err)
	}
	if cap(slow.queue) > 16 || len(slow.queue) != 0 {
		t.Errorf("slow client's queue: len %d cap %d, want it freed", len(slow.queue), cap(slow.queue))
	}
	// The dropped one counts until its owner closes it.
	if st := b.Stats(); st.Clients != 2 {
		t.Errorf("before the slow client is closed: %+v, want 2 clients", st)
	}
	slow.Close()
	st := b.Stats()
	if st.Clients != 1 || st.SlowDisconnects != 1 || st.ReplayEvents != 100 || st.OldestSeq != 99901 || st.NewestSeq != 100000 {
		t.Errorf("stats %+v", st)
	}
	// Bytes bound too: one large event passes a small byte budget.
	b2 := New(Options{ClientBufferBytes: 1000}, 0)
	s2, _ := b2.Subscribe(nil, 0, false)
	big := events(t, "click", 1)
	big[0].Data = []byte(`"` + strings.Repeat("x", 2000) + `"`)
	b2.Publish(big)
	if _, err := s2.Take(nil); !errors.Is(err, ErrSlowClient) {
		t.Errorf("past the byte bound: %v, want ErrSlowClient", err)
	}
}

func TestReplayBytesBound(t *testing.T) {
	b := New(Options{Replay: 1000, ReplayBytes: 10 * (100 + 96)}, 0)
	for s := uint64(1); s <= 50; s++ {
		e := events(t, "click", s)
		e[0].Data = []byte(strings.Repeat("1", 100))
		b.Publish(e)
	}
	if st := b.Stats(); st.ReplayEvents > 10 || st.NewestSeq != 50 {
		t.Errorf("ring of at most 10 events' bytes: %+v", st)
	}
}

func TestMaxClientsAndClose(t *testing.T) {
	b := New(Options{MaxClients: 2}, 0)
	s1, _ := b.Subscribe(nil, 0, false)
	s2, _ := b.Subscribe(nil, 0, false)
	if _, err := b.Subscribe(nil, 0, false); !errors.Is(err, ErrTooManyClients) {
		t.Fatalf("third client: %v, want ErrTooManyClients", err)
	}
	s1.Close()
	s1.Close()
	s3, err := b.Subscribe(nil, 0, false)
	if err != nil {
		t.Fatalf("after one left: %v", err)
	}
	b.Close()
	for _, s := range []*Subscription{s2, s3} {
		<-s.Ready()
		if _, err := s.Take(nil); !errors.Is(err, ErrClosed) {
			t.Errorf("after Close: %v, want ErrClosed", err)
		}
	}
	if _, err := b.Subscribe(nil, 0, false); !errors.Is(err, ErrClosed) {
		t.Errorf("Subscribe after Close: %v", err)
	}
}

func TestEventJSON(t *testing.T) {
	id := uuid.MustParse("7ab09000-e65b-11f1-8a51-2d4e6f01b2c3")
	e := &Event{Seq: 3, ID: id, Type: "click", User: "u1", Data: []byte(`{"a":1}`)}
	want := `{"id":"7ab09000-e65b-11f1-8a51-2d4e6f01b2c3","type":"click","time":"2026-11-22T10:00:00Z","user":"u1","data":{"a":1}}`
	if got := string(e.JSON()); got != want {
		t.Errorf("JSON\n %s, want\n %s", got, want)
	}
	bad := &Event{Seq: 3, ID: id, Type: "click", Data: []byte("not json")}
	if got := string(bad.JSON()); !strings.Contains(got, `"data":"not json"`) {
		t.Errorf("non-JSON data: %s", got)
	}
	if !slices.Equal(e.JSON(), e.JSON()) {
		t.Error("JSON differs between calls")
	}
}
