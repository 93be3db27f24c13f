package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// signalChildEnv makes the test binary act as a process whose shutdown
// never ends, for TestSecondSignalExitsAtOnce.
const signalChildEnv = "EVENTIDE_TEST_SIGNAL_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(signalChildEnv) != "" {
		ctx, _ := shutdownOnSignal(os.Stderr)
		fmt.Println("ready")
		<-ctx.Done()
		fmt.Println("shutting down:", context.Cause(ctx))
		select {} // a shutdown stuck for good
	}
	code := m.Run()
	if builtBin != "" {
		os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}

var (
	builtOnce sync.Once
	builtBin  string
	builtErr  error
)

// TestSecondSignalExitsAtOnce: the first SIGTERM starts a shutdown; when
// that shutdown hangs, a second one ends the process with exit code 1.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), signalChildEnv+"=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	expect := func(want string) {
		t.Helper()
		if !lines.Scan() || lines.Text() != want {
			t.Fatalf("child said %q (%v), want %q", lines.Text(), lines.Err(), want)
		}
	}
	expect("ready")
	cmd.Process.Signal(syscall.SIGTERM)
	expect("shutting down: received terminated")
	cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("after the second SIGTERM: %v, want exit code 1", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second SIGTERM did not end the process")
	}
	if !strings.Contains(stderr.String(), "received terminated again: exiting now") {
		t.Errorf("stderr %q", stderr.String())
	}
}

// TestCheckLoggedInOrder: the e2e test's order check fails on a missing
// step, the first one included, and on steps out of order.
func TestCheckLoggedInOrder(t *testing.T) {
	steps := []string{"a-step", "b-step", "c-step"}
	for _, tt := range []struct {
		log string
		ok  bool
	}{
		{"a-step\nb-step\nc-step\n", true},
		{"b-step\nc-step\n", false},
		{"a-step\nc-step\n", false},
		{"a-step\nb-step\n", false},
		{"b-step\na-step\nc-step\n", false},
		{"", false},
	} {
		if err := checkLoggedInOrder(tt.log, steps...); (err == nil) != tt.ok {
			t.Errorf("log %q: %v, want ok=%v", tt.log, err, tt.ok)
		}
	}
}
