package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	eventideapi "github.com/eventide/eventide/api"
)

// The spec, loaded once per test binary.
var (
	specOnce   sync.Once
	specDoc    *openapi3.T
	specRouter routers.Router
	specErr    error
)

// Spec is api/openapi.yaml, validated, and a router over its paths;
// loaded once per test binary.
func Spec(t testing.TB) (*openapi3.T, routers.Router) {
	t.Helper()
	specOnce.Do(func() {
		// Text bodies the validator reads as a string (their schema):
		// the live tail's event stream and the dashboard's files;
		// kin-openapi decodes none of these types itself.
		for _, ct := range []string{"text/event-stream", "text/html", "text/javascript", "text/css", "image/svg+xml"} {
			openapi3filter.RegisterBodyDecoder(ct, openapi3filter.FileBodyDecoder)
		}
		loader := openapi3.NewLoader()
		specDoc, specErr = loader.LoadFromData(eventideapi.OpenAPIYAML())
		if specErr != nil {
			return
		}
		if specErr = specDoc.Validate(loader.Context); specErr != nil {
			return
		}
		// The spec's server is the default listen address; the tests'
		// servers listen on other ports, so match on the path alone.
		specDoc.Servers = nil
		specRouter, specErr = gorillamux.NewRouter(specDoc)
	})
	if specErr != nil {
		t.Fatalf("cannot load api/openapi.yaml: %v", specErr)
	}
	return specDoc, specRouter
}

// CheckAgainstSpec validates one exchange with the handler against
// api/openapi.yaml: a request the API accepted (2xx) must be valid by
// the spec, and every response must be one the spec declares for its
// route and status, body included. Requests outside the spec (other
// methods, unknown paths) must get the problem the spec's 405 and 404
// responses describe.
func CheckAgainstSpec(t testing.TB, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	doc, router := Spec(t)
	// The router matches the request's URL; the validators read its
	// query and path, never its body (every route is GET).
	specReq := req.Clone(context.Background())
	specReq.Method = http.MethodGet
	route, pathParams, err := router.FindRoute(specReq)
	if err != nil || (req.Method != http.MethodGet && req.Method != http.MethodHead) {
		want := "NotFound"
		if err == nil {
			want = "MethodNotAllowed"
		} else if !errors.Is(err, routers.ErrPathNotFound) {
			t.Fatalf("%s %s: the spec router: %v", req.Method, req.URL, err)
		}
		checkProblemResponse(t, doc, req, want, status, header, body)
		return
	}
	opts := &openapi3filter.Options{
		IncludeResponseStatus: true, // a status the spec does not declare fails
		MultiError:            true,
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
	}
	if req.Method == http.MethodHead {
		opts.ExcludeResponseBody = true
	}
	in := &openapi3filter.RequestValidationInput{Request: specReq, PathParams: pathParams, Route: route, Options: opts}
	if status/100 == 2 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Errorf("%s %s: the handler answered %d but the spec refuses the request: %v", req.Method, req.URL, status, err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                opts,
	}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("%s %s: the response (%d %s) does not match the spec: %v", req.Method, req.URL, status, body, err)
	}
}

// checkProblemResponse checks a response outside the spec's operations
// against components/responses/name.
func checkProblemResponse(t testing.TB, doc *openapi3.T, req *http.Request, name string, status int, header http.Header, body []byte) {
	t.Helper()
	wantStatus := map[string]int{"NotFound": http.StatusNotFound, "MethodNotAllowed": http.StatusMethodNotAllowed}[name]
	if status != wantStatus {
		t.Errorf("%s %s: status %d; the spec has no such operation, so want %d", req.Method, req.URL, status, wantStatus)
		return
	}
	resp := doc.Components.Responses[name].Value
	if name == "MethodNotAllowed" && header.Get("Allow") != "GET, HEAD" {
		t.Errorf("%s %s: Allow %q, want the spec's \"GET, HEAD\"", req.Method, req.URL, header.Get("Allow"))
	}
	if req.Method == http.MethodHead {
		return
	}
	mt := resp.Content.Get(header.Get("Content-Type"))
	if mt == nil {
		t.Errorf("%s %s: Content-Type %q is not one of the spec's for %s", req.Method, req.URL, header.Get("Content-Type"), name)
		return
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Errorf("%s %s: body is not JSON: %v", req.Method, req.URL, err)
		return
	}
	if err := mt.Schema.Value.VisitJSON(v); err != nil {
		t.Errorf("%s %s: the %d body %s does not match the spec's %s: %v", req.Method, req.URL, status, body, name, err)
	}
}
