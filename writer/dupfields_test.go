package writer

import (
	"testing"
	"time"
)

// TestParserRepeatedFieldLastWins: a top-level field given twice counts
// once, with its last value, as docs/events.md says (and as encoding/json
// decodes an object), for every field the writer reads.
func TestParserRepeatedFieldLastWins(t *testing.T) {
	p, err := NewParser(Config{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 24, 13, 10, 0, 0, time.UTC)
	body := []byte(`{"time":"2026-11-24T12:00:00Z","user":"a","author":"x","data":{"a":1},` +
		`"time":"2026-11-24T13:05:00Z","user":"b","author":"y","data":{"b":2}}`)
	ev, reason, msg := p.Parse("events.click", body, 0, 1, now)
	if reason != "" {
		t.Fatalf("Parse rejected it: %s: %s", reason, msg)
	}
	if !ev.Time().Equal(time.Date(2026, 11, 24, 13, 5, 0, 0, time.UTC)) || ev.User != "b" || ev.Author != "y" || string(ev.Data) != `{"b":2}` {
		t.Errorf("Parse = time %v user %q author %q data %s; want the last of each", ev.Time(), ev.User, ev.Author, ev.Data)
	}
}
