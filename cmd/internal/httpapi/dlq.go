package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/writer"
)

// Limits of one /v1/dlq page.
const (
	DefaultDLQLimit = 100
	MaxDLQLimit     = 1000
)

// dlqParams are the parameters /v1/dlq accepts.
var dlqParams = []string{"type", "from", "to", "limit", "page", "timeout", "complete"}

// dlqReadTimeout bounds the NATS requests of one /v1/dlq page;
// dlqScrapeTimeout the one of a scrape, which must not hold up /metrics.
const (
	dlqReadTimeout   = 10 * time.Second
	dlqScrapeTimeout = 2 * time.Second
)

// maxStartTime is the latest start time JetStream can take (in Unix
// nanoseconds, 2262-04-11); nothing is stored after it.
var maxStartTime = time.Unix(0, math.MaxInt64)

// errNATSDown is returned by DeadLetters when the NATS connection is not
// connected: /v1/dlq answers 503 at once instead of waiting.
var errNATSDown = errors.New("the NATS connection is down")

// errNATSNoAnswer is returned by DeadLetters when NATS did not answer
// its requests in time although the connection is up (a server frozen,
// SIGSTOPped, or overloaded): /v1/dlq answers 503 as for errNATSDown.
var errNATSNoAnswer = errors.New("NATS did not answer")

// natsWaitMargin is the most of a request's remaining time /v1/dlq keeps
// for answering after NATS failed to: a tenth of it, at most this.
const natsWaitMargin = 250 * time.Millisecond

// DeadLetters reads the dead-letter stream the writer fills (package
// writer, docs/events.md "Rejections"): for /v1/dlq and the DLQ depth
// metrics.
type DeadLetters struct {
	js     jetstream.JetStream
	stream string
	prefix string // of its subjects: the writer's Config.DLQSubjectPrefix for stream

	// cleanups counts the consumer deletions still running after their
	// page was answered.
	cleanups sync.WaitGroup
}

// waitCleanups waits for the consumer deletions under way.
func (d *DeadLetters) waitCleanups() { d.cleanups.Wait() }

// NewDeadLetters reads the dead-letter stream named stream (--dlq-stream)
// through js, under the subjects package writer gives that name, and registers eventide_dlq_messages and eventide_dlq_bytes
// on reg, read from the stream's state at each scrape.
func NewDeadLetters(js jetstream.JetStream, stream string, reg prometheus.Registerer) (*DeadLetters, error) {
	d := &DeadLetters{js: js, stream: stream, prefix: writer.Config{DLQStream: stream}.DLQSubjectPrefix()}
	if reg != nil {
		if err := reg.Register(dlqCollector{d}); err != nil {
			return nil, fmt.Errorf("cannot register the dead-letter metrics: %w", err)
		}
	}
	return d, nil
}

// deadLetterJSON is one dead letter as /v1/dlq returns it.
type deadLetterJSON struct {
	Seq             uint64 `json:"seq"`
	Time            string `json:"time"`
	Type            string `json:"type"`
	Reason          string `json:"reason"`
	Error           string `json:"error"`
	OriginalSubject string `json:"original_subject,omitempty"`
	StreamSeq       uint64 `json:"stream_seq,omitempty"`
	Body            string `json:"body"`
	Encoding        string `json:"encoding,omitempty"`
	TruncatedFrom   int    `json:"truncated_from,omitempty"`
}

type dlqResponse struct {
	DeadLetters []deadLetterJSON `json:"dead_letters"`
	NextPage    string           `json:"next_page,omitempty"`
}

// dlqQuery is one /v1/dlq request, parsed.
type dlqQuery struct {
	typ      string // empty: every type
	from, to time.Time
	hasFrom  bool
	hasTo    bool
	limit    int
	startSeq uint64 // from the page token; 0 without one
}

func parseDLQQuery(rawQuery string) (dlqQuery, *problem) {
	var q dlqQuery
	p, pr := parseParams(rawQuery, dlqParams)
	if pr != nil {
		return q, pr
	}
	if q.typ = p.get("type"); q.typ != "" {
		if err := bucket.ValidateEventType(q.typ); err != nil {
			bad := badParameter(fmt.Sprintf("parameter type: %v (dead letters of messages whose subject names no valid type are under type=unknown)", err))
			return q, &bad
		}
		// A NATS subject has no empty token, so no dead letter has such a
		// type, and the filter subject it would make is refused by NATS.
		if slices.Contains(strings.Split(q.typ, "."), "") {
			bad := badParameter(fmt.Sprintf("parameter type: %q has an empty dot-separated token, which no subject can name", q.typ))
			return q, &bad
		}
	}
	if s := p.get("from"); s != "" {
		if q.from, pr = parseTime("from", s); pr != nil {
			return q, pr
		}
		q.hasFrom = true
	}
	if s := p.get("to"); s != "" {
		if q.to, pr = parseTime("to", s); pr != nil {
			return q, pr
		}
		q.hasTo = true
	}
	if q.hasFrom && q.hasTo && !q.from.Before(q.to) {
		bad := badParameter(fmt.Sprintf("parameter from (%s) is not before to (%s); the window is [from, to)",
			q.from.UTC().Format(time.RFC3339Nano), q.to.UTC().Format(time.RFC3339Nano)))
		return q, &bad
	}
	if q.limit, pr = p.intParam("limit", DefaultDLQLimit, 1, MaxDLQLimit); pr != nil {
		return q, pr
	}
	if s := p.get("page"); s != "" {
		seq, err := strconv.ParseUint(s, 10, 64)
		if err != nil || seq == 0 {
			bad := badQuery(fmt.Sprintf("parameter page: %q is not a page token of /v1/dlq; pass the next_page value of the previous page unchanged", s))
			return q, &bad
		}
		q.startSeq = seq
	}
	return q, nil
}

