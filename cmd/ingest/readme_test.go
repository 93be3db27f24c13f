package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const readmePath = "../../README.md"

// readmeSection returns the text of the README section under heading.
func readmeSection(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	_, s, ok := strings.Cut(string(b), "\n## "+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no section %q", heading)
	}
	if i := strings.Index(s, "\n## "); i >= 0 {
		s = s[:i]
	}
	return s
}

// TestReadmeConfigurationTable checks that the README's Configuration
// table lists exactly the flags ingest has, each with its environment
// variable and its real default.
func TestReadmeConfigurationTable(t *testing.T) {
	row := regexp.MustCompile("(?m)^\\| `--([a-z-]+)` \\| `([A-Z_]+)` \\| ([^|]+) \\|")
	documented := map[string][2]string{}
	for _, m := range row.FindAllStringSubmatch(readmeSection(t, "Configuration"), -1) {
		documented[m[1]] = [2]string{m[2], strings.TrimSpace(m[3])}
	}
	c, err := parseConfig(nil, envFrom(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c.fs.VisitAll(func(f *flag.Flag) {
		doc, ok := documented[f.Name]
		delete(documented, f.Name)
		if !ok {
			t.Errorf("README Configuration lacks --%s", f.Name)
			return
		}
		if doc[0] != envName(f.Name) {
			t.Errorf("README: --%s has variable %s, want %s", f.Name, doc[0], envName(f.Name))
		}
		// "`5m`" or "empty (off)": the value before any remark.
		def := strings.TrimSpace(strings.SplitN(doc[1], "(", 2)[0])
		if def == "empty" {
			def = ""
		}
		def = strings.Trim(def, "`")
		if err := f.Value.Set(def); err != nil || f.Value.String() != f.DefValue {
			t.Errorf("README: --%s default %q, but the flag's is %q (%v)", f.Name, def, f.DefValue, err)
		}
	})
	for name := range documented {
		t.Errorf("README documents --%s, which ingest does not have", name)
	}
}

// TestReadmeQuickStart runs the README's Quick start as written: the
// documented command as a child process (built once, run in a fresh
// directory so its ./data is new), the nats pub and curl lines evaluated
// by sh, then SIGTERM and a clean exit. Ports come from EVENTIDE_HTTP and
// EVENTIDE_NATS_LISTEN, as the README says they may.
func TestReadmeQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the ingest binary")
	}
	var command, natsPub string
	var curls []string
	for line := range strings.Lines(readmeSection(t, "Quick start")) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "go run ./cmd/ingest") && command == "":
			command = line
		case strings.HasPrefix(line, "nats pub "):
			natsPub = line
		case strings.HasPrefix(line, "curl "):
			curls = append(curls, line)
		}
	}
	if command == "" || natsPub == "" || len(curls) == 0 {
		t.Fatalf("Quick start lacks the command (%q), a nats pub line (%q) or curl lines (%q)", command, natsPub, curls)
	}

	bin := buildIngest(t)
	dir := t.TempDir()
	httpAddr, natsAddr := freeAddr(t), freeAddr(t)
	cmd := exec.Command(bin, strings.Fields(strings.TrimPrefix(command, "go run ./cmd/ingest"))...)
	cmd.Dir = dir
	cmd.Env = append(envWithoutEventide(), "EVENTIDE_HTTP="+httpAddr, "EVENTIDE_NATS_LISTEN="+natsAddr)
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
	}()
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	waitReady(t, client, "http://"+httpAddr, exited, &stderr)

	// What the nats CLI does with these arguments, done with nats.go:
	// --jetstream publishes and waits for the stream's ack.
	pub := shellArgs(t, natsPub)
	if len(pub) != 4 || pub[0] != "pub" || pub[1] != "--jetstream" {
		t.Fatalf("%s: want nats pub --jetstream SUBJECT BODY, sh gives %q", natsPub, pub)
	}
	subject, body := pub[2], pub[3]
	nc, err := nats.Connect("nats://" + natsAddr) // the nats CLI's default server, moved
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if ack, err := js.Publish(t.Context(), subject, []byte(body)); err != nil || ack.Stream != "EVENTS" {
		t.Fatalf("publish %s through JetStream: %+v, %v; want stored in EVENTS", subject, ack, err)
	}
	var want struct {
		User string
		Data json.RawMessage
	}
	if err := json.Unmarshal([]byte(body), &want); err != nil {
		t.Fatalf("the published body %s is not JSON: %v", body, err)
	}

	for _, line := range curls {
		args := shellArgs(t, line)
		target := args[len(args)-1]
		rest, ok := strings.CutPrefix(target, "http://127.0.0.1:8080/")
		if !ok {
			t.Fatalf("%s: want a URL on the default address http://127.0.0.1:8080/", line)
		}
		url := "http://" + httpAddr + "/" + rest
		deadline := time.Now().Add(20 * time.Second)
		for {
			var body struct {
				Events []struct {
					Type, User string
					Data       json.RawMessage
				}
				Points []struct{ Count int64 }
			}
			getJSON(t, client, url, 200, &body)
			var found bool
			for _, e := range body.Events {
				found = found || e.Type == "click" && e.User == want.User && bytes.Equal(e.Data, want.Data)
			}
			for _, p := range body.Points {
				found = found || p.Count == 1
			}
			if found {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the published event never showed up; last answer %+v; log:\n%s", line, body, stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("after SIGTERM: %v; log:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("still running 30s after SIGTERM; log:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "shutdown complete") || !strings.Contains(stdout.String(), "Eventide is running") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	// The banner names every route the API serves (it once left out the
	// ones added after the first release).
	for _, route := range []string{"/v1/events/{id}", "/v1/events/stream", "/v1/types/top", "/v1/slice", "/v1/stats", "/openapi.yaml"} {
		if !strings.Contains(stdout.String(), route) {
			t.Errorf("the start-up banner does not name %s:\n%s", route, stdout.String())
		}
	}
	for _, sub := range []string{"data/storage/MANIFEST", "data/nats/jetstream"} {
		if _, err := os.Stat(filepath.Join(dir, sub)); err != nil {
			t.Errorf("after the quick start: %v", err)
		}
	}
}

// TestInvalidConfigExitCode checks exit code 2, with a message naming the
// culprit, for a bad flag and a bad variable.
func TestInvalidConfigExitCode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the ingest binary")
	}
	bin := buildIngest(t)
	for _, tt := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--wal-sync", "never"}, "", `eventide: invalid value "never" for flag -wal-sync: want sync or periodic`},
		{nil, "EVENTIDE_LOG_FORMAT=xml", `eventide: invalid value "xml" for EVENTIDE_LOG_FORMAT: want text or json`},
	} {
		cmd := exec.Command(bin, tt.args...)
		cmd.Dir = t.TempDir()
		cmd.Env = append(envWithoutEventide(), tt.env)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), tt.want) {
			t.Errorf("args %q env %q: %v, output:\n%s\nwant exit code 2 and %q", tt.args, tt.env, err, out, tt.want)
		}
	}
}

