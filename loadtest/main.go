// Command loadtest is Eventide's load-testing harness: it drives real NATS
// and HTTP traffic against a running Eventide (or one it spawns), open
// loop at constant arrival rates, and reports what the server did with
// numbers that can be trusted: latencies from each operation's intended
// start in HDR histograms, operations it could not start on time counted
// as dropped, a correctness check at the end, objectives that pass or
// fail, and JSON and HTML reports; --find-max ramps the rate, for
// Eventide and for raw JetStream on the same server, until an objective
// breaks. The social workload builds a follow graph with Zipf follower
// counts (some authors above the fan-out threshold), then posts, follows,
// unfollows and deletes, and times probe posts into their followers'
// timelines (fan-out lag). See loadtest/README.md.
//
// Usage:
//
//	go run ./loadtest run --spawn --duration 30s --rate 2000 --json report.json --html report.html
//	go run ./loadtest run --nats-url nats://host:4222 --http-url http://host:8080 --slo 'p99(query.latest)<10ms,drop<0.1%'
//	go run ./loadtest run --spawn --find-max --rate 5000 --duration 20s --json findmax.json
//	go run ./loadtest run --spawn --workload events,queries,social --users 20000 --post-rate 100 --json social.json
//
// Exit codes: 0 when every objective and the correctness check passed, 1
// when one failed (or the run could not complete), 2 for a bad command
// line.
//
// The parts live in loadtest/internal: arrival (the open-loop
// scheduler), hist (HDR histograms), workload (seeded generators), report
// (JSON, summary, HTML, objectives) and target (--spawn).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := runMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitPass   = 0
	exitFail   = 1
	exitConfig = 2
)

const usage = `usage: loadtest run [flags]   (loadtest run -h lists the flags)

Drives NATS and HTTP traffic at constant arrival rates against Eventide and
reports latencies, drops, errors, a correctness check and objectives.
`

// runMain runs the command with args and returns the exit code.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return exitConfig
		}
		return exitPass
	}
	if args[0] != "run" {
		fmt.Fprintf(stderr, "loadtest: unknown command %q\n%s", args[0], usage)
		return exitConfig
	}
	cfg, err := parseConfig(args[1:], stderr)
	if errors.Is(err, errHelp) {
		return exitPass
	}
	if err != nil {
		fmt.Fprintln(stderr, "loadtest:", err)
		return exitConfig
	}
	passed, err := run(ctx, cfg, stdout, stderr)
	if err != nil {
		var ce configError
		fmt.Fprintln(stderr, "loadtest:", err)
		if errors.As(err, &ce) {
			return exitConfig
		}
		return exitFail
	}
	if !passed {
		return exitFail
	}
	return exitPass
}
