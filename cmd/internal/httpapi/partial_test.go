package httpapi

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/eventide/eventide/reader"
)

// TestPartialAnswers: with a tracker that reports a missed shard (as
// cmd/query's does when a storage node is silent), every data answer
// says partial with the missing shards, spec-valid, and complete=true
// turns it into 503 partial-answer; without a tracker complete=true is
// accepted and changes nothing. cmd/query's tests run the real thing.
func TestPartialAnswers(t *testing.T) {
	missAll := func(ctx context.Context) (context.Context, func() []int) {
		return ctx, func() []int { return []int{1, 3} }
	}
	f := newFixtureWith(t, reader.Options{}, func(c *Config) {
		c.Partial = missAll
		c.Stats = StatsFunc(func(context.Context) (Stats, error) { return Stats{}, nil })
	})
	type partialBody struct {
		eventsBody
		Partial       bool  `json:"partial"`
		MissingShards []int `json:"missing_shards"`
	}
	var got partialBody
	get(t, f, "/v1/events?type=click", 200, "application/json", &got)
	if !got.Partial || !slices.Equal(got.MissingShards, []int{1, 3}) || len(got.Events) != fixtureEvents {
		t.Errorf("partial events answer: partial %v, missing %v, %d events", got.Partial, got.MissingShards, len(got.Events))
	}
	for _, target := range []string{
		"/v1/events?type=click&complete=true",
		"/v1/counts?type=click&step=1m&complete=true",
		"/v1/timeline/u1?complete=true",
		"/v1/users/u1/followers?complete=true",
		"/v1/types/top?complete=true",
		"/v1/slice?table=events&partition=22112610%7Cclick&complete=true",
		"/v1/stats?complete=true",
	} {
		var pr problemBody
		get(t, f, target, 503, "application/problem+json", &pr)
		if pr.Type != ProblemPartialAnswer {
			t.Errorf("%s: problem type %q, want %q", target, pr.Type, ProblemPartialAnswer)
		}
	}
	// The routes added with the live tail and the stats say partial
	// too, spec-valid (get holds the answer to api/openapi.yaml), and
	// take complete (a 404 for an unknown event, not a 400).
	for _, target := range []string{"/v1/types/top", "/v1/slice?table=events&partition=22112610%7Cclick", "/v1/stats"} {
		var p map[string]any
		get(t, f, target, 200, "application/json", &p)
		if p["partial"] != true || fmt.Sprint(p["missing_shards"]) != "[1 3]" {
			t.Errorf("%s: partial %v, missing %v", target, p["partial"], p["missing_shards"])
		}
	}
	// An event not found while shards are missing may be stored there:
	// the 404 says so, and complete=true refuses it as any partial answer.
	unknown := uuid.Must(uuid.NewUUID()).String()
	for _, q := range []string{"?type=click&complete=false", ""} {
		var notFound problemBody
		get(t, f, "/v1/events/"+unknown+q, 404, "application/problem+json", &notFound)
		if !strings.Contains(notFound.Detail, "shards 1,3 did not answer") {
			t.Errorf("404 of an event not found with shards missing: detail %q does not name them", notFound.Detail)
		}
	}
	for _, q := range []string{"?type=click&complete=true", "?complete=true"} {
		var pr problemBody
		get(t, f, "/v1/events/"+unknown+q, 503, "application/problem+json", &pr)
		if pr.Type != ProblemPartialAnswer {
			t.Errorf("event not found with shards missing, complete=true: problem type %q, want %q", pr.Type, ProblemPartialAnswer)
		}
	}

	var bad problemBody
	get(t, f, "/v1/events?type=click&complete=yes", 400, "application/problem+json", &bad)
	get(t, f, "/v1/events?type=click&complete=true&complete=false", 400, "application/problem+json", &bad)

	whole := newFixture(t, reader.Options{})
	got = partialBody{}
	get(t, whole, "/v1/events?type=click&complete=true", 200, "application/json", &got)
	if got.Partial || got.MissingShards != nil {
		t.Errorf("answer of a store holding every shard says partial %v, missing %v", got.Partial, got.MissingShards)
	}
}
