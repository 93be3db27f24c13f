package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
)

// eventsResponse is the shape appendEventsResponse writes, as
// json.Marshal would encode it; the tests hold the two together.
type eventsResponse struct {
	Events    []eventJSON    `json:"events"`
	NextPage  string         `json:"next_page,omitempty"`
	Trace     string         `json:"trace,omitempty"`
	Freshness *freshnessJSON `json:"freshness,omitempty"`
}

// marshalEventsResponse is the reference: the reflective encoding
// /v1/events used before appendEventsResponse.
func marshalEventsResponse(t testing.TB, a *api, events []schema.Event, nextPage, trace string, fresh *freshnessJSON) []byte {
	t.Helper()
	resp := eventsResponse{Events: make([]eventJSON, 0, len(events)), NextPage: nextPage, Trace: trace, Freshness: fresh}
	for i := range events {
		resp.Events = append(resp.Events, a.eventJSON(&events[i]))
	}
	b, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testEvent(t testing.TB, at time.Time, typ, user, author string, data []byte) schema.Event {
	t.Helper()
	id, err := bucket.NewTimeUUID(at, [8]byte{0x80, 1, 2, 3, 4, 5, 6, 7})
	if err != nil {
		t.Fatal(err)
	}
	return schema.Event{ID: id, Type: typ, User: user, Author: author, Data: data}
}

func TestAppendEventsResponseMatchesMarshal(t *testing.T) {
	a := &api{logger: slog.New(slog.DiscardHandler)}
	at := time.Date(2026, 11, 24, 2, 30, 0, 123456700, time.UTC)
	pending := uint64(40)
	fresh := &freshnessJSON{Shards: []shardFreshnessJSON{
		{Shard: 0, AppliedSeq: 12, AppliedTime: "2026-11-24T02:30:00.1Z", Pending: &pending},
		{Shard: 3, AppliedSeq: 0},
	}}
	events := []schema.Event{
		testEvent(t, at, "click", "u1", "", []byte(`{"n":1}`)),
		testEvent(t, at.Add(-time.Millisecond), "click", "", "au", []byte(`{ "n" : [1, 2],
			"s": "a<b>&c \u2028 é" }`)),
		testEvent(t, at.Add(-time.Second), "click", `quote" back\ <tag> &amp; é`+"\x00\xff", "", []byte(`not json`)),
		testEvent(t, at.Add(-time.Minute), "click", "", "", []byte(`{}`)),
		testEvent(t, at.Add(-time.Hour), "click", "", "", nil),
	}
	for _, tc := range []struct {
		name            string
		events          []schema.Event
		nextPage, trace string
		fresh           *freshnessJSON
	}{
		{"empty", nil, "", "", nil},
		{"events", events, "", "", nil},
		{"everything", events, "tok_en-1", "slices 1\nrows 5 \"x\"", fresh},
		{"nil shards", events[:1], "", "", &freshnessJSON{}},
		{"no shards", events[:1], "", "", &freshnessJSON{Shards: []shardFreshnessJSON{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := marshalEventsResponse(t, a, tc.events, tc.nextPage, tc.trace, tc.fresh)
			got := a.appendEventsResponse([]byte("prefix"), tc.events, tc.nextPage, tc.trace, tc.fresh)
			if !bytes.Equal(got[len("prefix"):], want) {
				t.Errorf("appendEventsResponse:\n got %s\nwant %s", got[len("prefix"):], want)
			}
		})
	}
}

// FuzzAppendEvent holds the hand-written encoding of one event to
// json.Marshal's for any user, author and data bytes.
func FuzzAppendEvent(f *testing.F) {
	for _, s := range [][3]string{
		{"u1", "", `{"n":1}`},
		{"", "a", `{ "n" : 1 }`},
		{"<x>&", "\u2028", `{"s":"<\u2029>"}`},
		{"\xff\x00", `"\`, `[1, 2`},
		{"é", "", "\t{\"a\":\"\xe2\x80\xa8\"}\n"},
		{"", "", ""},
		{"", "", `{"s":"spaces inside strings stay","t":"a\tb"}`},
		{"", "", `{"s":"a b" }`},
	} {
		f.Add(s[0], s[1], []byte(s[2]), int64(1_700_000_000_123_456))
	}
	a := &api{logger: slog.New(slog.DiscardHandler)}
	f.Fuzz(func(t *testing.T, user, author string, data []byte, micros int64) {
		at := time.UnixMicro(max(min(micros, 4_000_000_000_000_000), 0))
		ev := testEvent(t, at, "t", user, author, data)
		want := marshalEventsResponse(t, a, []schema.Event{ev}, "", "", nil)
		// Twice: encoded, then from the remembered encoding.
		for range 2 {
			got := a.appendEventsResponse(nil, []schema.Event{ev}, "", "", nil)
			if !bytes.Equal(got, want) {
				t.Fatalf("appendEventsResponse:\n got %q\nwant %q", got, want)
			}
		}
		got := a.appendEventsResponse(nil, []schema.Event{ev}, "", "", nil)
		if id := got[len(`{"events":[{"id":"`):][:36]; string(id) != ev.ID.String() {
			t.Fatalf("id %s, want %s", id, ev.ID)
		}
	})
}

// BenchmarkEventsResponse encodes a page of 50 events as the harness's
// latest-50 query reads them: the reflective encoding against the
// hand-written one.
func BenchmarkEventsResponse(b *testing.B) {
	a := &api{logger: slog.New(slog.DiscardHandler)}
	at := time.Date(2026, 11, 24, 2, 30, 0, 0, time.UTC)
	events := make([]schema.Event, 50)
	for i := range events {
		events[i] = testEvent(b, at.Add(-time.Duration(i)*time.Millisecond), "lt-0afa7538-t00", "user-12345", "",
			[]byte(`{"seq":123456,"run":"0afa7538","payload":"aGVsbG8gd29ybGQgaGVsbG8gd29ybGQgaGVsbG8gd29ybGQ=","n":[1,2,3],"ok":true}`))
	}
	pending := uint64(0)
	fresh := &freshnessJSON{}
	for s := range 8 {
		fresh.Shards = append(fresh.Shards, shardFreshnessJSON{Shard: s, AppliedSeq: 99991, AppliedTime: "2026-11-24T02:15:43.647099206Z", Pending: &pending})
	}
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			body := marshalEventsResponse(b, a, events, "", "", fresh)
			b.SetBytes(int64(len(body)))
		}
	})
	// "append" encodes every event each time (no event answered
	// before); "append again" answers the same events again, from
	// their remembered encodings (events_cache.go), as a dashboard's
	// next poll does for most of them.
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf = append(buf[:0], `{"events":[`...)
			for i := range events {
				buf = a.appendEvent(buf, &events[i])
			}
			buf = append(buf, ']')
			buf = appendFreshnessJSON(buf, fresh)
			b.SetBytes(int64(len(buf)))
		}
	})
	b.Run("append again", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf = a.appendEventsResponse(buf[:0], events, "", "", fresh)
			b.SetBytes(int64(len(buf)))
		}
	})
	// "append again parallel": as "append again", from every P at
	// once, as concurrent requests share the remembered encodings.
	b.Run("append again parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			var buf []byte
			for pb.Next() {
				buf = a.appendEventsResponse(buf[:0], events, "", "", fresh)
			}
		})
	})
}

