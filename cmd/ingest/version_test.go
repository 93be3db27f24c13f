package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
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

// TestParseBuildInfo: the module version and VCS revision come from the
// build info (go build stamps them in a checkout unless -buildvcs=false),
// a modified tree is marked, and -ldflags -X overrides win.
func TestParseBuildInfo(t *testing.T) {
	stamped := &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "5edce8dd27"}, {Key: "vcs.modified", Value: "false"}}}
	dirty := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "5edce8dd27"}, {Key: "vcs.modified", Value: "true"}}}
	gov := runtime.Version()
	for _, tt := range []struct {
		name         string
		bi           *debug.BuildInfo
		version, rev string
		want         buildInfo
	}{
		{"stamped", stamped, "", "", buildInfo{"v1.4.0", "5edce8dd27", gov}},
		{"modified tree", dirty, "", "", buildInfo{"(devel)", "5edce8dd27+dirty", gov}},
		{"no vcs", &debug.BuildInfo{}, "", "", buildInfo{"(devel)", "unknown", gov}},
		{"no build info", nil, "", "", buildInfo{"(devel)", "unknown", gov}},
		{"ldflags win", dirty, "v2.0.0", "abc", buildInfo{"v2.0.0", "abc", gov}},
	} {
		if got := parseBuildInfo(tt.bi, tt.version, tt.rev); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
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
