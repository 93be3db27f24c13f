package fanout

import (
	"context"
	"testing"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/catalog"
)

// TestTimelineCopyCells: a pushed copy is two cells, author and data (the
// post time is the post id's, so a third cell repeating it only cost
// CPU), and a timeline read still gives the post's time.
func TestTimelineCopyCells(t *testing.T) {
	e := newEnv(t, DefaultOptions())
	e.apply(e.follow("gmason", "phenry"))
	e.apply(e.post("phenry", "p1", "give me liberty"))
	e.work()
	id := e.ids["p1"]
	row, ok, err := catalog.ReadRow(context.Background(), e.db, catalog.TimelineTable, []byte("gmason"), catalog.PostKey(id))
	if err != nil || !ok {
		t.Fatalf("timeline row of p1 for gmason: found %v, %v", ok, err)
	}
	var cols []string
	for _, c := range row.Cells {
		cols = append(cols, string(c.Column))
	}
	if len(cols) != 2 || cols[0] != catalog.ColAuthor || cols[1] != catalog.ColData {
		t.Fatalf("copy cells %q, want [author data]", cols)
	}
	posts, _ := e.timeline("gmason", 20)
	want, _ := bucket.TimeOf(id)
	if len(posts) != 1 || posts[0].ID != id || !posts[0].Time.Equal(want) || posts[0].Author != "phenry" {
		t.Fatalf("timeline of gmason = %+v, want p1 by phenry at %v", posts, want)
	}
}
