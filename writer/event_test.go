package writer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output in testdata files")

// parseTestNow is the validator's clock in testdata/parse.
var parseTestNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// parseTestValidator is the configuration testdata/parse runs under.
func parseTestValidator(t testing.TB) *validator {
	types, err := schema.ParseEventTypes("*:ttl=168h,click:ttl=24h,view,hot:sub=4,short:ttl=1m")
	if err != nil {
		t.Fatal(err)
	}
	types.AllowOnlyListed = true
	cfg, err := Config{Subjects: []string{"events.>", "raw"}, MaxPayload: 256, Types: types}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return newValidator(cfg)
}

// parseCase is one case of testdata/parse:
//
//	parse subject=<subject> [seq=<n>]
//	<body, one or more lines>
//	----
//	<expected output>
//
// The output is "ok partition=... id=... time=... ttl=... user=... author=...
// data=..." or "reject <reason>: <message>". Lines starting with # outside a
// case are comments. Run with -rewrite to regenerate the expected output.
type parseCase struct {
	leading  []string // comment and blank lines before the case
	line     int
	header   string
	subject  string
	seq      uint64
	body     string
	expected string
}

func readParseCases(t *testing.T, path string) (cases []parseCase, trailing []string) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	lineNo := 0
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		lineNo++
		return sc.Text(), true
	}
	for {
		line, ok := next()
		if !ok {
			break
		}
		if line == "" || strings.HasPrefix(line, "#") {
			trailing = append(trailing, line)
			continue
		}
		c := parseCase{leading: trailing, line: lineNo, header: line, seq: 1}
		trailing = nil
		fields := strings.Fields(line)
		if fields[0] != "parse" {
			t.Fatalf("%s:%d: unknown command %q", path, lineNo, fields[0])
		}
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "subject":
				c.subject = v
			case "seq":
				if c.seq, err = strconv.ParseUint(v, 10, 64); err != nil {
					t.Fatalf("%s:%d: %v", path, lineNo, err)
				}
			default:
				t.Fatalf("%s:%d: unknown argument %q", path, lineNo, k)
			}
		}
		var body []string
		for {
			l, ok := next()
			if !ok {
				t.Fatalf("%s:%d: case has no ----", path, c.line)
			}
			if l == "----" {
				break
			}
			body = append(body, l)
		}
		c.body = strings.Join(body, "\n")
		var out []string
		for {
			l, ok := next()
			if !ok || l == "" {
				break
			}
			out = append(out, l)
		}
		c.expected = strings.Join(out, "\n")
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases, trailing
}

// describeParse is the output of one case.
func describeParse(v *validator, subject string, body []byte, seq uint64) string {
	p, rej := v.parse(subject, body, msgIdentity{stream: DefaultStream, seq: seq}, parseTestNow)
	if rej != nil {
		return "reject " + rej.Error()
	}
	pk, err := bucket.PartitionKeyFor(p.event.ID, p.event.Type, p.subPartitions)
	if err != nil {
		return "BUG: " + err.Error()
	}
	return fmt.Sprintf("ok partition=%s id=%s time=%s ttl=%d user=%q author=%q data=%s",
		pk, p.event.ID, p.event.Time().Format(time.RFC3339Nano), p.remainingTTLSeconds,
		p.event.User, p.event.Author, p.event.Data)
}

// expand turns placeholders in a body into what is awkward to spell out:
// "<pad:N>" into N bytes of 'x', "<nest:N>" into N nested empty arrays
// ("[[...]]"), "<byte:HH>" into the byte with hex value HH.
func expand(body string) string {
	for {
		i := strings.Index(body, "<")
		if i < 0 {
			return body
		}
		j := strings.Index(body[i:], ">")
		name, arg, ok := strings.Cut(body[i+1:i+max(j, 0)], ":")
		if j < 0 || !ok || (name != "pad" && name != "nest" && name != "byte") {
			return body[:i+1] + expand(body[i+1:])
		}
		var repl string
		switch name {
		case "pad", "nest":
			n, err := strconv.Atoi(arg)
			if err != nil {
				panic(err)
			}
			if name == "pad" {
				repl = strings.Repeat("x", n)
			} else {
				repl = strings.Repeat("[", n) + strings.Repeat("]", n)
			}
		case "byte":
			b, err := strconv.ParseUint(arg, 16, 8)
			if err != nil {
				panic(err)
			}
			repl = string([]byte{byte(b)})
		}
		body = body[:i] + repl + body[i+j+1:]
	}
}