func (a *api) dlq(w http.ResponseWriter, r *http.Request) {
	if a.deadLetters == nil {
		writeProblem(w, problem{Type: problemAboutBlank, Status: http.StatusNotFound,
			Detail: "this process reads no dead-letter stream"})
		return
	}
	q, pr := parseDLQQuery(r.URL.RawQuery)
	if pr != nil {
		writeProblem(w, *pr)
		return
	}
	resp, err := a.deadLetters.page(r.Context(), q)
	if err != nil {
		if timedOut(r) {
			writeQueryTimeout(w, r)
			return
		}
		if r.Context().Err() != nil {
			a.logger.Debug("dead-letter listing abandoned by the client", "url", r.URL.String(), "err", err)
			return
		}
		if errors.Is(err, errNATSDown) || errors.Is(err, errNATSNoAnswer) {
			w.Header().Set("Retry-After", "5")
			writeProblem(w, problem{Type: problemAboutBlank, Status: http.StatusServiceUnavailable,
				Detail: "the dead-letter stream cannot be read: " + err.Error() + "; retry later"})
			return
		}
		writeInternalError(w, r, a.logger, err)
		return
	}
	a.writeJSON(w, r, resp)
}

// page reads one page of dead letters with a short-lived ephemeral
// consumer (no acks, in memory) that starts at the page token's sequence,
// or at from, or at the stream's start, filtered by type. The consumer's
// pending count says how many messages to fetch, so the fetch never waits
// for messages that do not exist.
//
// NATS gets dlqReadTimeout, and less than what is left of ctx (by a
// tenth of it, at most natsWaitMargin), so that when it does not answer
// there is time to say so (errNATSNoAnswer) before the request's own
// timeout. The consumer is named here, so that it is deleted even when
// its creation got no answer; the deletion runs after the page is
// answered, bounded by dlqReadTimeout, and the consumer's inactive
// threshold removes it should that fail too.
func (d *DeadLetters) page(ctx context.Context, q dlqQuery) (*dlqResponse, error) {
	if !d.js.Conn().IsConnected() {
		return nil, errNATSDown
	}
	if q.hasFrom && q.startSeq == 0 && q.from.After(maxStartTime) {
		// JetStream takes the start time in Unix nanoseconds: a later one
		// wraps around and would list every dead letter.
		return &dlqResponse{DeadLetters: []deadLetterJSON{}}, nil
	}
	start := time.Now()
	natsDeadline := start.Add(dlqReadTimeout)
	if end, ok := ctx.Deadline(); ok {
		if e := end.Add(-min(end.Sub(start)/10, natsWaitMargin)); e.Before(natsDeadline) {
			natsDeadline = e
		}
	}
	parent := ctx
	ctx, cancel := context.WithDeadline(ctx, natsDeadline)
	defer cancel()
	// noAnswer turns err into errNATSNoAnswer when NATS ran out of the
	// time given to it, not when the request's own context ended.
	noAnswer := func(err error) error {
		if parent.Err() == nil && ctx.Err() != nil {
			return fmt.Errorf("%w within %s (%w)", errNATSNoAnswer, natsDeadline.Sub(start).Round(time.Millisecond), err)
		}
		return err
	}
	filter := d.prefix + ">"
	if q.typ != "" {
		filter = d.prefix + q.typ
	}
	cfg := jetstream.ConsumerConfig{
		Name:              "dlq-read-" + rand.Text(),
		AckPolicy:         jetstream.AckNonePolicy,
		FilterSubject:     filter,
		MemoryStorage:     true,
		InactiveThreshold: time.Minute, // removes it should the delete below fail
		DeliverPolicy:     jetstream.DeliverAllPolicy,
	}
	switch {
	case q.startSeq > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, q.startSeq
	case q.hasFrom && q.from.After(time.Unix(0, 0)):
		// Not before 1970: in Unix nanoseconds, a time before 1678 wraps
		// to the future, and nothing is stored before 1970 anyway.
		from := q.from.UTC()
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &from
	}
	// Deleted after the answer, even if its creation got none (NATS may
	// still create it); best effort: the inactive threshold removes it
	// anyway.
	createUnanswered := false
	d.cleanups.Add(1)
	defer func() {
		go func() {
			defer d.cleanups.Done()
			d.deleteConsumer(context.WithoutCancel(ctx), cfg.Name, createUnanswered)
		}()
	}()
	cons, err := d.js.CreateConsumer(ctx, d.stream, cfg)
	if err != nil {
		createUnanswered = parent.Err() == nil && ctx.Err() != nil
		return nil, fmt.Errorf("cannot read dead-letter stream %s: %w", d.stream, noAnswer(err))
	}
	resp := &dlqResponse{DeadLetters: []deadLetterJSON{}}
	pending := cons.CachedInfo().NumPending
	if pending == 0 {
		return resp, nil
	}
	want := int(min(pending, uint64(q.limit)))
	batch, err := cons.Fetch(want, jetstream.FetchContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("cannot fetch from dead-letter stream %s: %w", d.stream, noAnswer(err))
	}
	var last jetstream.MsgMetadata
	for m := range batch.Messages() {
		meta, err := m.Metadata()
		if err != nil {
			return nil, fmt.Errorf("dead letter without metadata in %s: %w", d.stream, err)
		}
		if q.hasTo && !meta.Timestamp.Before(q.to) {
			return resp, nil // past the window: no next page
		}
		resp.DeadLetters = append(resp.DeadLetters, deadLetter(m, meta, d.prefix))
		last = *meta
	}
	if err := batch.Error(); err != nil {
		return nil, fmt.Errorf("cannot fetch from dead-letter stream %s: %w", d.stream, noAnswer(err))
	}
	if len(resp.DeadLetters) < want {
		return nil, fmt.Errorf("dead-letter stream %s: got %d of %d pending messages", d.stream, len(resp.DeadLetters), want)
	}
	if last.NumPending > 0 {
		resp.NextPage = strconv.FormatUint(last.Sequence.Stream+1, 10)
	}
	return resp, nil
}

