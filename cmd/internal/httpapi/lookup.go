package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/reader"
)

// The parameters of /v1/events/{id} and /v1/types/top.
var (
	eventParams    = []string{"type", "trace", "timeout", "complete"}
	topTypesParams = []string{"from", "to", "limit", "trace", "timeout", "complete"}
)

type eventResponse struct {
	Event     eventJSON      `json:"event"`
	Trace     string         `json:"trace,omitempty"`
	Freshness *freshnessJSON `json:"freshness,omitempty"`
}

// event answers /v1/events/{id}.
func (a *api) event(w http.ResponseWriter, r *http.Request) {
	p, pr := parseParams(r.URL.RawQuery, eventParams)
	if pr != nil {
		writeProblem(w, *pr)
		return
	}
	raw := r.PathValue("id")
	id, err := uuid.Parse(raw)
	if err != nil || id.Version() != 1 || len(raw) != 36 {
		bad := badParameter(fmt.Sprintf("path id: %.64q is not an event id; use a version 1 (time) UUID such as 7ab09000-e65b-11f1-8a51-2d4e6f01b2c3, as /v1/events returns them", raw))
		writeProblem(w, bad)
		return
	}
	trace, pr := p.boolParam("trace")
	if pr != nil {
		writeProblem(w, *pr)
		return
	}
	fresh := a.freshMemo.of(a.freshness)
	ev, tr, err := a.reader.Event(r.Context(), reader.EventLookup{ID: id, Type: p.get("type"), Trace: trace})
	if errors.Is(err, reader.ErrNotFound) {
		detail := fmt.Sprintf("no event %s is stored (never stored, expired or deleted)", id)
		if t := p.get("type"); t != "" {
			detail = fmt.Sprintf("no event %s of type %s is stored (never stored, expired or deleted); without type every type of its hour is tried", id, t)
		}
		// Not found on the shards that answered is not "not stored" when
		// a shard it may be in did not answer (through cmd/query).
		if missing, complete := missingShards(r); len(missing) > 0 {
			if complete {
				writePartialAnswer(w, missing)
				return
			}
			detail = fmt.Sprintf("no event %s was found on the shards that answered; shards %s did not answer in time, so it may be stored there: retry later (complete=true answers 503 instead of this 404)",
				id, joinShards(missing))
		}
		writeProblem(w, problem{Type: problemAboutBlank, Status: http.StatusNotFound, Detail: detail})
		return
	}
	if err != nil {
		a.queryFailed(w, r, err)
		return
	}
	resp := eventResponse{Event: a.eventJSON(ev), Freshness: fresh}
	if trace && tr != nil {
		resp.Trace = tr.String()
	}
	a.writeJSON(w, r, resp)
}

// eventJSON is e as the API returns it.
func (a *api) eventJSON(e *schema.Event) eventJSON {
	data := json.RawMessage(e.Data)
	if !json.Valid(data) {
		// The writer stores only JSON objects; never let one bad row
		// fail every page that holds it.
		a.logger.Warn("stored event data is not JSON; returning it as a string", "id", e.ID, "type", e.Type)
		data, _ = json.Marshal(string(e.Data))
	}
	return eventJSON{
		ID:     e.ID.String(),
		Type:   e.Type,
		Time:   e.Time().UTC().Format(time.RFC3339Nano),
		User:   e.User,
		Author: e.Author,
		Data:   data,
	}
}

type typeCountJSON struct {
	Type  string `json:"type"`
	Count int64  `json:"count"`
}

type topTypesResponse struct {
	From      string          `json:"from"`
	To        string          `json:"to"`
	Types     []typeCountJSON `json:"types"`
	Trace     string          `json:"trace,omitempty"`
	Freshness *freshnessJSON  `json:"freshness,omitempty"`
}

// topTypes answers /v1/types/top.
func (a *api) topTypes(w http.ResponseWriter, r *http.Request) {
	p, pr := parseParams(r.URL.RawQuery, topTypesParams)
	if pr != nil {
		writeProblem(w, *pr)
		return
	}
	var q reader.TopTypesQuery
	if q.From, q.To, pr = p.window(a.now()); pr != nil {
		writeProblem(w, *pr)
		return
	}
	if q.Limit, pr = p.intParam("limit", 10, 1, reader.MaxTopTypesLimit); pr != nil {
		writeProblem(w, *pr)
		return
	}
	if q.Trace, pr = p.boolParam("trace"); pr != nil {
		writeProblem(w, *pr)
		return
	}
	fresh := a.freshMemo.of(a.freshness)
	top, tr, err := a.reader.TopTypes(r.Context(), q)
	if err != nil {
		a.queryFailed(w, r, err)
		return
	}
	resp := topTypesResponse{From: q.From.UTC().Format(time.RFC3339Nano), To: q.To.UTC().Format(time.RFC3339Nano),
		Types: make([]typeCountJSON, 0, len(top)), Freshness: fresh}
	for _, t := range top {
		resp.Types = append(resp.Types, typeCountJSON{Type: t.Type, Count: t.Count})
	}
	if q.Trace && tr != nil {
		resp.Trace = tr.String()
	}
	a.writeJSON(w, r, resp)
}
