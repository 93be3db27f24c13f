package main

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func parseSSE(t testing.TB, in string) []sseMessage {
	t.Helper()
	var out []sseMessage
	if err := readSSE(strings.NewReader(in), func(m sseMessage) error { out = append(out, m); return nil }); err != nil {
		t.Fatalf("readSSE(%q): %v", in, err)
	}
	return out
}

func TestReadSSE(t *testing.T) {
	cases := []struct {
		in   string
		want []sseMessage
	}{
		// The API's event messages and its reset, error and heartbeat lines.
		{"id: 7\ndata: {\"id\":\"a\"}\n\n: heartbeat\n\nevent: reset\ndata: {\"reason\":\"position_too_old\"}\n\n",
			[]sseMessage{{Data: `{"id":"a"}`, ID: "7"}, {Event: "reset", Data: `{"reason":"position_too_old"}`, ID: "7"}}},
		// The standard's examples: data lines join with newlines, one
		// leading space is dropped, CRLF and CR end lines, a field without
		// a colon has an empty value, an unfinished message is dropped.
		{"data: YHOO\ndata: +2\ndata: 10\n\n", []sseMessage{{Data: "YHOO\n+2\n10"}}},
		{"data:test\r\n\r\ndata:  test\r\rdata\n\n", []sseMessage{{Data: "test"}, {Data: " test"}, {Data: ""}}},
		{"\uFEFFid: 1\ndata: x\n\nevent: e\n\ndata: y\n\ndata: z", []sseMessage{{Data: "x", ID: "1"}, {Data: "y", ID: "1"}}},
		{"id: a\x00b\ndata: x\n\nretry: 5\nid\ndata: y\n\n", []sseMessage{{Data: "x"}, {Data: "y"}}},
	}
	for _, c := range cases {
		if got := parseSSE(t, c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("readSSE(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
	stop := errors.New("stop")
	if err := readSSE(strings.NewReader("data: a\n\ndata: b\n\n"), func(sseMessage) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("an error of fn is not returned: %v", err)
	}
	if err := readSSE(strings.NewReader("data: "+strings.Repeat("x", maxSSELine+1)), func(sseMessage) error { return nil }); err == nil {
		t.Error("a line past maxSSELine is accepted")
	}
}

// Whatever the input, the messages read encode (appendSSE) to a stream
// that reads back the same.
func FuzzReadSSE(f *testing.F) {
	for _, s := range []string{
		"id: 7\ndata: {\"id\":\"a\"}\n\n", ": heartbeat\n\n", "event: error\ndata: {\"reason\":\"slow_client\"}\n\n",
		"data:a\r\ndata:b\r\rdata\n\n", "\uFEFFid\x00: 1\ndata: x\n\n", "data: x\r", "event: e\nid: 9\n\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var first []sseMessage
		if readSSE(strings.NewReader(in), func(m sseMessage) error { first = append(first, m); return nil }) != nil {
			return // a line too long
		}
		var enc []byte
		for _, m := range first {
			enc = appendSSE(enc, m)
		}
		if again := parseSSE(t, string(enc)); !reflect.DeepEqual(first, again) && !(len(first) == 0 && len(again) == 0) {
			t.Fatalf("read %+v, encoded %q, read back %+v", first, enc, again)
		}
	})
}
