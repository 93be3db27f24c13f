package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/eventide/eventide/cmd/internal/apitest"
)

// TestAPISuite runs the shared API suite against the all-in-one process,
// which reads its local storage. cmd/query's TestAPISuite runs the same
// suite through the query service and two storage nodes.
func TestAPISuite(t *testing.T) {
	natsAddr, httpAddr := freeAddr(t), freeAddr(t)
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--data", t.TempDir(), "--nats-listen", natsAddr, "--http", httpAddr, "--http-token", "suite-token"},
			envFrom(nil), &stdout, &stderr)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	waitReady(t, client, "http://"+httpAddr, done, &stderr)
	apitest.Run(t, apitest.Target{BaseURL: "http://" + httpAddr, NATSURL: "nats://" + natsAddr, Prefix: "aio", Token: "suite-token"})
}
