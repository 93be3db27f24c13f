package httpapi

import (
	"net/http/httptest"
	"slices"
	"testing"
)

// TestQueryParam: queryParam answers as r.URL.Query()[name], whether it
// skips the parse or not.
func TestQueryParam(t *testing.T) {
	for _, raw := range []string{"", "type=a", "type=a&timeout=2s", "timeout=1s&timeout=2s", "%74imeout=3s", "type=a&complete=true",
		"complete", "complete=", "time+out=1s", "xtimeout=1s", "type=%zz&timeout=1s"} {
		r := httptest.NewRequest("GET", "/v1/events?"+raw, nil)
		for _, name := range []string{"timeout", "complete"} {
			if got, want := queryParam(r, name), r.URL.Query()[name]; !slices.Equal(got, want) {
				t.Errorf("queryParam(%q, %q) = %q, want %q", raw, name, got, want)
			}
		}
	}
}