// BenchmarkEventsResponseManyTypes answers the latest 50 of 40 types in
// turn, each answer with 14 events new since the type's last (the
// harness's latest-50 at 27,400 events/s over 20 types and 2,000
// requests/s: a type gains about 14 events between two of its queries):
// the remembered encodings are the megabytes of a real query service,
// not one page's kilobytes in the CPU's cache.
func BenchmarkEventsResponseManyTypes(b *testing.B) {
	a := &api{logger: slog.New(slog.DiscardHandler)}
	at := time.Date(2026, 11, 24, 2, 30, 0, 0, time.UTC)
	const types, page, fresh = 40, 50, 14
	// Each type's events, newest first, more than the benchmark reads.
	const perType = 4096
	events := make([][]schema.Event, types)
	for t := range events {
		typ := fmt.Sprintf("lt-0afa7538-t%02d", t)
		events[t] = make([]schema.Event, perType)
		for i := range events[t] {
			events[t][i] = testEvent(b, at.Add(-time.Duration(i)*time.Millisecond-time.Duration(t)*time.Microsecond), typ, fmt.Sprintf("user-%d", i%1000), "",
				[]byte(fmt.Sprintf(`{"seq":%d,"run":"0afa7538","payload":"aGVsbG8gd29ybGQgaGVsbG8gd29ybGQgaGVsbG8gd29ybGQ=","n":[1,2,3],"ok":true}`, i)))
		}
	}
	// The k-th answer of a type starts fresh events further from the
	// end: events[t][start : start+page], start falling by fresh.
	starts := make([]int, types)
	for t := range starts {
		starts[t] = perType - page
	}
	b.ReportAllocs()
	var buf []byte
	n := 0
	for b.Loop() {
		t := n % types
		n++
		if starts[t] < fresh {
			starts[t] = perType - page
		}
		starts[t] -= fresh
		buf = a.appendEventsResponse(buf[:0], events[t][starts[t]:starts[t]+page], "", "", nil)
	}
}

// FuzzValidJSON holds validJSON to json.Valid, and scanJSON's "spaced"
// to whether json.Compact changes the value.
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{
		`{"seq":1,"pad":"xx"}`, ` { "a" : [1, -2.5e+3, true, false, null, {}, [], "\u00e9\n"] } `, `[]`, `{}`, `""`, `0`, `-0.1E-2`,
		`01`, `1.`, `.5`, `-`, `1e`, `tru`, `nul`, `{"a"}`, `{"a":}`, `{,}`, `[1,]`, `[,1]`, `{"a":1,}`, `"\x"`, `"\u12g4"`, "\"\x01\"",
		"\"\xff\xfe\"", `[[[[]]]]`, `[1 2]`, `{"a":1 "b":2}`, `1 1`, ``, ` `, `"abc`, `{"a":"b"`, `[`, `}`, strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000), strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid %v", b, got, want)
		}
		valid, spaced := scanJSON(b)
		if !valid {
			return
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, b); err != nil {
			t.Fatal(err)
		}
		if want := !bytes.Equal(compact.Bytes(), b); spaced != want {
			t.Fatalf("scanJSON(%q): spaced %v; json.Compact gives %q", b, spaced, compact.Bytes())
		}
	})
}

func BenchmarkValidJSON(b *testing.B) {
	data := []byte(`{"seq":24989,"pad":"llllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllll","n":[1,2.5,-3e2],"ok":true,"u":null}`)
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			json.Valid(data)
		}
	})
	b.Run("validJSON", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			validJSON(data)
		}
	})
}
