package deploy

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDockerfileBuildStage runs the `go build` commands of the
// Dockerfile's build stage, as written there, from the repository root:
// no Docker daemon is needed to know that they build, that the
// --build-arg VERSION and REVISION reach --version (a -X flag naming a
// variable that does not exist is silently ignored), and that the
// binaries are static, as the distroless runtime stage (no libc) needs.
// What it cannot check here is the base images themselves.
func TestDockerfileBuildStage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds three binaries")
	}
	t.Parallel()
	dockerfile, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	cmds := dockerfileGoBuilds(t, string(dockerfile))
	if len(cmds) != 3 {
		t.Fatalf("Dockerfile: %d go build commands, want 3 (ingest, query, nats-server): %q", len(cmds), cmds)
	}
	if !strings.Contains(string(dockerfile), "ENV CGO_ENABLED=0") {
		t.Error("Dockerfile: the build stage does not set CGO_ENABLED=0; the distroless runtime has no libc")
	}
	out := t.TempDir()
	const version, revision = "v9.8.7-test", "abc1234"
	for _, c := range cmds {
		c = strings.NewReplacer("${VERSION}", version, "${REVISION}", revision, "/out/", out+"/").Replace(c)
		args := splitShellWords(t, c)
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("Dockerfile build step %q: %v\n%s", c, err, b)
		}
	}
	for _, bin := range []string{"ingest", "query", "nats-server"} {
		path := filepath.Join(out, bin)
		f, err := elf.Open(path)
		if err != nil {
			t.Fatalf("%s: %v", bin, err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s is dynamically linked; the distroless static image cannot run it", bin)
			}
		}
		f.Close()
	}
	for _, bin := range []string{"ingest", "query"} {
		b, err := exec.Command(filepath.Join(out, bin), "--version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --version: %v\n%s", bin, err, b)
		}
		if !strings.Contains(string(b), version) || !strings.Contains(string(b), revision) {
			t.Errorf("%s --version = %q; want the build args' version %s and revision %s", bin, b, version, revision)
		}
	}
	if b, err := exec.Command(filepath.Join(out, "nats-server"), "--version").CombinedOutput(); err != nil {
		t.Errorf("nats-server --version: %v\n%s", err, b)
	}
}

// dockerfileGoBuilds returns the go build commands of the Dockerfile's RUN
// instructions (continuation lines joined, split at &&).
func dockerfileGoBuilds(t *testing.T, dockerfile string) []string {
	t.Helper()
	joined := strings.ReplaceAll(dockerfile, "\\\n", " ")
	var out []string
	for _, line := range strings.Split(joined, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "RUN ") {
			continue
		}
		for _, part := range strings.Split(strings.TrimPrefix(line, "RUN "), "&&") {
			part = regexp.MustCompile(`\s+`).ReplaceAllString(strings.TrimSpace(part), " ")
			if strings.HasPrefix(part, "go build ") {
				out = append(out, part)
			}
		}
	}
	return out
}

// splitShellWords splits a command line at spaces outside double quotes,
// dropping the quotes: enough for the Dockerfile's go build lines.
func splitShellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inQuote, started := false, false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote, started = !inQuote, true
		case r == ' ' && !inQuote:
			if started {
				words = append(words, cur.String())
				cur.Reset()
				started = false
			}
		default:
			cur.WriteRune(r)
			started = true
		}
	}
	if inQuote {
		t.Fatalf("unbalanced quote in %q", s)
	}
	if started {
		words = append(words, cur.String())
	}
	return words
}
