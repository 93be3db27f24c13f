package apitest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The routes added with the live tail and the dashboard: one event by
// id, counts of several types, top types, a raw slice with its trace,
// storage stats and the live tail with its resume. Both paths run them.

func (s *suite) eventByID(t *testing.T) {
	typ := s.typ("view")
	var page eventPage
	s.mustGet(t, "/v1/events?type="+typ+"&limit=3&"+s.window(), 200, &page)
	if len(page.Events) != 3 {
		t.Fatalf("want 3 events of %s, got %d", typ, len(page.Events))
	}
	for _, e := range page.Events {
		var one struct {
			Event struct {
				ID   string          `json:"id"`
				Type string          `json:"type"`
				Data json.RawMessage `json:"data"`
			} `json:"event"`
		}
		// With the type, and without it (every type of the hour tried).
		for _, q := range []string{"?type=" + typ + "&complete=true", ""} {
			s.mustGet(t, "/v1/events/"+e.ID+q, 200, &one)
			if one.Event.ID != e.ID || one.Event.Type != typ || string(one.Event.Data) != string(e.Data) {
				t.Errorf("event %s%s: got %s %s %s", e.ID, q, one.Event.ID, one.Event.Type, one.Event.Data)
			}
		}
	}
	var pr problem
	// A version 1 UUID of the window that names no stored event.
	s.mustGet(t, "/v1/events/"+"00000000-0000-1000-8000-000000000000", 404, &pr)
	s.mustGet(t, "/v1/events/not-a-uuid", 400, &pr)
}

func (s *suite) multiCounts(t *testing.T) {
	var c struct {
		Series []struct {
			Type   string `json:"type"`
			Points []struct {
				Count int64 `json:"count"`
			} `json:"points"`
		} `json:"series"`
	}
	names := []string{"click", "buy", "view"}
	q := ""
	for _, n := range names {
		q += "type=" + s.typ(n) + "&"
	}
	s.mustGet(t, "/v1/counts?"+q+"step=1h&complete=true&"+s.window(), 200, &c)
	if len(c.Series) != len(names) {
		t.Fatalf("want %d series, got %d", len(names), len(c.Series))
	}
	for i, n := range names {
		var total int64
		for _, p := range c.Series[i].Points {
			total += p.Count
		}
		if c.Series[i].Type != s.typ(n) || total != eventsPerType {
			t.Errorf("series %d: type %s total %d, want %s %d", i, c.Series[i].Type, total, s.typ(n), eventsPerType)
		}
	}
}

func (s *suite) topTypes(t *testing.T) {
	var top struct {
		Types []struct {
			Type  string `json:"type"`
			Count int64  `json:"count"`
		} `json:"types"`
	}
	s.mustGet(t, "/v1/types/top?limit=1000&complete=true&"+s.window(), 200, &top)
	got := map[string]int64{}
	for _, tc := range top.Types {
		got[tc.Type] = tc.Count
	}
	for _, n := range suiteTypes {
		// Other runs sharing the stream add their own types, never to
		// this run's prefix.
		if got[s.typ(n)] != eventsPerType {
			t.Errorf("top types: %s counted %d, want %d (%v)", s.typ(n), got[s.typ(n)], eventsPerType, top.Types)
		}
	}
}

func (s *suite) slice(t *testing.T) {
	var page eventPage
	typ := s.typ("click")
	s.mustGet(t, "/v1/events?type="+typ+"&limit=1&"+s.window(), 200, &page)
	if len(page.Events) != 1 {
		t.Fatalf("no event of %s", typ)
	}
	at, err := time.Parse(time.RFC3339Nano, page.Events[0].Time)
	if err != nil {
		t.Fatal(err)
	}
	partition := at.UTC().Format("020106") + fmt.Sprintf("%02d", at.UTC().Hour()) + "|" + typ
	var sl struct {
		Table     string `json:"table"`
		Partition string `json:"partition"`
		Rows      []struct {
			Clustering map[string]string `json:"clustering"`
		} `json:"rows"`
		Trace *struct{} `json:"trace"`
	}
	s.mustGet(t, "/v1/slice?table=events&partition="+url.QueryEscape(partition)+"&limit=10000&trace=true&complete=true", 200, &sl)
	if sl.Table != "events" || sl.Partition != partition || sl.Trace == nil {
		t.Errorf("slice: table %q partition %q trace %v", sl.Table, sl.Partition, sl.Trace != nil)
	}
	if !slices.ContainsFunc(sl.Rows, func(r struct {
		Clustering map[string]string `json:"clustering"`
	}) bool {
		return r.Clustering["event_id"] == page.Events[0].ID
	}) {
		t.Errorf("slice of %s lacks event %s: %d rows", partition, page.Events[0].ID, len(sl.Rows))
	}
	// A fan-out table (replicated on every storage node): the reader
	// follows the author.
	var fl struct {
		Rows []struct {
			Clustering map[string]string `json:"clustering"`
		} `json:"rows"`
	}
	s.mustGet(t, "/v1/slice?table=following&partition="+url.QueryEscape(s.user("reader"))+"&complete=true", 200, &fl)
	if len(fl.Rows) != 1 {
		t.Errorf("slice of following/%s: %d rows, want 1 (the author)", s.user("reader"), len(fl.Rows))
	}
}

