package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// TestParse: the module version and VCS revision come from the build info
// (go build stamps them in a checkout unless -buildvcs=false), a modified
// tree is marked, and -ldflags -X overrides win.
func TestParse(t *testing.T) {
	stamped := &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "5edce8dd27"}, {Key: "vcs.modified", Value: "false"}}}
	dirty := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "5edce8dd27"}, {Key: "vcs.modified", Value: "true"}}}
	gov := runtime.Version()
	for _, tt := range []struct {
		name         string
		bi           *debug.BuildInfo
		version, rev string
		want         Info
	}{
		{"stamped", stamped, "", "", Info{"ingest", "v1.4.0", "5edce8dd27", gov}},
		{"modified tree", dirty, "", "", Info{"ingest", "(devel)", "5edce8dd27+dirty", gov}},
		{"no vcs", &debug.BuildInfo{}, "", "", Info{"ingest", "(devel)", "unknown", gov}},
		{"no build info", nil, "", "", Info{"ingest", "(devel)", "unknown", gov}},
		{"ldflags win", dirty, "v2.0.0", "abc", Info{"ingest", "v2.0.0", "abc", gov}},
	} {
		if got := Parse("ingest", tt.bi, tt.version, tt.rev); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestString(t *testing.T) {
	got := Info{"query", "v1.2.0", "4f1c2d9", "go1.26.8"}.String()
	if want := "eventide query v1.2.0 (revision 4f1c2d9, go1.26.8)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

func TestWantsVersion(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want bool
	}{
		{[]string{"--version"}, true},
		{[]string{"--data", "x", "-version"}, true},
		{[]string{"--version=true"}, true},
		{[]string{"--data", "version"}, false},
		{nil, false},
	} {
		if got := WantsVersion(tt.args); got != tt.want {
			t.Errorf("%q: %v, want %v", tt.args, got, tt.want)
		}
	}
}
