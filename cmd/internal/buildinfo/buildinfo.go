// Package buildinfo says which build of an Eventide command is running:
// the module version and VCS revision Go stamps into the binary
// (runtime/debug.ReadBuildInfo), under the -ldflags -X overrides a
// release build sets. Both commands print it for --version, log it at
// start-up and export it as eventide_build_info.
//
// Invariant: a binary built in a modified checkout says so ("+dirty"
// after the revision), and an override always wins over what Go stamped.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
)

// Info is one build of one command.
type Info struct {
	Command   string // "ingest", "query"
	Version   string // the module version, "(devel)" for a plain go build in a checkout
	Revision  string // the VCS commit, "+dirty" appended for modified sources; "unknown" without VCS
	GoVersion string
}

// Read reads the running binary's build under the overrides (empty: none),
// which a command's main package takes from its -ldflags -X variables.
func Read(command, versionOverride, revisionOverride string) Info {
	bi, _ := debug.ReadBuildInfo()
	return Parse(command, bi, versionOverride, revisionOverride)
}

// Parse is Read's logic; bi may be nil (a binary built without module
// support).
func Parse(command string, bi *debug.BuildInfo, versionOverride, revisionOverride string) Info {
	b := Info{Command: command, Version: "(devel)", Revision: "unknown", GoVersion: runtime.Version()}
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

// String is the --version line: "eventide ingest v1.2.0 (revision 4f1c2d9, go1.26.8)".
func (b Info) String() string {
	return fmt.Sprintf("eventide %s %s (revision %s, %s)", b.Command, b.Version, b.Revision, b.GoVersion)
}

// WantsVersion reports whether args ask for --version. It is not in a
// command's flag set: it has no EVENTIDE_* variable, and must work beside
// any other flags, valid or not.
func WantsVersion(args []string) bool {
	return slices.ContainsFunc(args, func(a string) bool {
		return a == "-version" || a == "--version" || a == "-version=true" || a == "--version=true"
	})
}
