package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestIngestHTTPGuards: the flags reach the HTTP API of a running
// process: the token from --http-token-file guards the data routes but not
// /readyz, only the configured origin gets CORS headers, timeout is capped
// by --max-query-timeout, and the token never reaches the log.
func TestIngestHTTPGuards(t *testing.T) {
	const token = "e2e-s3cret-token"
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	natsAddr, httpAddr := freeAddr(t), freeAddr(t)
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--data", t.TempDir(), "--nats-listen", natsAddr, "--http", httpAddr,
			"--http-token-file", tokenFile, "--max-query-timeout", "2s", "--log-level", "debug"},
			envFrom(map[string]string{"EVENTIDE_CORS_ORIGINS": "https://dash.example.com"}), &stdout, &stderr)
	}()
	base := "http://" + httpAddr
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	waitReady(t, client, base, done, &stderr) // /readyz needs no token
	waitBanner(t, &stdout)
	if out := stdout.String(); !strings.Contains(out, "curl -H 'Authorization: Bearer <token>' '"+base+"/v1/events?type=click'") {
		t.Errorf("the banner's curl example does not send a token:\n%s", out)
	}

	tests := []struct {
		target, auth, origin string
		status               int
		wantOrigin           string
	}{
		{"/v1/events?type=click", "", "", 401, ""},
		{"/v1/events?type=click", "Bearer wrong", "", 401, ""},
		{"/v1/events?type=click", "Bearer " + token, "", 200, ""},
		{"/metrics", "", "", 401, ""},
		{"/livez", "", "", 200, ""},
		{"/v1/events?type=click&timeout=2s", "Bearer " + token, "", 200, ""},
		{"/v1/events?type=click&timeout=3s", "Bearer " + token, "", 400, ""},
		{"/v1/counts?type=click", "Bearer " + token, "https://dash.example.com", 200, "https://dash.example.com"},
		{"/v1/counts?type=click", "Bearer " + token, "https://other.example.com", 200, ""},
	}
	for _, tt := range tests {
		req, err := http.NewRequest("GET", base+tt.target, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		if tt.origin != "" {
			req.Header.Set("Origin", tt.origin)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || resp.Header.Get("Access-Control-Allow-Origin") != tt.wantOrigin {
			t.Errorf("GET %s (auth %q, origin %q): %d, Access-Control-Allow-Origin %q; want %d, %q; body %s",
				tt.target, tt.auth, tt.origin, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), tt.status, tt.wantOrigin, body)
		}
	}

	// --http-token's help names every path that answers without the
	// token, and no path that needs it.
	c, err := parseConfig(nil, envFrom(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	usage := c.fs.Lookup("http-token").Usage
	for _, p := range []struct{ path, named string }{
		{"/livez", "/livez"}, {"/readyz", "/readyz"}, {"/openapi.yaml", "/openapi.yaml"},
		{"/", "dashboard's page /"}, {"/ui/app.js", "/ui/"}, {"/metrics", "/metrics"}, {"/v1/stats", "/v1/"},
	} {
		resp, err := client.Get(base + p.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		open := resp.StatusCode != http.StatusUnauthorized
		if named := strings.Contains(usage, p.named); named != open {
			t.Errorf("GET %s without the token: %d, but --http-token's help (%q) names it as open: %v", p.path, resp.StatusCode, usage, named)
		}
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if log := stderr.String() + stdout.String(); strings.Contains(log, token) {
		t.Errorf("the token is in the output:\n%s", log)
	}
}
