package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/internal/natsconn"
	"github.com/eventide/eventide/internal/natsconn/natstest"
)

// TestIngestSecuredNATS runs ingest against an external NATS server with
// TLS (a CA made here) and user/password auth, configured the way a
// deployment does: --nats-url and --nats-tls-ca as flags, the user and
// password from EVENTIDE_* variables. An event published there is stored
// and served; the password never reaches the log.
func TestIngestSecuredNATS(t *testing.T) {
	const user, password = "ingest", "pa55-w0rd-e2e"
	ca := natstest.NewCA(t, "e2e")
	ns := natstest.Start(t, func(o *natsserver.Options) {
		ca.ServerTLS(t, o, false)
		o.Username, o.Password = user, password
	})
	url := strings.Replace(ns.ClientURL(), "nats://", "tls://", 1)
	httpAddr := freeAddr(t)
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--data", t.TempDir(), "--http", httpAddr, "--nats-url", url, "--nats-tls-ca", ca.File},
			envFrom(map[string]string{"EVENTIDE_NATS_USER": user, "EVENTIDE_NATS_PASSWORD": password}), &stdout, &stderr)
	}()
	base := "http://" + httpAddr
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	waitReady(t, client, base, done, &stderr)

	nc, err := natsconn.Connect(t.Context(), natsconn.Options{URL: url, User: user, Password: password, TLSCAFile: ca.File})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.Publish(t.Context(), "events.signup", []byte(fmt.Sprintf(`{"time":%d,"user":"u7"}`, time.Now().UnixMilli()))); err != nil {
		t.Fatal(err)
	}
	var page struct{ Events []struct{ User string } }
	for deadline := time.Now().Add(20 * time.Second); len(page.Events) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the event never showed up; log:\n%s", stderr.String())
		}
		getJSON(t, client, base+"/v1/events?type=signup", 200, &page)
	}
	if page.Events[0].User != "u7" {
		t.Errorf("stored event: %+v", page.Events)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if strings.Contains(stderr.String()+stdout.String(), password) {
		t.Errorf("the NATS password reached the output:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "nats-password=REDACTED") {
		t.Errorf("the start-up line does not show nats-password as REDACTED:\n%s", stderr.String())
	}
}

// TestIngestSecuredNATSRefused: wrong credentials, missing credentials and
// an untrusted server certificate each stop the start with exit code 1 and
// an error that says what failed, naming the flag; nothing keeps retrying.
func TestIngestSecuredNATSRefused(t *testing.T) {
	ca := natstest.NewCA(t, "e2e")
	ns := natstest.Start(t, func(o *natsserver.Options) {
		ca.ServerTLS(t, o, false)
		o.Username, o.Password = "ingest", "right"
	})
	url := strings.Replace(ns.ClientURL(), "nats://", "tls://", 1)
	other := natstest.NewCA(t, "other")
	tests := []struct {
		name    string
		args    []string
		refused bool   // errors.Is ErrRefused
		want    string // in the error
	}{
		{"wrong password", []string{"--nats-tls-ca", ca.File, "--nats-user", "ingest", "--nats-password", "wrong"}, true, "refused the credentials (check --nats-user/--nats-password)"},
		{"no credentials", []string{"--nats-tls-ca", ca.File}, true, "refused the credentials"},
		{"untrusted CA", []string{"--nats-tls-ca", other.File, "--nats-user", "ingest", "--nats-password", "right"}, false, "certificate signed by unknown authority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr syncBuffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			args := append([]string{"--data", t.TempDir(), "--http", "127.0.0.1:0", "--nats-url", url}, tt.args...)
			err := run(ctx, args, envFrom(nil), io.Discard, &stderr)
			if err == nil || exitCode(err) != 1 || errors.Is(err, natsconn.ErrRefused) != tt.refused || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run: %v (exit code %d); want exit code 1, refused %v, an error with %q", err, exitCode(err), tt.refused, tt.want)
			}
			if !strings.Contains(err.Error(), "--nats-url") || strings.Contains(err.Error(), "wrong") {
				t.Errorf("error %q: want the flag named and no password", err)
			}
		})
	}
}

// TestNATSSecurityNeedsURL: the security flags configure a connection to
// an external server; with the embedded one they are refused (exit code 2)
// instead of silently ignored.
func TestNATSSecurityNeedsURL(t *testing.T) {
	for _, args := range [][]string{{"--nats-user", "u", "--nats-password", "p"}, {"--nats-tls-server-name", "n"}} {
		_, err := parseConfig(append([]string{"--data", t.TempDir()}, args...), envFrom(nil), io.Discard)
		if exitCode(err) != 2 || err == nil || !strings.Contains(err.Error(), "without --nats-url") {
			t.Errorf("%v: %v (exit code %d), want exit code 2 naming --nats-url", args, err, exitCode(err))
		}
	}
	_, err := parseConfig([]string{"--nats-url", "nats://h:4222", "--nats-token", "t", "--nats-user", "u", "--nats-password", "p"}, envFrom(nil), io.Discard)
	if exitCode(err) != 2 {
		t.Errorf("two auth methods: %v, want exit code 2", err)
	}
	empty := filepath.Join(t.TempDir(), "password")
	os.WriteFile(empty, nil, 0o600)
	_, err = parseConfig([]string{"--nats-url", "nats://h:4222", "--nats-user", "u"}, envFrom(map[string]string{"EVENTIDE_NATS_PASSWORD_FILE": empty}), io.Discard)
	if exitCode(err) != 2 || err == nil || !strings.Contains(err.Error(), "--nats-password-file") {
		t.Errorf("empty password file: %v (exit code %d), want exit code 2 naming the flag", err, exitCode(err))
	}
}
