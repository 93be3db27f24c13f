package main

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// TestDebugServerServesProfiles: --pprof serves the profile index and
// the command line on its own listener.
func TestDebugServerServesProfiles(t *testing.T) {
	d, err := startDebugServer("127.0.0.1:0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	for path, want := range map[string]string{"/debug/pprof/": "goroutine", "/debug/pprof/cmdline": "query.test"} {
		resp, err := http.Get("http://" + d.ln.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("%s: %d %.200s; want 200 with %q", path, resp.StatusCode, body, want)
		}
	}
}
