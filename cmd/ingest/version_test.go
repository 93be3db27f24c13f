package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// TestVersionLdflags builds ingest with -ldflags -X overrides: --version
// prints them (beside another flag, and one it would refuse) and exits 0
// without starting anything.
func TestVersionLdflags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the ingest binary")
	}
	bin := filepath.Join(t.TempDir(), "ingest")
	out, err := exec.Command("go", "build", "-o", bin, "-ldflags", "-X main.version=v9.8.7 -X main.revision=0123abc", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"--version"}, {"--data", t.TempDir(), "-version"}, {"--wal-sync", "never", "--version"}} {
		cmd := exec.Command(bin, args...)
		cmd.Env = envWithoutEventide()
		out, err := cmd.CombinedOutput()
		want := "eventide ingest v9.8.7 (revision 0123abc, " + runtime.Version() + ")\n"
		if err != nil || string(out) != want {
			t.Errorf("ingest %q: %v, output %q, want exit 0 and %q", args, err, out, want)
		}
	}
}

func TestVersionInProcess(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"--version"}, envFrom(nil), &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if got, want := stdout.String(), readBuildInfo().String()+"\n"; got != want || stderr.Len() != 0 {
		t.Fatalf("stdout %q stderr %q, want %q and nothing", got, stderr.String(), want)
	}
}
