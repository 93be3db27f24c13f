// Package cli is the command-line plumbing cmd/ingest and cmd/query share,
// so that both read flags, environment variables and signals the same way:
//
//   - the EVENTIDE_* environment fallback (EnvName, ApplyEnv): every flag
//     --some-name can also be set as EVENTIDE_SOME_NAME; a flag on the
//     command line wins;
//   - the -h listing of the flags with their variables and defaults
//     (PrintFlags);
//   - the flag.Value types of checked flags (Int, Duration, Bool, Addr, Choice,
//     List);
//   - the usage error (UsageError, exit code 2), -h (ErrHelp, exit code 0)
//     and the exit code of the errors every command has (ExitCode);
//   - the logger of --log-level and --log-format (NewLogger) and the
//     configuration log line with its secrets redacted (LogAttrs);
//   - shutdown on SIGINT or SIGTERM (ShutdownOnSignal).
//
// What a flag means, and the checks across flags, stay in each command.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/eventide/eventide/internal/natsconn"
)

// EnvPrefix: every flag --some-name can also be set as EVENTIDE_SOME_NAME.
const EnvPrefix = "EVENTIDE_"

// EnvName is the environment variable of the flag named flagName:
// "nats-url" is EVENTIDE_NATS_URL.
func EnvName(flagName string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// UsageError is a configuration the process refuses: exit code 2.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// ErrHelp: -h or --help was asked for; the usage is printed, exit code 0.
var ErrHelp = flag.ErrHelp

// ExitCode is the exit code of err for the errors every command has: 0 for
// nil and ErrHelp, 2 for a UsageError, 1 otherwise. A command with more
// codes checks its own errors where this returns 1.
func ExitCode(err error) int {
	var usage UsageError
	switch {
	case err == nil, errors.Is(err, ErrHelp):
		return 0
	case errors.As(err, &usage):
		return 2
	default:
		return 1
	}
}

// ApplyEnv sets each flag of fs that is not in explicit from its
// environment variable (EnvName), read through lookupEnv (os.LookupEnv in
// main); an empty variable counts as unset. It adds the flags it sets to
// explicit. The error joins one error per invalid value; wrap it in a
// UsageError.
func ApplyEnv(fs *flag.FlagSet, explicit map[string]bool, lookupEnv func(string) (string, bool)) error {
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if explicit[f.Name] {
			return
		}
		v, ok := lookupEnv(EnvName(f.Name))
		if !ok || v == "" {
			return
		}
		if err := f.Value.Set(v); err != nil {
			errs = append(errs, fmt.Errorf("invalid value %q for %s: %v", v, EnvName(f.Name), err))
			return
		}
		explicit[f.Name] = true
	})
	return errors.Join(errs...)
}

// Explicit is the set of flags of fs set on the command line (fs parsed).
func Explicit(fs *flag.FlagSet) map[string]bool {
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	return explicit
}

// PrintFlags writes fs's flags to fs.Output() as the -h listing does: the
// flag with its argument name, its environment variable and default, and
// its usage.
func PrintFlags(fs *flag.FlagSet) {
	w := fs.Output()
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  --%s", f.Name)
		if name != "" {
			fmt.Fprintf(w, " %s", name)
		}
		def := f.DefValue
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(w, "  (%s, default %s)\n    \t%s\n", EnvName(f.Name), def, usage)
	})
}

// SecretFlags are the flags whose values LogAttrs shows as REDACTED: the
// HTTP token (httpflags.SecretFlag; package httpflags uses this package's
// flag values, so it is named here) and NATS's secrets (package natsconn).
var SecretFlags = append([]string{"http-token"}, natsconn.SecretFlags...)

// LogAttrs is the effective configuration in fs as log attributes, one per
// flag, with the password in --nats-url and the SecretFlags redacted.
func LogAttrs(fs *flag.FlagSet) []any {
	var attrs []any
	fs.VisitAll(func(f *flag.Flag) {
		v := f.Value.String()
		if f.Name == "nats-url" {
			v = natsconn.Redact(v)
		}
		if slices.Contains(SecretFlags, f.Name) && v != "" {
			v = "REDACTED"
		}
		attrs = append(attrs, slog.String(f.Name, v))
	})
	return attrs
}

// NewLogger is the logger of --log-level and --log-format (text or json),
// writing to w.
func NewLogger(level slog.Level, format string, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// ShutdownOnSignal returns a context cancelled by the first SIGINT or
// SIGTERM, with cause "received <signal>", and a function that stops
// listening. A second signal exits the process at once with exit code 1,
// after writing "<prog>: received <signal> again: exiting now<note>" to
// stderr.
func ShutdownOnSignal(prog string, stderr io.Writer, note string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		cancel(fmt.Errorf("received %s", sig))
		sig = <-sigs
		fmt.Fprintf(stderr, "%s: received %s again: exiting now%s\n", prog, sig, note)
		os.Exit(1)
	}()
	return ctx, func() { signal.Stop(sigs) }
}
