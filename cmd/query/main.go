// Command query serves Eventide's HTTP API (docs/http-api.md) apart from
// ingestion: a stateless process that reads the storage nodes (cmd/ingest
// processes, each registering the storage read service of package
// internal/queryrpc) over NATS request/reply. Each slice of a partition
// goes to the node owning the partition's shard (xxhash64 of the
// partition key modulo --shards; owners from --owners); results merge in
// the same reader, with the same limits, as in the all-in-one process,
// and the same handler serves them. Run as many as the load needs.
//
// A shard whose node does not answer within --node-timeout is left out:
// the answer says "partial": true with "missing_shards", or is a 503 when
// the request says complete=true. /readyz names the nodes that do not
// answer. /v1/dlq reads the dead-letter stream directly. /v1/stats sums
// the nodes' stats (cmd/query/stats.go); /v1/events/stream relays the
// events the nodes publish once stored (queryrpc.TailRelay). The event type
// settings (TTLs, sub-partitions) are read from a storage node at start;
// restart cmd/query after changing the nodes' --types.
//
// Configuration is flags, each with an EVENTIDE_* environment variable
// (run with -h, or see the README's "Split mode"). The garbage collector
// runs at DefaultGCPercent (400) unless GOGC is set (gc.go), and on a host
// of at most SmallHostCPUs CPUs with GOMAXPROCS=1 unless GOMAXPROCS is set
// (procs.go). Exit codes: 0 after a clean shutdown, 1 on a failure, 2 for
// an invalid configuration.
// SIGINT or SIGTERM shuts down: /readyz turns 503, HTTP drains, the NATS
// connection closes; a second signal exits at once.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/eventide/eventide/cmd/internal/cli"
	"github.com/eventide/eventide/internal/natsconn"
)

func main() {
	// In main, not run: the tests run run in their own process.
	procs := applyMaxProcs(os.LookupEnv, runtime.GOMAXPROCS)
	ctx, stop := shutdownOnSignal(os.Stderr)
	err := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr, "gomaxprocs", procs)
	stop()
	if err != nil && !errors.Is(err, errHelp) {
		fmt.Fprintln(os.Stderr, "eventide query:", err)
	}
	os.Exit(exitCode(err))
}

// exitCode: 0 after a clean shutdown or -h, 2 for an invalid
// configuration, 1 on a failure.
func exitCode(err error) int { return cli.ExitCode(err) }

// shutdownOnSignal returns a context cancelled by the first SIGINT or
// SIGTERM; a second one exits the process at once.
func shutdownOnSignal(stderr io.Writer) (context.Context, func()) {
	return cli.ShutdownOnSignal("eventide query", stderr, "")
}

// run runs the process until ctx is cancelled or a part fails, then
// shuts down.
// startAttrs are logged with the start-up line.
func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer, startAttrs ...any) error {
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
	gc := applyGCPercent(lookupEnv)
	logger.Info("eventide query starting", append([]any{"version", build.Version, "revision", build.Revision, "go", build.GoVersion,
		"gc_percent", gc}, append(startAttrs, cfg.logAttrs()...)...)...)
	s, err := start(ctx, cfg, build, logger)
	if err != nil {
		if ctx.Err() != nil {
			logger.Info("stopped before the start completed", "cause", context.Cause(ctx), "err", err)
			return nil
		}
		logger.Error("cannot start", "err", err)
		return err
	}
	fmt.Fprintf(stdout, "\nEventide query service is running. Ctrl-C stops it.\n  HTTP   http://%s\n  NATS   %s\n  shards %d over nodes %v\n\n",
		s.httpLn.Addr(), natsconn.Redact(cfg.NATSURL), cfg.Shards, s.client.Nodes())
	var failure error
	select {
	case <-ctx.Done():
		logger.Info("shutting down", "cause", context.Cause(ctx))
	case failure = <-s.failed:
		logger.Error("shutting down after a failure", "err", failure)
	}
	return errors.Join(failure, s.shutdown())
}
