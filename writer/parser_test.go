package writer

import (
	"fmt"
	"testing"
	"time"
)

func TestParserTypeSubjects(t *testing.T) {
	for _, tc := range []struct {
		subjects []string
		want     string
	}{
		{nil, "[events.follow events.post]"},
		{[]string{"a.*.>", "b.>"}, "[a.*.follow a.*.post b.follow b.post]"},
		{[]string{">"}, "[follow post]"},
		{[]string{"events.>", "raw"}, "[]"}, // raw names no type: no filter
		{[]string{"events.x>"}, "[]"},       // not a > token
	} {
		p, err := NewParser(Config{Subjects: tc.subjects})
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(p.TypeSubjects([]string{"follow", "post"})); got != tc.want {
			t.Errorf("subjects %v: TypeSubjects = %s, want %s", tc.subjects, got, tc.want)
		}
	}
}

// TestParserIDsAreTheWriters: an event without an id gets the id of
// (stream, epoch, seq), as the writer derives it, and a reject gives its
// reason.
func TestParserIDsAreTheWriters(t *testing.T) {
	p, err := NewParser(Config{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	body := []byte(`{"time":"` + now.Add(-time.Second).UTC().Format(time.RFC3339Nano) + `","author":"a"}`)
	a, reason, _ := p.Parse("events.post", body, 0, 7, now)
	b, _, _ := p.Parse("events.post", body, 0, 7, now.Add(time.Minute))
	c, _, _ := p.Parse("events.post", body, 1, 7, now)
	if reason != "" || a.ID != b.ID || a.ID == c.ID || a.Type != "post" || a.Author != "a" {
		t.Errorf("Parse: %v (reason %q), again %v, other epoch %v", a, reason, b.ID, c.ID)
	}
	v := newValidator(p.cfg)
	pe, rej := v.parse("events.post", body, msgIdentity{stream: DefaultStream, epoch: 0, seq: 7}, now)
	if rej != nil || pe.event.ID != a.ID {
		t.Errorf("the writer's own parse gives %v (%v), the Parser %v", pe.event.ID, rej, a.ID)
	}
	if _, reason, _ := p.Parse("events.post", []byte("{"), 0, 8, now); reason != reasonMalformedJSON {
		t.Errorf("reason of a bad body = %q, want %q", reason, reasonMalformedJSON)
	}
}
