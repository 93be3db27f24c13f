package main

import "github.com/eventide/eventide/cmd/internal/buildinfo"

// version and revision override what the build records, for builds
// outside a module or a VCS checkout:
//
//	go build -ldflags "-X main.version=v1.2.0 -X main.revision=4f1c2d9" ./cmd/ingest
var version, revision string

// buildInfo says which build is running: in the start-up log, --version
// and eventide_build_info.
type buildInfo = buildinfo.Info

func readBuildInfo() buildInfo { return buildinfo.Read("ingest", version, revision) }

func wantsVersion(args []string) bool { return buildinfo.WantsVersion(args) }
