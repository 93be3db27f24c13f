package httpapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/fanout"
	"github.com/eventide/eventide/reader"
	"github.com/eventide/eventide/storage"
)

// seedTimelines applies the seed literature's graph and four posts to db
// through the fan-out, and works every chunk: gmason follows phenry and
// gwashington, ahamilton follows jadams and gwashington; 25 users follow
// gwashington in all. It returns the post ids by label.
func seedTimelines(t testing.TB, db *storage.DB) map[string]string {
	t.Helper()
	f, err := fanout.Open(db, fanout.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Hour)
	var msgs []fanout.Message
	ids := map[string]string{}
	add := func(typ, user, author, label string) {
		seq := uint64(len(msgs) + 1)
		e := schema.Event{ID: eventID(t, start.Add(time.Duration(seq)*time.Second), int(seq)), Type: typ, User: user, Author: author,
			Data: []byte(fmt.Sprintf(`{"text":%q}`, label))}
		if label != "" {
			ids[label] = e.ID.String()
		}
		msgs = append(msgs, fanout.Message{Pos: fanout.Position{Seq: seq}, Event: e})
	}
	add("follow", "gmason", "phenry", "")
	add("follow", "gmason", "gwashington", "")
	add("follow", "ahamilton", "jadams", "")
	add("follow", "ahamilton", "gwashington", "")
	for i := range 23 {
		add("follow", fmt.Sprintf("citizen%02d", i), "gwashington", "")
	}
	add("post", "", "phenry", "liberty")
	add("post", "", "gwashington", "war")
	add("post", "", "jadams", "facts")
	add("post", "", "gwashington", "peace")
	if err := f.Apply(t.Context(), msgs...); err != nil {
		t.Fatal(err)
	}
	for {
		refs, err := f.PendingChunks(t.Context(), 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(refs) == 0 {
			return ids
		}
		if _, err := f.WorkChunk(t.Context(), refs[0]); err != nil {
			t.Fatal(err)
		}
	}
}

type timelineBody struct {
	Posts []struct {
		ID     string          `json:"id"`
		Author string          `json:"author"`
		Time   string          `json:"time"`
		Data   json.RawMessage `json:"data"`
	} `json:"posts"`
	NextPage  *string        `json:"next_page"`
	Freshness *freshnessBody `json:"freshness"`
}

type followsBody struct {
	Users     []string       `json:"users"`
	NextPage  *string        `json:"next_page"`
	Freshness *freshnessBody `json:"freshness"`
}

func TestTimelineEndpoint(t *testing.T) {
	f := newFixture(t, reader.Options{})
	ids := seedTimelines(t, f.db)
	for user, want := range map[string][]string{
		"gmason":    {"peace", "war", "liberty"},
		"ahamilton": {"peace", "facts", "war"},
		"nobody":    nil,
	} {
		var got []string
		target := "/v1/timeline/" + user + "?limit=2"
		for pages := 0; ; pages++ {
			var body timelineBody
			get(t, f, target, 200, "application/json", &body)
			for _, p := range body.Posts {
				var d struct{ Text string }
				if err := json.Unmarshal(p.Data, &d); err != nil || p.ID != ids[d.Text] {
					t.Errorf("%s: post %+v does not match its stored id (%v)", target, p, err)
				}
				got = append(got, d.Text)
			}
			if body.NextPage == nil || pages > 5 {
				break
			}
			target = "/v1/timeline/" + user + "?limit=2&page=" + *body.NextPage
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("timeline of %s: %v, want %v", user, got, want)
		}
	}

	var names []string
	target := "/v1/users/gwashington/followers?limit=10"
	for pages := 0; ; pages++ {
		var body followsBody
		get(t, f, target, 200, "application/json", &body)
		names = append(names, body.Users...)
		if body.NextPage == nil || pages > 5 {
			break
		}
		target = "/v1/users/gwashington/followers?limit=10&page=" + *body.NextPage
	}
	if len(names) != 25 || names[0] != "ahamilton" || names[1] != "citizen00" || names[24] != "gmason" {
		t.Errorf("followers of gwashington: %v, want 25 in name order", names)
	}
	var following followsBody
	get(t, f, "/v1/users/gmason/following", 200, "application/json", &following)
	if strings.Join(following.Users, ",") != "gwashington,phenry" || following.NextPage != nil {
		t.Errorf("gmason follows %+v, want gwashington,phenry", following)
	}
}

// TestTimelineBadParameters: each bad parameter is a 400 that says what
// to change.
func TestTimelineBadParameters(t *testing.T) {
	f := newFixture(t, reader.Options{})
	seedTimelines(t, f.db)
	var other followsBody
	get(t, f, "/v1/users/gwashington/followers?limit=1", 200, "application/json", &other)
	for _, tt := range []struct{ target, detail string }{
		{"/v1/timeline/gmason?limit=0", "parameter limit: 0 is out of range; use 1 to 1000"},
		{"/v1/timeline/gmason?limit=x", `parameter limit: "x" is not a whole number; use 1 to 1000`},
		{"/v1/timeline/gmason?count=3", `unknown parameter "count"; this endpoint accepts limit, page`},
		{"/v1/timeline/gmason?page=zzz", "pass the next_page value of the previous page unchanged"},
		{"/v1/timeline/gmason?page=" + *other.NextPage, "not a token for this kind of query"},
		{"/v1/users/ahamilton/followers?page=" + *other.NextPage, "was issued for a different query"},
		{"/v1/users/gmason/following?limit=100000", "parameter limit: 100000 is out of range"},
		{"/v1/timeline/%ff", "not valid UTF-8"},
	} {
		var p problemBody
		get(t, f, tt.target, 400, "application/problem+json", &p)
		if !strings.Contains(p.Detail, tt.detail) {
			t.Errorf("%s: detail %q, want it to contain %q", tt.target, p.Detail, tt.detail)
		}
	}
}
