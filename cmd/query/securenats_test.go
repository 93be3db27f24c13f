package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/eventide/eventide/internal/natsconn"
	"github.com/eventide/eventide/internal/natsconn/natstest"
)

// TestQuerySecuredNATS runs a storage node and cmd/query against a NATS
// server with TLS (a CA made here) and user/password authentication,
// configured as a deployment does: --nats-url and --nats-tls-ca as flags,
// user and password from EVENTIDE_* variables. cmd/query becomes ready
// (it read the type settings from the node over the secured connection),
// its log never shows the password, and a wrong password fails the start
// with natsconn.ErrRefused.
func TestQuerySecuredNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/ingest and runs a storage node")
	}
	const user, password = "eventide", "qu3ry-pa55"
	ca := natstest.NewCA(t, "query")
	ns := natstest.Start(t, func(o *natsserver.Options) {
		ca.ServerTLS(t, o, false)
		o.Username, o.Password = user, password
	})
	url := strings.Replace(ns.ClientURL(), "nats://", "tls://", 1)
	env := map[string]string{"EVENTIDE_NATS_USER": user, "EVENTIDE_NATS_PASSWORD": password}
	startNodeWith(t, url, DefaultNodeID, "0-3", []string{"--nats-tls-ca", ca.File},
		"EVENTIDE_NATS_USER="+user, "EVENTIDE_NATS_PASSWORD="+password)

	lookup := func(env map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	}
	httpAddr := freeAddr(t)
	log := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--nats-url", url, "--nats-tls-ca", ca.File, "--http", httpAddr, "--shards", "4"},
			lookup(env), io.Discard, log)
	}()
	waitStatus(t, "http://"+httpAddr+"/readyz", 200, done, log)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
	if strings.Contains(log.String(), password) {
		t.Errorf("the log shows the NATS password:\n%s", log)
	}
	if !strings.Contains(log.String(), "nats-password=REDACTED") {
		t.Errorf("the log does not show the password flag as REDACTED:\n%s", log)
	}

	env["EVENTIDE_NATS_PASSWORD"] = "wrong"
	err := run(context.Background(), []string{"--nats-url", url, "--nats-tls-ca", ca.File, "--http", freeAddr(t), "--shards", "4"},
		lookup(env), io.Discard, io.Discard)
	if !errors.Is(err, natsconn.ErrRefused) || exitCode(err) != 1 {
		t.Errorf("wrong password: %v (exit %d), want natsconn.ErrRefused, exit 1", err, exitCode(err))
	}
	// Without the CA the server's certificate does not verify.
	env["EVENTIDE_NATS_PASSWORD"] = password
	if err := run(context.Background(), []string{"--nats-url", url, "--http", freeAddr(t), "--shards", "4", "--nats-tls-server-name", "localhost"},
		lookup(env), io.Discard, io.Discard); err == nil {
		t.Error("connected to a TLS server whose CA it was not given")
	}
}
