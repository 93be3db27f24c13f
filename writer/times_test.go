package writer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/reader"
)

// TestReturnedTimesArePublished publishes event times with millisecond
// and microsecond precision, alone and with an id: the reader returns
// each event at exactly the time published.
func TestReturnedTimesArePublished(t *testing.T) {
	s := startNATS(t, t.TempDir(), -1)
	nc := connect(t, s.ClientURL())
	db := openDB(t, t.TempDir())
	types := testTypes(t)
	w := newWriter(t, nc, db, Config{Types: types})
	r := runWriter(t, w)
	js := jsFor(t, nc)

	base := time.Now().Add(-10 * time.Minute).UTC().Truncate(time.Second)
	// An id made from a clock with 100 ns ticks, for the same millisecond.
	idWithTicks, err := bucket.NewTimeUUID(base.Add(3*time.Millisecond+4567*100), [8]byte{1, 2, 3, 4, 5, 6, 7, 8})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		body string
		want time.Time
	}{
		{fmt.Sprintf(`{"time":%q}`, base.Add(time.Millisecond).Format(time.RFC3339Nano)), base.Add(time.Millisecond)},
		{fmt.Sprintf(`{"time":%d}`, base.Add(2*time.Millisecond).UnixMilli()), base.Add(2 * time.Millisecond)},
		{fmt.Sprintf(`{"time":%q}`, base.Add(5*time.Millisecond+123*time.Microsecond).Format(time.RFC3339Nano)), base.Add(5*time.Millisecond + 123*time.Microsecond)},
		{fmt.Sprintf(`{"id":%q,"time":%q}`, idWithTicks, base.Add(3*time.Millisecond).Format(time.RFC3339Nano)), base.Add(3 * time.Millisecond)},
		{fmt.Sprintf(`{"id":%q,"time":%d}`, uuid.Must(bucket.NewTimeUUID(base.Add(7*time.Millisecond+9*100), [8]byte{9})), base.Add(7*time.Millisecond).UnixMilli()), base.Add(7 * time.Millisecond)},
	}
	for _, c := range cases {
		publishOne(t, js, "events.click", []byte(c.body))
	}
	waitApplied(t, w, js, DefaultStream, 20*time.Second)
	r.stop(t)

	rd, err := reader.New(db, reader.Options{Types: types})
	if err != nil {
		t.Fatal(err)
	}
	page, err := rd.Events(context.Background(), reader.EventQuery{Type: "click", From: base, To: base.Add(time.Second), Order: reader.Asc})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, e := range page.Events {
		got[e.Time().UTC().Format(time.RFC3339Nano)] = true
	}
	for _, c := range cases {
		if want := c.want.Format(time.RFC3339Nano); !got[want] {
			t.Errorf("body %s: no event returned at %s; returned %v", c.body, want, got)
		}
	}
	if len(page.Events) != len(cases) {
		t.Errorf("%d events returned, want %d", len(page.Events), len(cases))
	}
}