// buildIngest builds this command once per test binary run.
func buildIngest(t *testing.T) string {
	t.Helper()
	builtOnce.Do(func() {
		dir, err := os.MkdirTemp("", "eventide-ingest-test")
		if err != nil {
			builtErr = err
			return
		}
		builtBin = filepath.Join(dir, "ingest")
		out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput()
		if err != nil {
			builtErr = errors.New("go build: " + err.Error() + "\n" + string(out))
		}
	})
	if builtErr != nil {
		t.Fatal(builtErr)
	}
	return builtBin
}

// shellArgs evaluates a documented command line with sh, as a reader's
// shell would, and returns the arguments its command receives.
func shellArgs(t *testing.T, line string) []string {
	t.Helper()
	out, err := exec.Command("sh", "-c", `nats() { printf '%s\0' "$@"; }; curl() { printf '%s\0' "$@"; }; `+line).Output()
	if err != nil {
		t.Fatalf("sh -c %q: %v", line, err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}

func envWithoutEventide() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envPrefix) {
			env = append(env, kv)
		}
	}
	return env
}

// TestReadmeFuzzCommands checks that every fuzz command in the README's
// Tests section names a fuzz target that exists in the package it runs.
func TestReadmeFuzzCommands(t *testing.T) {
	cmd := regexp.MustCompile(`go test (\./\S+) [^\n]*-fuzz '?\^?(\w+)\$?'?`)
	matches := cmd.FindAllStringSubmatch(readmeSection(t, "Tests"), -1)
	if len(matches) == 0 {
		t.Fatal("README Tests section has no fuzz command")
	}
	for _, m := range matches {
		dir := filepath.Join(filepath.Dir(readmePath), m[1])
		files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
		if err != nil || len(files) == 0 {
			t.Errorf("README: %s: no test files in %s (%v)", m[0], dir, err)
			continue
		}
		found := false
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			found = found || strings.Contains(string(b), "\nfunc "+m[2]+"(f *testing.F)")
		}
		if !found {
			t.Errorf("README: %s: package %s has no fuzz target %s", m[0], m[1], m[2])
		}
	}
}
