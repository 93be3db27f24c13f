package fanout

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/reader"
	"github.com/eventide/eventide/storage"
)

// env is a store on real files with a Fanout and a timeline reader.
type env struct {
	t    testing.TB
	dir  string
	db   *storage.DB
	f    *Fanout
	tl   *reader.Timelines
	reg  *prometheus.Registry
	opts Options
	// storageOpts, if set, adjusts the store's options (benchmarks).
	storageOpts func(*storage.Options)
	seq         uint64
	base        time.Time
	// labels maps test labels to post ids and back.
	ids    map[string]uuid.UUID
	labels map[uuid.UUID]string
}

func newEnv(t testing.TB, opts Options) *env {
	t.Helper()
	return newEnvStorage(t, opts, nil)
}

// newEnvStorage is newEnv with the store's options adjusted by so.
func newEnvStorage(t testing.TB, opts Options, so func(*storage.Options)) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), opts: opts, base: time.Now().Add(-time.Hour).Truncate(time.Second),
		ids: map[string]uuid.UUID{}, labels: map[uuid.UUID]string{}, storageOpts: so}
	e.open()
	t.Cleanup(func() {
		if e.db != nil {
			e.db.Close()
		}
	})
	return e
}

func (e *env) open() {
	e.t.Helper()
	so := storage.DefaultOptions()
	if e.storageOpts != nil {
		e.storageOpts(&so)
	}
	db, err := storage.Open(e.dir, so)
	if err != nil {
		e.t.Fatal(err)
	}
	e.db = db
	e.reg = prometheus.NewRegistry()
	opts := e.opts
	opts.Registerer = e.reg
	if e.f, err = Open(db, opts); err != nil {
		e.t.Fatal(err)
	}
	if e.tl, err = reader.NewTimelines(db, reader.TimelineOptions{TimelineTTL: opts.TimelineTTL, TimelineCap: opts.TimelineCap}); err != nil {
		e.t.Fatal(err)
	}
	if last, err := e.lastSeq(); err == nil && last > e.seq {
		e.seq = last
	}
}

// reopen closes the store and opens it again, as after a crash that lost
// nothing acknowledged.
func (e *env) reopen() {
	e.t.Helper()
	if err := e.db.Close(); err != nil {
		e.t.Fatal(err)
	}
	e.open()
}

func (e *env) lastSeq() (uint64, error) { return e.seq, nil }

// next returns the next message position and its event time: one
// millisecond per message, so ids sort in stream order.
func (e *env) next() (Position, time.Time) {
	e.seq++
	return Position{Seq: e.seq}, e.base.Add(time.Duration(e.seq) * time.Millisecond)
}

func (e *env) eventID(at time.Time, seq uint64) uuid.UUID {
	var node [8]byte
	binary.BigEndian.PutUint64(node[:], seq)
	node[0] &= 0x3f
	id, err := bucket.NewTimeUUID(at, node)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *env) msg(typ, user, author string, data []byte) Message {
	pos, at := e.next()
	return Message{Pos: pos, Event: schema.Event{ID: e.eventID(at, pos.Seq), Type: typ, User: user, Author: author, Data: data}}
}

func (e *env) follow(user, author string) Message   { return e.msg("follow", user, author, nil) }
func (e *env) unfollow(user, author string) Message { return e.msg("unfollow", user, author, nil) }

// post returns a post message labelled label; its data holds the text.
func (e *env) post(author, label, text string) Message {
	data, _ := json.Marshal(map[string]string{"text": text})
	m := e.msg("post", "", author, data)
	e.ids[label] = m.Event.ID
	e.labels[m.Event.ID] = label
	return m
}

func (e *env) del(author, label string) Message {
	id, ok := e.ids[label]
	s := id.String()
	if !ok {
		s = label
	}
	data, _ := json.Marshal(map[string]string{"post_id": s})
	return e.msg("post_delete", "", author, data)
}

func (e *env) apply(msgs ...Message) {
	e.t.Helper()
	if err := e.f.Apply(context.Background(), msgs...); err != nil {
		e.t.Fatal(err)
	}
}

// work works every pending chunk, oldest job first, and returns how many.
func (e *env) work() int {
	e.t.Helper()
	n := 0
	for {
		refs, err := e.f.PendingChunks(context.Background(), 1)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(refs) == 0 {
			return n
		}
		if _, err := e.f.WorkChunk(context.Background(), refs[0]); err != nil {
			e.t.Fatal(err)
		}
		n++
	}
}

// timeline reads user's whole timeline in pages of limit and returns the
// labels (or ids) of its posts, newest first, and the number of pages.
func (e *env) timeline(user string, limit int) ([]reader.TimelinePost, int) {
	e.t.Helper()
	var out []reader.TimelinePost
	token := ""
	pages := 0
	for {
		p, err := e.tl.Timeline(context.Background(), reader.TimelineQuery{User: user, Limit: limit, PageToken: token})
		if err != nil {
			e.t.Fatal(err)
		}
		pages++
		out = append(out, p.Posts...)
		if p.NextPage == "" {
			return out, pages
		}
		if pages > 10000 {
			e.t.Fatalf("timeline of %s does not end", user)
		}
		token = p.NextPage
	}
}

func (e *env) label(id uuid.UUID) string {
	if l, ok := e.labels[id]; ok {
		return l
	}
	return id.String()
}

func (e *env) timelineLabels(user string, limit int) []string {
	posts, _ := e.timeline(user, limit)
	out := make([]string, len(posts))
	for i, p := range posts {
		out[i] = e.label(p.ID)
	}
	return out
}

// skips returns the skip counter by reason, as "reason=n" sorted.
func (e *env) skips() string {
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != "eventide_fanout_skipped_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out = append(out, fmt.Sprintf("%s=%v", labelValue(m, "reason"), m.GetCounter().GetValue()))
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func (e *env) counter(name string) float64 {
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			v := 0.0
			for _, m := range mf.GetMetric() {
				v += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
			return v
		}
	}
	return 0
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// rawTimelineIDs returns the post ids stored in user's timeline
// partition, unfiltered, newest first.
func (e *env) rawTimelineIDs(user string) []uuid.UUID {
	e.t.Helper()
	it, err := e.db.Slice(context.Background(), storage.SliceQuery{Table: "timeline", Partition: []byte(user)})
	if err != nil {
		e.t.Fatal(err)
	}
	defer it.Close()
	var out []uuid.UUID
	for it.Next() {
		id, err := catalog.DecodePostKey(it.Row().Clustering)
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, id)
	}
	if err := it.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// rawTimelineRows counts the rows stored in user's timeline partition,
// unfiltered, and how many carry post id.
func (e *env) rawTimelineRows(user string) int {
	e.t.Helper()
	it, err := e.db.Slice(context.Background(), storage.SliceQuery{Table: "timeline", Partition: []byte(user)})
	if err != nil {
		e.t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for it.Next() {
		n++
	}
	if err := it.Err(); err != nil {
		e.t.Fatal(err)
	}
	return n
}