func TestParseEvents(t *testing.T) {
	const path = "testdata/parse"
	v := parseTestValidator(t)
	cases, trailing := readParseCases(t, path)
	reasonsSeen := map[string]bool{}
	var out bytes.Buffer
	for _, c := range cases {
		for _, l := range c.leading {
			out.WriteString(l + "\n")
		}
		got := describeParse(v, c.subject, []byte(expand(c.body)), c.seq)
		if r, ok := strings.CutPrefix(got, "reject "); ok {
			reason, _, _ := strings.Cut(r, ":")
			reasonsSeen[reason] = true
		}
		if !*rewrite && got != c.expected {
			t.Errorf("%s:%d: %s\n%s\ngot:  %s\nwant: %s", path, c.line, c.header, c.body, got, c.expected)
		}
		fmt.Fprintf(&out, "%s\n%s\n----\n%s\n\n", c.header, c.body, got)
	}
	for _, l := range trailing {
		out.WriteString(l + "\n")
	}
	if *rewrite {
		if err := os.WriteFile(path, append(bytes.TrimRight(out.Bytes(), "\n"), '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, r := range allReasons {
		if !reasonsSeen[r] {
			t.Errorf("no case in %s is rejected with %s", path, r)
		}
	}
}

// TestGeneratedIDIsStable pins the derivation of ids for events sent
// without one: it is part of what makes a replay idempotent, so changing it
// would duplicate every event replayed across the change.
func TestGeneratedIDIsStable(t *testing.T) {
	v := parseTestValidator(t)
	body := []byte(`{"type":"click","time":"2026-01-01T11:00:00.123456789Z"}`)
	a, rej := v.parse("events.click", body, msgIdentity{stream: "EVENTS", seq: 42}, parseTestNow)
	if rej != nil {
		t.Fatal(rej)
	}
	b, _ := v.parse("events.click", body, msgIdentity{stream: "EVENTS", seq: 42}, parseTestNow.Add(time.Minute))
	if a.event.ID != b.event.ID {
		t.Fatalf("same message, different ids: %s, %s", a.event.ID, b.event.ID)
	}
	for _, other := range []msgIdentity{{stream: "EVENTS", seq: 43}, {stream: "OTHER", seq: 42}, {stream: "EVENTS", epoch: 1, seq: 42}} {
		c, _ := v.parse("events.click", body, other, parseTestNow)
		if c.event.ID == a.event.ID {
			t.Errorf("%+v has the id of seq 42 in epoch 0: %s", other, c.event.ID)
		}
	}
	if got, want := a.event.ID.String(), "04470e87-e701-11f0-ac56-69ad5b1757b9"; got != want {
		t.Errorf("id = %s, want %s (the derivation changed)", got, want)
	}
	if got := a.event.Time(); !got.Equal(time.Date(2026, 1, 1, 11, 0, 0, 123456700, time.UTC)) {
		t.Errorf("id time = %s, want the event time at 100 ns precision", got.Format(time.RFC3339Nano))
	}
}

func TestSubjectType(t *testing.T) {
	cfg, err := Config{Subjects: []string{"events.>", "tenant.*.ev.>", "raw"}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	v := newValidator(cfg)
	for _, tc := range []struct {
		subject, typ string
		ok           bool
	}{
		{"events.click", "click", true},
		{"events.a.b", "a.b", true},
		{"events.Click", "Click", true},
		{"tenant.t1.ev.view", "view", true},
		{"tenant.t1.other.view", "", false},
		{"raw", "", false},
		{"events", "", false},
	} {
		typ, ok := v.subjectType(tc.subject)
		if typ != tc.typ || ok != tc.ok {
			t.Errorf("subjectType(%q) = %q, %v; want %q, %v", tc.subject, typ, ok, tc.typ, tc.ok)
		}
	}
	if got := v.dlqType("events.Click"); got != "unknown" {
		t.Errorf("dlqType(events.Click) = %q, want unknown", got)
	}
}

func FuzzParseEvent(f *testing.F) {
	f.Add("events.click", []byte(`{"time":"2026-01-01T11:59:00Z","data":{"a":1}}`))
	f.Add("events.hot", []byte(`{"id":"9b6e4a79-e6f0-11f0-8d80-8f0e53b0fc72","ttl":60,"user":"u"}`))
	f.Add("raw", []byte(`{"type":"view","time":1767268740000,"author":"a","data":null}`))
	f.Add("events.x", []byte(`[1,2]`))
	v := parseTestValidator(f)
	f.Fuzz(func(t *testing.T, subject string, body []byte) {
		p, rej := v.parse(subject, body, msgIdentity{stream: DefaultStream, seq: 1}, parseTestNow)
		if rej != nil {
			if !isReason(rej.reason) || rej.message == "" {
				t.Fatalf("bad rejection %q", rej.Error())
			}
			return
		}
		if p.event.ID.Version() != 1 {
			t.Fatalf("id %s is not version 1", p.event.ID)
		}
		if err := bucket.ValidateEventType(p.event.Type); err != nil {
			t.Fatal(err)
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(p.event.Data, &obj); err != nil {
			t.Fatalf("data %q is not a JSON object: %v", p.event.Data, err)
		}
		if p.remainingTTLSeconds < 1 {
			t.Fatalf("remaining ttl %d", p.remainingTTLSeconds)
		}
		if tm := p.event.Time(); tm.After(parseTestNow.Add(DefaultMaxSkew)) {
			t.Fatalf("time %s is too far ahead", tm)
		}
	})
}

func isReason(r string) bool {
	for _, x := range allReasons {
		if x == r {
			return true
		}
	}
	return false
}

// FuzzStoredEventIsJSON: whatever body the writer accepts, the event it
// stores, read back from a real storage directory and rendered as the
// HTTP API renders it, is valid JSON and valid UTF-8 that encoding/json
// decodes into any, with user, author and data unchanged.
func FuzzStoredEventIsJSON(f *testing.F) {
	f.Add("events.view", []byte(`{"time":"2026-01-01T11:59:00Z","user":"u\u00e9","data":{"s":"\ud800","n":[1,{"x":null}]}}`))
	f.Add("events.click", []byte(`{"time":1767268740000,"author":"a\"b","data":{"k":"\u0000"}}`))
	f.Add("events.view", []byte("{\"time\":\"2026-01-01T11:59:00Z\",\"data\":{\"s\":\"\xff\"}}"))
	f.Add("events.view", []byte(`{"time":"2026-01-01T11:59:00Z","data":{"a":[[[[[[[[[[]]]]]]]]]]}}`))
	f.Add("events.view", []byte(`{"time":"2026-01-01T11:59:00Z","data":{"big":1e400}}`))
	v := parseTestValidator(f)
	db, err := storage.Open(f.TempDir(), storage.DefaultOptions())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	if err := catalog.EnsureBuiltinTables(db); err != nil {
		f.Fatal(err)
	}
	seq := uint64(0)
	f.Fuzz(func(t *testing.T, subject string, body []byte) {
		seq++
		p, rej := v.parse(subject, body, msgIdentity{stream: DefaultStream, seq: seq}, parseTestNow)
		if rej != nil {
			return
		}
		var b storage.Batch
		if err := catalog.PutEvent(&b, &p.event, p.subPartitions, p.remainingTTLSeconds, db.NowMicros()); err != nil {
			t.Fatalf("accepted event does not store: %v", err)
		}
		if err := db.Apply(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		pk, err := bucket.PartitionKeyFor(p.event.ID, p.event.Type, p.subPartitions)
		if err != nil {
			t.Fatal(err)
		}
		partition := []byte(pk.String())
		ck := schema.EventClusteringKey(p.event.ID)
		it, err := db.Slice(context.Background(), storage.SliceQuery{Table: schema.EventsTable, Partition: partition,
			Start: storage.Bound{Key: ck, Inclusive: true}, End: storage.Bound{Key: ck, Inclusive: true}, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		if !it.Next() {
			t.Fatalf("stored event %s not found (err %v)", p.event.ID, it.Err())
		}
		ev, err := catalog.DecodeEvent(partition, it.Row())
		if err != nil {
			t.Fatal(err)
		}
		// As cmd/internal/httpapi renders an event.
		rendered, err := json.Marshal(struct {
			ID     string          `json:"id"`
			Type   string          `json:"type"`
			Time   string          `json:"time"`
			User   string          `json:"user,omitempty"`
			Author string          `json:"author,omitempty"`
			Data   json.RawMessage `json:"data"`
		}{ev.ID.String(), ev.Type, ev.Time().UTC().Format(time.RFC3339Nano), ev.User, ev.Author, json.RawMessage(ev.Data)})
		if err != nil {
			t.Fatalf("stored event of body %q does not render: %v", body, err)
		}
		if !json.Valid(rendered) || !utf8.Valid(rendered) {
			t.Fatalf("stored event of body %q renders as %q: not valid JSON in UTF-8", body, rendered)
		}
		var back struct {
			User, Author string
			Data         json.RawMessage
		}
		if err := json.Unmarshal(rendered, &back); err != nil {
			t.Fatal(err)
		}
		// As a generic client decodes a page (into any): numbers must fit
		// a float64.
		var generic any
		if err := json.Unmarshal(rendered, &generic); err != nil {
			t.Fatalf("stored event of body %q renders as %q, which encoding/json cannot decode into any: %v", body, rendered, err)
		}
		if back.User != p.event.User || back.Author != p.event.Author {
			t.Fatalf("body %q: user %q author %q come back as %q, %q", body, p.event.User, p.event.Author, back.User, back.Author)
		}
		if !bytes.Equal(ev.Data, p.event.Data) {
			t.Fatalf("body %q: data %q stored as %q", body, p.event.Data, ev.Data)
		}
	})
}