func (s *suite) stats(t *testing.T) {
	var st struct {
		Storage struct {
			Tables []struct {
				Name     string `json:"name"`
				SSTables int    `json:"sstables"`
			} `json:"tables"`
			Batches int64 `json:"batches"`
		} `json:"storage"`
		Consumers []struct {
			Name       string `json:"name"`
			AppliedSeq uint64 `json:"applied_seq"`
		} `json:"consumers"`
		Tail *struct {
			NewestSeq uint64 `json:"newest_seq"`
		} `json:"tail"`
	}
	s.mustGet(t, "/v1/stats?complete=true", 200, &st)
	if !slices.ContainsFunc(st.Storage.Tables, func(tb struct {
		Name     string `json:"name"`
		SSTables int    `json:"sstables"`
	}) bool {
		return tb.Name == "events"
	}) {
		t.Errorf("stats: no events table in %+v", st.Storage.Tables)
	}
	if st.Storage.Batches == 0 {
		t.Errorf("stats: storage wrote no batches after the suite's events")
	}
	writers := 0
	for _, c := range st.Consumers {
		if c.Name == "writer" {
			writers++
			if c.AppliedSeq == 0 {
				t.Errorf("stats: writer consumer has applied nothing: %+v", c)
			}
		}
	}
	if writers == 0 {
		t.Errorf("stats: no writer consumer in %+v", st.Consumers)
	}
	if st.Tail == nil {
		t.Errorf("stats: no live tail")
	}
}

// tailEvent is one event read from /v1/events/stream.
type tailEvent struct {
	seq  uint64
	data struct {
		ID   string `json:"id"`
		Type string `json:"type"`
		Data struct {
			N int `json:"n"`
		} `json:"data"`
	}
}

// openTail opens the live tail of typ, resuming after lastID when not
// empty, and returns a channel of its events; the stream closes with
// the test.
func (s *suite) openTail(t *testing.T, typ, lastID string) <-chan tailEvent {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.tg.BaseURL+"/v1/events/stream?type="+typ, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.tg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.tg.Token)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		resp.Body.Close()
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan tailEvent, 64)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		var ev tailEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				ev.seq, _ = strconv.ParseUint(strings.TrimPrefix(line, "id: "), 10, 64)
			case strings.HasPrefix(line, "data: ") && ev.seq != 0:
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.data) == nil {
					out <- ev
				}
				ev = tailEvent{}
			case line == "":
				ev = tailEvent{}
			}
		}
	}()
	return out
}

// tail follows a type, publishes to it, sees the event arrive, leaves,
// publishes again and resumes with Last-Event-ID: the events published
// since come in order, and nothing at or before the resume position.
func (s *suite) tail(t *testing.T) {
	typ := s.typ("tail")
	nc, err := nats.Connect(s.tg.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	pub := func(n int) {
		t.Helper()
		body := fmt.Sprintf(`{"time":%q,"user":"u1","data":{"n":%d}}`, time.Now().UTC().Format(time.RFC3339Nano), n)
		if _, err := js.Publish(t.Context(), "events."+typ, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	next := func(ch <-chan tailEvent) tailEvent {
		t.Helper()
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("stream ended")
			}
			return ev
		case <-time.After(30 * time.Second):
			t.Fatal("no event on the live tail within 30s")
		}
		panic("unreachable")
	}
	// A stream, once open, gets what is stored after it; publishing
	// until the first arrives covers the subscription's start on a
	// remote relay.
	first := s.openTail(t, typ, "")
	var got tailEvent
	for n := 1; ; n++ {
		pub(n)
		select {
		case got = <-first:
		case <-time.After(2 * time.Second):
			continue
		}
		break
	}
	if got.data.Type != typ {
		t.Fatalf("tail of %s delivered %+v", typ, got.data)
	}
	// Publish 1000 and 1001 and resume after the first event: the
	// first stream's other events may still be on their way, but none
	// of them is before the resume position.
	last := got
	pub(1000)
	pub(1001)
	resumed := s.openTail(t, typ, strconv.FormatUint(last.seq, 10))
	var a, b tailEvent
	for a.data.Data.N < 1000 {
		a = next(resumed)
		if a.seq <= last.seq {
			t.Fatalf("resumed after %d, got %d", last.seq, a.seq)
		}
	}
	b = next(resumed)
	if a.data.Data.N != 1000 || b.data.Data.N != 1001 || a.seq <= last.seq || b.seq <= a.seq {
		t.Errorf("resumed after %d: got n=%d seq %d, n=%d seq %d; want 1000 and 1001 after it", last.seq, a.data.Data.N, a.seq, b.data.Data.N, b.seq)
	}
}
