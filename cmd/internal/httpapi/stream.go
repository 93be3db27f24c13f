package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/internal/tail"
)

// TailSource answers /v1/events/stream. *tail.Broadcaster is one: the
// local one is fed by the writer (writer.Config.OnStored); a remote
// server feeds its own Broadcaster with what the storage processes send.
type TailSource interface {
	Subscribe(types []string, after uint64, resume bool) (*tail.Subscription, error)
	Stats() tail.Stats
}

// DefaultTailHeartbeat is how often an idle stream gets a comment line.
const DefaultTailHeartbeat = 15 * time.Second

// DefaultTailWriteTimeout is how long one write to a stream may block
// before the client is cut off: a client that stopped reading must not
// hold its handler, and what it took, forever.
const DefaultTailWriteTimeout = 30 * time.Second

// MaxTailTypes is the most types one stream may follow.
const MaxTailTypes = 100

var streamParams = []string{"type", "last_event_id"}

// Reasons of the error event that ends a stream.
const (
	tailReasonSlow     = "slow_client"
	tailReasonShutdown = "shutdown"
)

// stream answers /v1/events/stream: Server-Sent Events of the events as
// they are stored. It runs without the data routes' timeout, until the
// client leaves or the subscription ends.
func (a *api) stream(w http.ResponseWriter, r *http.Request) {
	p, pr := parseParamsRepeatable(r.URL.RawQuery, streamParams, []string{"type"})
	if pr != nil {
		writeProblem(w, *pr)
		return
	}
	types, pr := p.types(MaxTailTypes)
	if pr != nil {
		writeProblem(w, *pr)
		return
	}
	for _, t := range types {
		if err := bucket.ValidateEventType(t); err != nil {
			writeProblem(w, badQuery(fmt.Sprintf("parameter type: %v", err)))
			return
		}
	}
	after, resume, pr := resumePosition(r, p)
	if pr != nil {
		writeProblem(w, *pr)
		return
	}
	if a.tail == nil {
		writeProblem(w, problem{Type: problemAboutBlank, Status: http.StatusNotFound,
			Detail: "this server has no live tail; ask a storage process (cmd/ingest) or a query service that relays one"})
		return
	}
	if r.Method == http.MethodHead {
		setStreamHeaders(w)
		w.WriteHeader(http.StatusOK)
		return
	}
	sub, err := a.tail.Subscribe(types, after, resume)
	switch {
	case errors.Is(err, tail.ErrTooManyClients):
		w.Header().Set("Retry-After", "5")
		writeProblem(w, problem{Type: problemAboutBlank, Status: http.StatusServiceUnavailable,
			Detail: fmt.Sprintf("this server already streams to %d clients, its --tail-max-clients; retry later, or poll /v1/events", a.tail.Stats().MaxClients)})
		return
	case errors.Is(err, tail.ErrClosed):
		w.Header().Set("Retry-After", "1")
		writeProblem(w, problem{Type: problemAboutBlank, Status: http.StatusServiceUnavailable,
			Detail: "the server is shutting down; reconnect with Last-Event-ID to another server or after the restart"})
		return
	case err != nil:
		writeInternalError(w, r, a.logger, err)
		return
	}
	defer sub.Close()

	rc := http.NewResponseController(w)
	// A stream outlives any write timeout the server may set; each write
	// gets its own deadline instead (writeFlush).
	rc.SetWriteDeadline(time.Time{})
	writeFlush := func(b []byte) bool {
		rc.SetWriteDeadline(time.Now().Add(a.tailWriteTimeout))
		return writeAndFlush(w, rc, b)
	}
	setStreamHeaders(w)
	w.WriteHeader(http.StatusOK)
	buf := make([]byte, 0, 4096)
	buf = append(buf, ": eventide live tail\n\n"...)
	if gap, oldest := sub.Gap(); gap {
		buf = appendSSE(buf, "reset", fmt.Sprintf(`{"reason":"position_too_old","detail":%s,"oldest_seq":%d}`,
			strconv.Quote(fmt.Sprintf("events after %d are no longer all held for replay; replaying from %d on (read the ones before with /v1/events)", after, oldest)), oldest))
	}
	if !writeFlush(buf) {
		return
	}
	heartbeat := time.NewTicker(a.tailHeartbeat)
	defer heartbeat.Stop()
	var evs []*tail.Event
	for {
		select {
		case <-r.Context().Done():
			return
		case <-heartbeat.C:
			if !writeFlush(append(buf[:0], ": heartbeat\n\n"...)) {
				return
			}
		case <-sub.Ready():
			evs, err = sub.Take(evs[:0])
			if err != nil {
				reason, detail := tailReasonShutdown, "the server is shutting down; reconnect with Last-Event-ID to resume"
				if errors.Is(err, tail.ErrSlowClient) {
					reason = tailReasonSlow
					detail = "this client did not read the stream fast enough and its buffer of events filled; reconnect with Last-Event-ID to resume, and follow fewer types if it happens again"
				}
				writeFlush(appendSSE(buf[:0], "error", fmt.Sprintf(`{"reason":%q,"detail":%s}`, reason, strconv.Quote(detail))))
				return
			}
			buf = buf[:0]
			for _, e := range evs {
				buf = append(buf, "id: "...)
				buf = strconv.AppendUint(buf, e.Seq, 10)
				buf = append(buf, "\ndata: "...)
				buf = append(buf, e.JSON()...)
				buf = append(buf, "\n\n"...)
			}
			clear(evs)
			if !writeFlush(buf) {
				return
			}
			if cap(buf) > 1<<20 {
				buf = make([]byte, 0, 4096) // do not keep a burst's buffer
			}
		}
	}
}

func setStreamHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	// Tell nginx-like proxies not to buffer the stream.
	h.Set("X-Accel-Buffering", "no")
}

// appendSSE appends one named event whose data is one line.
func appendSSE(buf []byte, event, data string) []byte {
	buf = append(buf, "event: "...)
	buf = append(buf, event...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, data...)
	return append(buf, "\n\n"...)
}

// writeAndFlush writes b and flushes it to the client; false when the client
// is gone.
func writeAndFlush(w http.ResponseWriter, rc *http.ResponseController, b []byte) bool {
	if _, err := w.Write(b); err != nil {
		return false
	}
	return rc.Flush() == nil
}

// resumePosition reads the Last-Event-ID header and the last_event_id
// parameter: a stream sequence to resume after.
func resumePosition(r *http.Request, p params) (after uint64, resume bool, pr *problem) {
	headers := r.Header.Values("Last-Event-ID")
	if len(headers) > 1 {
		bad := badParameter(fmt.Sprintf("header Last-Event-ID is given %d times; give it once", len(headers)))
		return 0, false, &bad
	}
	parse := func(what, s string) (uint64, *problem) {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || len(s) > 20 || s[0] < '0' || s[0] > '9' {
			bad := badParameter(fmt.Sprintf("%s: %.40q is not an event stream position; pass the id: of the last event received, a whole number", what, s))
			return 0, &bad
		}
		return n, nil
	}
	var header, param string
	if len(headers) == 1 {
		header = headers[0]
	}
	param = p.get("last_event_id")
	if header != "" {
		if after, pr = parse("header Last-Event-ID", header); pr != nil {
			return 0, false, pr
		}
		resume = true
	}
	if param != "" {
		n, pr := parse("parameter last_event_id", param)
		if pr != nil {
			return 0, false, pr
		}
		if resume && n != after {
			bad := badParameter(fmt.Sprintf("header Last-Event-ID (%d) and parameter last_event_id (%d) differ; give one of them", after, n))
			return 0, false, &bad
		}
		after, resume = n, true
	}
	return after, resume, nil
}
