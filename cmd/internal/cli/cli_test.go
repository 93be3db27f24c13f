package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestEnvName(t *testing.T) {
	for _, tt := range []struct{ flag, want string }{
		{"data", "EVENTIDE_DATA"},
		{"nats-url", "EVENTIDE_NATS_URL"},
		{"max-count-buckets", "EVENTIDE_MAX_COUNT_BUCKETS"},
	} {
		if got := EnvName(tt.flag); got != tt.want {
			t.Errorf("EnvName(%q) = %q, want %q", tt.flag, got, tt.want)
		}
	}
}

func TestValues(t *testing.T) {
	var (
		n    int
		d    time.Duration
		addr string
		list []string
		b    bool
	)
	choice := &Choice{Value: "text", Choices: []string{"text", "json"}}
	for _, tt := range []struct {
		name  string
		value flag.Value
		in    string
		want  string // String() after Set; or the error's text
		isErr bool
	}{
		{"int", Int{N: &n, Lo: 1, Hi: 5}, "3", "3", false},
		{"int at hi", Int{N: &n, Lo: 1, Hi: 5}, "5", "5", false},
		{"int above", Int{N: &n, Lo: 1, Hi: 5}, "6", "6 is outside 1..5", true},
		{"int below", Int{N: &n, Lo: 0, Hi: 5}, "-1", "-1 is outside 0..5", true},
		{"int not a number", Int{N: &n, Lo: 1, Hi: 5}, "many", "not a whole number", true},
		{"duration", Duration{D: &d, Min: time.Second}, "90s", "1m30s", false},
		{"duration zero allowed", Duration{D: &d}, "0", "0s", false},
		{"duration below", Duration{D: &d, Min: time.Second}, "10ms", "10ms is below the minimum 1s", true},
		{"duration bad", Duration{D: &d}, "soon", "not a duration such as 100ms, 5m or 24h", true},
		{"addr", Addr{Addr: &addr}, "127.0.0.1:0", "127.0.0.1:0", false},
		{"addr optional empty", Addr{Addr: &addr, Optional: true}, "", "", false},
		{"addr empty", Addr{Addr: &addr}, "", "not host:port such as 127.0.0.1:8080", true},
		{"addr no port", Addr{Addr: &addr}, "8080", "not host:port such as 127.0.0.1:8080", true},
		{"addr port range", Addr{Addr: &addr}, "127.0.0.1:99999", `port "99999" is not a number in 0..65535`, true},
		{"choice", choice, "json", "json", false},
		{"choice other", choice, "xml", "want text or json", true},
		{"list", &List{List: &list}, " a, b ,c", "a,b,c", false},
		{"list empty item", &List{List: &list}, "a,", `empty item in "a,"`, true},
		{"list empty", &List{List: &list}, "", `empty item in ""`, true},
		{"list empty ok", &List{List: &list, EmptyOK: true}, " ", "", false},
		{"bool", Bool{B: &b}, "true", "true", false},
		{"bool zero", Bool{B: &b}, "0", "false", false},
		{"bool bad", Bool{B: &b}, "yes", "want true or false", true},
	} {
		err := tt.value.Set(tt.in)
		switch {
		case tt.isErr && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: Set(%q) = %v, want an error with %q", tt.name, tt.in, err, tt.want)
		case !tt.isErr && err != nil:
			t.Errorf("%s: Set(%q): %v", tt.name, tt.in, err)
		case !tt.isErr && tt.value.String() != tt.want:
			t.Errorf("%s: Set(%q) gives %q, want %q", tt.name, tt.in, tt.value.String(), tt.want)
		}
	}
	// The flag package calls String on a zero value for the -h defaults.
	for _, v := range []flag.Value{Int{}, Duration{}, Addr{}, &Choice{}, &List{}, Bool{}} {
		_ = v.String()
	}
}

