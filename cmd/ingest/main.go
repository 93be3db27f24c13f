// Command ingest runs Eventide in one process: an embedded NATS server
// with JetStream (or a connection to an external one), the storage engine,
// the writer that moves events from NATS into storage, and the HTTP API
// (docs/http-api.md) with health, metrics and, on a separate listener,
// pprof.
//
// --version prints the version (module version and VCS revision, or what
// -ldflags -X main.version=... -X main.revision=... set) and exits.
//
// Configuration is flags, each with an EVENTIDE_* environment variable
// (run with -h, or see the README's Configuration table). Exit codes: 0
// after a clean shutdown, 1 on a failure, 2 for an invalid configuration
// (including --replicas above 1 on a NATS server that is not clustered),
// 3 when another process holds the data directory.
//
// It also serves its storage's reads to cmd/query over NATS (the micro
// service eventide-storage on eventide.storage.<--node-id>.*, package
// internal/queryrpc). With --shards and --own-shards it is one storage
// node of a sharded deployment: it reads the whole stream through
// consumers named after --node-id and stores the events and counts of its
// shards only (README, "Split mode").
//
// The first thing it does is lock the data directory (a flock on
// <data>/eventide.lock): a second process on the same --data stops there,
// before it starts an embedded NATS server on the live JetStream store.
//
// SIGINT or SIGTERM shuts down in order: /readyz turns 503, the writer
// finishes and acknowledges its in-flight batch, HTTP drains, storage
// flushes and closes, NATS stops. A second signal exits at once; the WAL
// keeps every acknowledged event.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/eventide/eventide/cmd/internal/cli"
	"github.com/eventide/eventide/writer"
)

func main() {
	ctx, stop := shutdownOnSignal(os.Stderr)
	err := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, errHelp) {
		fmt.Fprintln(os.Stderr, "eventide:", err)
	}
	os.Exit(exitCode(err))
}

func exitCode(err error) int {
	switch code := cli.ExitCode(err); {
	case code != 1:
		return code
	case errors.Is(err, writer.ErrReplicasUnsupported):
		return 2
	case errors.Is(err, errDataDirInUse):
		return 3
	default:
		return 1
	}
}

// shutdownOnSignal returns a context cancelled by the first SIGINT or
// SIGTERM; a second one exits the process at once.
func shutdownOnSignal(stderr io.Writer) (context.Context, func()) {
	return cli.ShutdownOnSignal("eventide", stderr,
		", without a clean shutdown (the WAL keeps every acknowledged event)")
}

// run runs the process until ctx is cancelled or a part fails, then
// shuts down. lookupEnv reads the EVENTIDE_* variables; the banner goes
// to stdout, logs to stderr.
func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) error {
	build := readBuildInfo()
	if wantsVersion(args) {
		fmt.Fprintln(stdout, build)
		return nil
	}
	cfg, err := parseConfig(args, lookupEnv, stderr)
	if err != nil {
		return err
	}
	logger := cli.NewLogger(cfg.LogLevel, cfg.LogFormat, stderr)
	logger.Info("eventide starting", append([]any{"version", build.Version, "revision", build.Revision, "go", build.GoVersion},
		cfg.logAttrs()...)...)
	if procs, changed := applyExtraProcs(cfg.ExtraProcs, lookupEnv); changed {
		logger.Info("Go Ps beyond the runtime's default", "gomaxprocs", procs, "extra_procs", cfg.ExtraProcs)
	}

	n, err := start(ctx, cfg, build, logger)
	if err != nil {
		if ctx.Err() != nil {
			// Stopped while starting, as asked: not a failure.
			logger.Info("stopped before the start completed", "cause", context.Cause(ctx), "err", err)
			return nil
		}
		logger.Error("cannot start", "err", err)
		return err
	}
	printBanner(stdout, n)

	var failure error
	select {
	case <-ctx.Done():
		logger.Info("shutting down", "cause", context.Cause(ctx))
	case failure = <-n.failed:
		logger.Error("shutting down after a failure", "err", failure)
	}
	if err := n.shutdown(); err != nil {
		return errors.Join(failure, err)
	}
	return failure
}
