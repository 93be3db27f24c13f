package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/eventide/eventide/reader"
)

// The parameters of the timeline and follow-graph endpoints.
var (
	timelineParams = []string{"limit", "page", "timeout", "complete"}
	followsParams  = []string{"limit", "page", "timeout", "complete"}
)

// maxUserLen is the longest user name the timeline endpoints accept: a
// longer one cannot have been stored as a key.
const maxUserLen = 4096

type timelinePostJSON struct {
	ID     string          `json:"id"`
	Author string          `json:"author"`
	Time   string          `json:"time"`
	Data   json.RawMessage `json:"data"`
}

type timelineResponse struct {
	Posts     []timelinePostJSON `json:"posts"`
	NextPage  string             `json:"next_page,omitempty"`
	Freshness *freshnessJSON     `json:"freshness,omitempty"`
}

type followsResponse struct {
	Users     []string       `json:"users"`
	NextPage  string         `json:"next_page,omitempty"`
	Freshness *freshnessJSON `json:"freshness,omitempty"`
}

// pathUser returns the {user} of the path, checked.
func pathUser(r *http.Request) (string, *problem) {
	u := r.PathValue("user")
	switch {
	case u == "":
		pr := badParameter("the user in the path is empty; use /v1/timeline/{user} or /v1/users/{user}/followers")
		return "", &pr
	case len(u) > maxUserLen:
		pr := badParameter(fmt.Sprintf("the user in the path is %d bytes long, more than the %d allowed", len(u), maxUserLen))
		return "", &pr
	case !utf8.ValidString(u):
		pr := badParameter("the user in the path is not valid UTF-8 once percent-decoded")
		return "", &pr
	}
	return u, nil
}

// fanoutOff answers the timeline endpoints of a node that runs no fan-out.
func fanoutOff(w http.ResponseWriter, r *http.Request) {
	writeProblem(w, problem{
		Type:   problemAboutBlank,
		Status: http.StatusNotFound,
		Detail: fmt.Sprintf("%s needs the fan-out worker, which this node does not run (--fanout=false)", r.URL.Path),
	})
}

// timeline answers GET /v1/timeline/{user}?limit=20&page=TOKEN.
func (a *api) timeline(w http.ResponseWriter, r *http.Request) {
	if a.timelines == nil {
		fanoutOff(w, r)
		return
	}
	user, pr := pathUser(r)
	if pr != nil {
		writeProblem(w, *pr)
		return
	}
	p, pr := parseParams(r.URL.RawQuery, timelineParams)
	if pr != nil {
		writeProblem(w, *pr)
		return
	}
	q := reader.TimelineQuery{User: user, PageToken: p.get("page")}
	if q.Limit, pr = p.intParam("limit", reader.DefaultTimelineLimit, 1, reader.MaxTimelineLimit); pr != nil {
		writeProblem(w, *pr)
		return
	}
	fresh := a.timelineFreshMemo.of(a.timelineFreshness)
	page, err := a.timelines.Timeline(r.Context(), q)
	if err != nil {
		a.queryFailed(w, r, err)
		return
	}
	resp := timelineResponse{Posts: make([]timelinePostJSON, 0, len(page.Posts)), NextPage: page.NextPage, Freshness: fresh}
	for _, post := range page.Posts {
		data := json.RawMessage(post.Data)
		if len(data) == 0 {
			data = json.RawMessage("{}")
		} else if !json.Valid(data) {
			a.logger.Warn("stored post data is not JSON; returning it as a string", "id", post.ID, "author", post.Author)
			data, _ = json.Marshal(string(post.Data))
		}
		resp.Posts = append(resp.Posts, timelinePostJSON{
			ID:     post.ID.String(),
			Author: post.Author,
			Time:   post.Time.UTC().Format(time.RFC3339Nano),
			Data:   data,
		})
	}
	a.writeJSON(w, r, resp)
}

// followers answers GET /v1/users/{user}/followers, following GET
// /v1/users/{user}/following: pages of names in name order.
func (a *api) followers(w http.ResponseWriter, r *http.Request) {
	a.follows(w, r, (*reader.Timelines).Followers)
}

func (a *api) following(w http.ResponseWriter, r *http.Request) {
	a.follows(w, r, (*reader.Timelines).Following)
}

func (a *api) follows(w http.ResponseWriter, r *http.Request,
	read func(*reader.Timelines, context.Context, string, int, string) (reader.FollowPage, error)) {
	if a.timelines == nil {
		fanoutOff(w, r)
		return
	}
	user, pr := pathUser(r)
	if pr != nil {
		writeProblem(w, *pr)
		return
	}
	p, pr := parseParams(r.URL.RawQuery, followsParams)
	if pr != nil {
		writeProblem(w, *pr)
		return
	}
	limit, pr := p.intParam("limit", reader.DefaultLimit, 1, reader.MaxLimit)
	if pr != nil {
		writeProblem(w, *pr)
		return
	}
	fresh := a.timelineFreshMemo.of(a.timelineFreshness)
	page, err := read(a.timelines, r.Context(), user, limit, p.get("page"))
	if err != nil {
		a.queryFailed(w, r, err)
		return
	}
	resp := followsResponse{Users: page.Names, NextPage: page.NextPage, Freshness: fresh}
	if resp.Users == nil {
		resp.Users = []string{}
	}
	a.writeJSON(w, r, resp)
}