func TestApplyEnv(t *testing.T) {
	newFlags := func() (*flag.FlagSet, *int, *string) {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		n := 1
		fs.Var(Int{N: &n, Lo: 1, Hi: 10}, "fetch-batch", "")
		s := fs.String("stream", "EVENTS", "")
		return fs, &n, s
	}
	for _, tt := range []struct {
		name       string
		args       []string
		env        map[string]string
		wantN      int
		wantStream string
		wantSet    []string // flags explicit afterwards
		wantErr    string
	}{
		{"none", nil, nil, 1, "EVENTS", nil, ""},
		{"env", nil, map[string]string{"EVENTIDE_FETCH_BATCH": "7", "EVENTIDE_STREAM": "B"}, 7, "B", []string{"fetch-batch", "stream"}, ""},
		{"flag wins", []string{"--stream", "A"}, map[string]string{"EVENTIDE_STREAM": "B"}, 1, "A", []string{"stream"}, ""},
		{"empty is unset", nil, map[string]string{"EVENTIDE_STREAM": ""}, 1, "EVENTS", nil, ""},
		{"invalid", nil, map[string]string{"EVENTIDE_FETCH_BATCH": "11", "EVENTIDE_STREAM": "B"}, 1, "B", []string{"stream"},
			`invalid value "11" for EVENTIDE_FETCH_BATCH: 11 is outside 1..10`},
	} {
		fs, n, stream := newFlags()
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		explicit := Explicit(fs)
		err := ApplyEnv(fs, explicit, func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.wantErr)
		}
		if *n != tt.wantN || *stream != tt.wantStream {
			t.Errorf("%s: fetch-batch %d, stream %q; want %d, %q", tt.name, *n, *stream, tt.wantN, tt.wantStream)
		}
		if len(explicit) != len(tt.wantSet) {
			t.Errorf("%s: explicit %v, want %v", tt.name, explicit, tt.wantSet)
		}
		for _, name := range tt.wantSet {
			if !explicit[name] {
				t.Errorf("%s: explicit %v, want %v", tt.name, explicit, tt.wantSet)
			}
		}
	}
}

func TestExitCode(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{ErrHelp, 0},
		{UsageError{Err: errors.New("bad flag")}, 2},
		{fmt.Errorf("cannot start: %w", UsageError{Err: errors.New("bad flag")}), 2},
		{errors.New("cannot connect"), 1},
	} {
		if got := ExitCode(tt.err); got != tt.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
	inner := errors.New("inner")
	if err := (UsageError{Err: inner}); !errors.Is(err, inner) || err.Error() != "inner" {
		t.Errorf("UsageError %v does not wrap %v", err, inner)
	}
}

func TestPrintFlags(t *testing.T) {
	var b strings.Builder
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(&b)
	fs.String("nats-url", "", "`URL` of the server")
	fs.Bool("fanout", true, "run the fan-out worker")
	PrintFlags(fs)
	want := "  --fanout  (EVENTIDE_FANOUT, default true)\n    \trun the fan-out worker\n" +
		"  --nats-url URL  (EVENTIDE_NATS_URL, default \"\")\n    \tURL of the server\n"
	if b.String() != want {
		t.Errorf("PrintFlags:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestLogAttrs(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.String("nats-url", "nats://u:url-s3cret@127.0.0.1:4222", "")
	fs.String("http-token", "s3cret", "")
	fs.String("nats-password", "", "") // empty: shown as empty
	fs.String("stream", "EVENTS", "")
	var b bytes.Buffer
	slog.New(slog.NewTextHandler(&b, nil)).Info("starting", LogAttrs(fs)...)
	out := b.String()
	if strings.Contains(out, "s3cret") || !strings.Contains(out, "http-token=REDACTED") ||
		!strings.Contains(out, "nats-password=\"\"") || !strings.Contains(out, "stream=EVENTS") {
		t.Errorf("log line %q: want the secrets redacted, the rest shown", out)
	}
}

func TestNewLogger(t *testing.T) {
	for _, tt := range []struct {
		level  slog.Level
		format string
		json   bool
	}{
		{slog.LevelInfo, "text", false},
		{slog.LevelWarn, "json", true},
	} {
		var b bytes.Buffer
		l := NewLogger(tt.level, tt.format, &b)
		l.Info("info line")
		l.Warn("warn line")
		out := b.String()
		if strings.Contains(out, "info line") != (tt.level <= slog.LevelInfo) || !strings.Contains(out, "warn line") {
			t.Errorf("level %v: %q", tt.level, out)
		}
		first, _, _ := strings.Cut(out, "\n")
		if json.Valid([]byte(first)) != tt.json {
			t.Errorf("format %s: %q", tt.format, first)
		}
	}
}

// TestShutdownOnSignal: the first SIGTERM cancels the context with its
// cause (the second one, which exits, is cmd/ingest's
// TestSecondSignalExitsAtOnce).
func TestShutdownOnSignal(t *testing.T) {
	ctx, stop := ShutdownOnSignal("test", io.Discard, "")
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGTERM did not cancel the context")
	}
	if cause := context.Cause(ctx); cause == nil || cause.Error() != "received terminated" {
		t.Errorf("cause %v, want received terminated", cause)
	}
}
