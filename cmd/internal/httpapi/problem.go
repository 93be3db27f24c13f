package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
)

// Problem type URIs (RFC 9457 "type"). Each names a section of
// docs/http-api.md; clients should switch on them, not on the detail text.
const (
	problemBase = "https://github.com/eventide/eventide/blob/main/docs/http-api.md"

	ProblemInvalidParameter  = problemBase + "#invalid-parameter"
	ProblemUnknownParameter  = problemBase + "#unknown-parameter"
	ProblemInvalidQuery      = problemBase + "#invalid-query"
	ProblemTooManyTombstones = problemBase + "#too-many-tombstones"
	ProblemUnauthorized      = problemBase + "#unauthorized"
	ProblemQueryTimeout      = problemBase + "#query-timeout"
	// Plain HTTP failures carry "about:blank": the status says it all.
	problemAboutBlank = "about:blank"
)

// problem is an RFC 9457 problem details object.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

func writeProblem(w http.ResponseWriter, p problem) {
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	body, err := json.Marshal(p)
	if err != nil {
		panic("BUG: cannot encode a problem: " + err.Error())
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	w.Write(append(body, '\n'))
}

// badParameter is the 400 for a parameter the handler itself refuses.
func badParameter(detail string) problem {
	return problem{Type: ProblemInvalidParameter, Title: "Invalid parameter", Status: http.StatusBadRequest, Detail: detail}
}

// badQuery is the 400 for parameters each valid but refused together (the
// reader's ErrInvalidQuery answers the same).
func badQuery(detail string) problem {
	return problem{Type: ProblemInvalidQuery, Title: "Invalid query", Status: http.StatusBadRequest, Detail: detail}
}

// writeInternalError answers 500 without leaking the cause, and logs the
// cause under an id the client can quote.
func writeInternalError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	id := newErrorID()
	logger.Error("request failed", "error_id", id, "method", r.Method, "url", r.URL.String(), "err", err)
	writeProblem(w, problem{
		Type:   problemAboutBlank,
		Status: http.StatusInternalServerError,
		Detail: "the server failed to answer; its log has the cause under error id " + id,
	})
}

func newErrorID() string {
	var b [6]byte
	rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
