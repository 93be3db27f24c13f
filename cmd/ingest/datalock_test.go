package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestSecondProcessOnSameDataDir: while one process runs on --data, a
// second process (the built binary) on the same --data exits with code 3
// and a message naming the directory, before it starts an embedded NATS
// server on the first one's JetStream store; the first keeps serving.
func TestSecondProcessOnSameDataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the ingest binary")
	}
	bin := buildIngest(t)
	data := t.TempDir()
	natsAddr, httpAddr := freeAddr(t), freeAddr(t)
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--data", data, "--nats-listen", natsAddr, "--http", httpAddr}, envFrom(nil), &stdout, &stderr)
	}()
	base := "http://" + httpAddr
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	waitReady(t, client, base, done, &stderr)

	second := exec.Command(bin, "--data", data, "--nats-listen", freeAddr(t), "--http", freeAddr(t), "--log-level", "debug")
	second.Env = envWithoutEventide()
	out, err := second.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("second process: %v, want exit code 3; output:\n%s", err, out)
	}
	if !strings.Contains(string(out), data+" is locked by process ") {
		t.Errorf("second process output does not name the locked directory and its holder:\n%s", out)
	}
	for _, never := range []string{"starting embedded NATS", "nats-server", "opening storage"} {
		if strings.Contains(string(out), never) {
			t.Errorf("second process logged %q before failing on the lock:\n%s", never, out)
		}
	}

	// The first process still ingests and serves.
	nc, err := nats.Connect("nats://" + natsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.Publish(t.Context(), "events.after", fmt.Appendf(nil, `{"time":%d}`, time.Now().UnixMilli())); err != nil {
		t.Fatalf("publish to the first process after the second failed: %v", err)
	}
	var page struct{ Events []struct{ Type string } }
	for deadline := time.Now().Add(20 * time.Second); len(page.Events) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the first process did not store the event; log:\n%s", stderr.String())
		}
		getJSON(t, client, base+"/v1/events?type=after", 200, &page)
	}
	nc.Close()
	client.CloseIdleConnections()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("first process: %v; log:\n%s", err, stderr.String())
	}

	// Shutdown released the lock: a new process may take it.
	l, err := lockDataDir(data)
	if err != nil {
		t.Fatalf("after shutdown: %v", err)
	}
	if err := l.unlock(); err != nil {
		t.Fatal(err)
	}
}

// TestDataDirLockInProcess: two locks on one directory in one process
// conflict too (flock is per open file), with the sentinel error.
func TestDataDirLockInProcess(t *testing.T) {
	dir := t.TempDir()
	l, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockDataDir(dir)
	if !errors.Is(err, errDataDirInUse) || exitCode(err) != 3 || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second lock: %v, want errDataDirInUse naming %s", err, dir)
	}
	if err := l.unlock(); err != nil {
		t.Fatal(err)
	}
	l, err = lockDataDir(dir)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	l.unlock()
}
