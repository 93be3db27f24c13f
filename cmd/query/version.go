package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
)

// version and revision override what the build records, for builds
// outside a module or a VCS checkout:
//
//	go build -ldflags "-X main.version=v1.2.0 -X main.revision=4f1c2d9" ./cmd/query
var version, revision string

// buildInfo says which build is running: in the start-up log, --version
// and eventide_build_info.
type buildInfo struct {
	Version   string // the module version, "(devel)" for a plain go build in a checkout
	Revision  string // the VCS commit, "+dirty" appended for modified sources; "unknown" without VCS
	GoVersion string
}

// readBuildInfo reads the build's version and VCS revision
// (runtime/debug.ReadBuildInfo) under the -ldflags -X overrides.
func readBuildInfo() buildInfo {
	bi, _ := debug.ReadBuildInfo()
	return parseBuildInfo(bi, version, revision)
}

// parseBuildInfo is readBuildInfo's logic; bi may be nil (a binary built
// without module support).
func parseBuildInfo(bi *debug.BuildInfo, versionOverride, revisionOverride string) buildInfo {
	b := buildInfo{Version: "(devel)", Revision: "unknown", GoVersion: runtime.Version()}
	if bi != nil {
		if bi.Main.Version != "" {
			b.Version = bi.Main.Version
		}
		var dirty bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && b.Revision != "unknown" {
			b.Revision += "+dirty"
		}
	}
	if versionOverride != "" {
		b.Version = versionOverride
	}
	if revisionOverride != "" {
		b.Revision = revisionOverride
	}
	return b
}

func (b buildInfo) String() string {
	return fmt.Sprintf("eventide query %s (revision %s, %s)", b.Version, b.Revision, b.GoVersion)
}

// wantsVersion reports whether args ask for --version. It is not in the
// flag set: it has no EVENTIDE_* variable, and must work beside any
// other flags, valid or not.
func wantsVersion(args []string) bool {
	return slices.ContainsFunc(args, func(a string) bool {
		return a == "-version" || a == "--version" || a == "-version=true" || a == "--version=true"
	})
}
