package httpapi

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/eventide/eventide/reader"
)

// TestRequestURILimit: a path and query string longer than
// MaxRequestURIBytes is refused with 414 problem+json before anything
// parses it, while the longest valid request (a 4096-byte user name,
// every byte percent-encoded) is still served.
func TestRequestURILimit(t *testing.T) {
	f := newFixture(t, reader.Options{})
	for _, tc := range []struct {
		target string
		want   int
	}{
		{"/v1/events?type=click&page=" + strings.Repeat("A", MaxRequestURIBytes), http.StatusRequestURITooLong},
		{"/v1/nope/" + strings.Repeat("a", MaxRequestURIBytes), http.StatusRequestURITooLong},
		{"/v1/users/" + strings.Repeat("%C3%A9", 2048) + "/followers", http.StatusOK},
	} {
		resp, err := f.srv.Client().Get(f.srv.URL + tc.target)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%.60s... (%d bytes): status %d, want %d; body %.200s", tc.target, len(tc.target), resp.StatusCode, tc.want, body)
			continue
		}
		if tc.want != http.StatusOK && (resp.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(string(body), "more than the 32768")) {
			t.Errorf("%.60s...: %s %s", tc.target, resp.Header.Get("Content-Type"), body)
		}
	}
}
