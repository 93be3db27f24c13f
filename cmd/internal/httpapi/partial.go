package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// PartialTracker is how a store that spans shards reports the shards a
// request could not read (cmd/query's queryrpc.TrackMisses): it returns
// the context to run the request under, under which an unreachable shard
// reads as empty, and a function listing the shards missed so far.
type PartialTracker func(ctx context.Context) (context.Context, func() []int)

// ProblemPartialAnswer is the 503 of a request with complete=true when a
// shard did not answer.
const ProblemPartialAnswer = problemBase + "#partial-answer"

// partialState is what a data request carries about partial answers.
type partialState struct {
	complete bool
	missing  func() []int
}

type partialKey struct{}

// withPartial parses the complete parameter of a data route and, with a
// tracker, runs h under it. Without one (a process reading local storage,
// which has every shard) complete is accepted and changes nothing.
func withPartial(track PartialTracker, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		complete, pr := parseComplete(queryParam(r, "complete"))
		if pr != nil {
			writeProblem(w, *pr)
			return
		}
		if track == nil {
			h.ServeHTTP(w, r)
			return
		}
		ctx, missing := track(r.Context())
		ctx = context.WithValue(ctx, partialKey{}, &partialState{complete: complete, missing: missing})
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

func parseComplete(values []string) (bool, *problem) {
	if len(values) > 1 {
		pr := badParameter(fmt.Sprintf("parameter complete is given %d times; give it once", len(values)))
		return false, &pr
	}
	if len(values) == 0 {
		return false, nil
	}
	switch values[0] {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	}
	pr := badParameter(fmt.Sprintf("parameter complete: %q is not true or false", values[0]))
	return false, &pr
}

// missingShards is the shards r's answer lacks; nil when it is whole.
func missingShards(r *http.Request) (shards []int, complete bool) {
	st, _ := r.Context().Value(partialKey{}).(*partialState)
	if st == nil {
		return nil, false
	}
	return st.missing(), st.complete
}

// writePartialAnswer refuses an answer that lacks shards the request
// wanted complete.
func writePartialAnswer(w http.ResponseWriter, missing []int) {
	writeProblem(w, problem{
		Type:   ProblemPartialAnswer,
		Title:  "Partial answer",
		Status: http.StatusServiceUnavailable,
		Detail: fmt.Sprintf("shards %s did not answer in time and the request asks for complete=true; retry later, or drop complete=true to get what the other shards hold (marked partial)", joinShards(missing)),
	})
}

// joinShards lists shards as "1,3".
func joinShards(shards []int) string {
	list := make([]string, len(shards))
	for i, s := range shards {
		list[i] = strconv.Itoa(s)
	}
	return strings.Join(list, ",")
}

// markPartial puts "partial": true and "missing_shards" first in body, a
// JSON object.
func markPartial(body []byte, missing []int) []byte {
	if len(body) < 2 || body[0] != '{' {
		return body
	}
	ms, _ := json.Marshal(missing)
	var b bytes.Buffer
	b.WriteString(`{"partial":true,"missing_shards":`)
	b.Write(ms)
	if rest := bytes.TrimSpace(body[1:]); len(rest) > 0 && rest[0] != '}' {
		b.WriteByte(',')
	}
	b.Write(body[1:])
	return b.Bytes()
}