// consumerRetryInterval is how often deleteConsumer looks again for a
// consumer whose creation got no answer.
const consumerRetryInterval = 250 * time.Millisecond

// deleteConsumer deletes page's consumer name, within dlqReadTimeout.
// When its creation got no answer (createUnanswered), NATS may apply the
// creation after the deletion (it handles the two requests apart), so a
// consumer not found yet is looked for again until that time is out.
func (d *DeadLetters) deleteConsumer(ctx context.Context, name string, createUnanswered bool) {
	ctx, cancel := context.WithTimeout(ctx, dlqReadTimeout)
	defer cancel()
	for {
		err := d.js.DeleteConsumer(ctx, d.stream, name)
		if !createUnanswered || !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(consumerRetryInterval):
		}
	}
}

// deadLetter turns one message of the dead-letter stream into JSON,
// reading the headers package writer sets.
func deadLetter(m jetstream.Msg, meta *jetstream.MsgMetadata, prefix string) deadLetterJSON {
	h := m.Headers()
	dl := deadLetterJSON{
		Seq:             meta.Sequence.Stream,
		Time:            meta.Timestamp.UTC().Format(time.RFC3339Nano),
		Type:            strings.TrimPrefix(m.Subject(), prefix),
		Error:           h.Get(writer.HeaderError),
		OriginalSubject: h.Get(writer.HeaderOriginalSubject),
	}
	dl.Reason, _, _ = strings.Cut(dl.Error, ":")
	dl.StreamSeq, _ = strconv.ParseUint(h.Get(writer.HeaderStreamSeq), 10, 64)
	dl.TruncatedFrom, _ = strconv.Atoi(h.Get(writer.HeaderTruncated))
	if body := m.Data(); utf8.Valid(body) {
		dl.Body = string(body)
	} else {
		dl.Body, dl.Encoding = base64.StdEncoding.EncodeToString(body), "base64"
	}
	return dl
}

// dlqCollector reports the dead-letter stream's depth at each scrape.
type dlqCollector struct{ d *DeadLetters }

var (
	dlqMessagesDesc = prometheus.NewDesc("eventide_dlq_messages",
		"Messages in the dead-letter stream (rejected events not yet removed by its limits or by hand).", []string{"stream"}, nil)
	dlqBytesDesc = prometheus.NewDesc("eventide_dlq_bytes",
		"Bytes of the messages in the dead-letter stream.", []string{"stream"}, nil)
)

func (c dlqCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- dlqMessagesDesc
	ch <- dlqBytesDesc
}

func (c dlqCollector) Collect(ch chan<- prometheus.Metric) {
	if !c.d.js.Conn().IsConnected() {
		return // no answer to wait for; eventide_nats_connected says why
	}
	ctx, cancel := context.WithTimeout(context.Background(), dlqScrapeTimeout)
	defer cancel()
	s, err := c.d.js.Stream(ctx, c.d.stream)
	if err != nil {
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			ch <- prometheus.NewInvalidMetric(dlqMessagesDesc, fmt.Errorf("cannot read dead-letter stream %s: %w", c.d.stream, err))
		}
		return
	}
	st := s.CachedInfo().State
	ch <- prometheus.MustNewConstMetric(dlqMessagesDesc, prometheus.GaugeValue, float64(st.Msgs), c.d.stream)
	ch <- prometheus.MustNewConstMetric(dlqBytesDesc, prometheus.GaugeValue, float64(st.Bytes), c.d.stream)
}
