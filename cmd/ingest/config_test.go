package main

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventide/eventide/fanout"
	"github.com/eventide/eventide/storage"
)

func envFrom(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

func TestConfigDefaults(t *testing.T) {
	c, err := parseConfig(nil, envFrom(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "./data" || c.HTTPAddr != "127.0.0.1:8080" || c.NATSListen != "127.0.0.1:4222" || c.NATSURL != "" ||
		c.AdminAddr != "" || c.WALSync != storage.WALSync || c.LogLevel != slog.LevelInfo || c.LogFormat != "text" ||
		c.Writer.Stream != "EVENTS" || strings.Join(c.Writer.Subjects, ",") != "events.>" || c.Writer.Retention != "limits" ||
		c.Reader.FailTombstones != 100000 || c.Types == nil || c.Writer.Types != c.Types || c.Reader.Types != c.Types ||
		c.Fanout.Options.Workers != fanout.DefaultOptions().Workers {
		t.Fatalf("defaults: %+v", c)
	}
	c, err = parseConfig(nil, envFrom(map[string]string{"EVENTIDE_FANOUT_WORKERS": "4"}), io.Discard)
	if err != nil || c.Fanout.Options.Workers != 4 {
		t.Fatalf("EVENTIDE_FANOUT_WORKERS=4: workers %d, %v", c.Fanout.Options.Workers, err)
	}
}

func TestConfigFlagBeatsEnv(t *testing.T) {
	c, err := parseConfig(
		[]string{"--data", "/flag", "--wal-sync=periodic", "--types", "click:ttl=24h"},
		envFrom(map[string]string{
			"EVENTIDE_DATA":       "/env",
			"EVENTIDE_HTTP":       "0.0.0.0:9000",
			"EVENTIDE_WAL_SYNC":   "sync",
			"EVENTIDE_LOG_LEVEL":  "debug",
			"EVENTIDE_LOG_FORMAT": "json",
			"EVENTIDE_SUBJECTS":   "events.>, more.>",
			"EVENTIDE_MAX_SKEW":   "1m",
			"EVENTIDE_ADMIN":      "",
		}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/flag" || c.WALSync != storage.WALPeriodic || c.HTTPAddr != "0.0.0.0:9000" ||
		c.LogLevel != slog.LevelDebug || c.LogFormat != "json" || c.Writer.MaxSkew != time.Minute ||
		strings.Join(c.Writer.Subjects, "|") != "events.>|more.>" || c.Types.Settings("click").TTL != 24*time.Hour {
		t.Fatalf("got %+v", c)
	}
	if !c.explicit["http"] || c.explicit["admin"] || c.explicit["nats-url"] {
		t.Fatalf("explicit = %v: want http (from the environment) and neither admin (empty) nor nats-url", c.explicit)
	}
}

// TestConfigCompactionThroughput: --compaction-throughput (MiB/s) and its
// variable set storage.Options.CompactionThroughput's value; 0, the
// default, is unlimited; negative is refused.
func TestConfigCompactionThroughput(t *testing.T) {
	c, err := parseConfig(nil, envFrom(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.CompactionThroughputMiB != 0 {
		t.Fatalf("default --compaction-throughput %d, want 0 (unlimited)", c.CompactionThroughputMiB)
	}
	c, err = parseConfig([]string{"--compaction-throughput", "16"}, envFrom(map[string]string{"EVENTIDE_COMPACTION_THROUGHPUT": "8"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.CompactionThroughputMiB != 16 {
		t.Fatalf("--compaction-throughput 16 gave %d", c.CompactionThroughputMiB)
	}
	c, err = parseConfig(nil, envFrom(map[string]string{"EVENTIDE_COMPACTION_THROUGHPUT": "8"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.CompactionThroughputMiB != 8 {
		t.Fatalf("EVENTIDE_COMPACTION_THROUGHPUT=8 gave %d", c.CompactionThroughputMiB)
	}
	if _, err := parseConfig([]string{"--compaction-throughput", "-1"}, envFrom(nil), io.Discard); err == nil {
		t.Fatal("--compaction-throughput -1 accepted")
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--wal-sync", "never"}, nil, `invalid value "never" for flag -wal-sync: want sync or periodic`},
		{nil, map[string]string{"EVENTIDE_WAL_SYNC": "never"}, `invalid value "never" for EVENTIDE_WAL_SYNC: want sync or periodic`},
		{[]string{"--http", "8080"}, nil, `invalid value "8080" for flag -http: not host:port such as 127.0.0.1:8080`},
		{[]string{"--http", ""}, nil, `invalid value "" for flag -http: not host:port`},
		{[]string{"--nats-listen", "127.0.0.1:99999"}, nil, `port "99999" is not a number in 0..65535`},
		{[]string{"--log-level", "loud"}, nil, `invalid value "loud" for flag -log-level`},
		{[]string{"--log-format", "xml"}, nil, `want text or json`},
		{[]string{"--types", "click:ttl=forever"}, nil, `event type "click": ttl "forever" is not a positive duration like 24h`},
		{[]string{"--replicas", "0"}, nil, `0 is outside 1..5`},
		{[]string{"--fetch-wait", "soon"}, nil, `not a duration such as 100ms, 5m or 24h`},
		{[]string{"--shutdown-timeout", "soon"}, nil, `invalid value "soon" for flag -shutdown-timeout: not a duration such as 100ms, 5m or 24h`},
		{nil, map[string]string{"EVENTIDE_SHUTDOWN_TIMEOUT": "soon"}, `invalid value "soon" for EVENTIDE_SHUTDOWN_TIMEOUT: not a duration such as 100ms, 5m or 24h`},
		{[]string{"--fanout=maybe"}, nil, `invalid boolean value "maybe" for -fanout: want true or false`},
		{nil, map[string]string{"EVENTIDE_RESET_CHECKPOINT": "yes please"}, `invalid value "yes please" for EVENTIDE_RESET_CHECKPOINT: want true or false`},
		{[]string{"--subjects", "events.>,"}, nil, `empty item in "events.>,"`},
		{nil, map[string]string{"EVENTIDE_FETCH_BATCH": "many", "EVENTIDE_LOG_FORMAT": "xml"}, "invalid value \"many\" for EVENTIDE_FETCH_BATCH: not a whole number\ninvalid value \"xml\" for EVENTIDE_LOG_FORMAT"},
		{[]string{"--nats-url", "nats://n1:4222"}, map[string]string{"EVENTIDE_NATS_LISTEN": "127.0.0.1:4333"}, "--nats-url and --nats-listen are both set"},
		{[]string{"--warn-tombstones", "10", "--fail-tombstones", "5"}, nil, "--warn-tombstones 10 is above --fail-tombstones 5"},
		{[]string{"--dlq-stream", "EVENTS"}, nil, `--dlq-stream and --stream are both "EVENTS"`},
		{[]string{"--data", ""}, nil, "--data is empty"},
		{[]string{"--allow-types", "click,Click"}, nil, `--allow-types: invalid event type "Click"`},
		{[]string{"--allow-types", "click", "--types", "view:ttl=1h,click:sub=2"}, nil, `--types sets event type "view", which --allow-types click does not list`},
		{[]string{"--post-types", "post,Status"}, nil, `--post-types: invalid event type "Status"`},
		{[]string{"--fanout-consumer", "eventide-writer"}, nil, `--fanout-consumer and --consumer are both "eventide-writer"`},
		{nil, map[string]string{"EVENTIDE_FANOUT_THRESHOLD": "-1"}, `invalid value "-1" for EVENTIDE_FANOUT_THRESHOLD: -1 is outside 0..1073741824`},
		{[]string{"--fanout-workers", "0"}, nil, `invalid value "0" for flag -fanout-workers: 0 is outside 1..64`},
		{[]string{"--timeline-ttl", "10ms"}, nil, "10ms is below the minimum 1s"},
		{[]string{"--restore-shards-from", "/snapshots"}, nil, "--snapshot-dir and --restore-shards-from need --shards of 2 or more"},
		{[]string{"--shards", "2", "--snapshot-dir", "/snapshots"}, nil, "--snapshot-dir needs --admin"},
		{[]string{"--mutex-profile-fraction", "100"}, nil, "--mutex-profile-fraction needs --admin"},
		{[]string{"--admin", "127.0.0.1:0", "--mutex-profile-fraction", "-1"}, nil, "mutex-profile-fraction"},
		{[]string{"--shards", "2", "--snapshot-interval", "1h"}, nil, "--snapshot-interval needs --snapshot-dir"},
		{[]string{"--shards", "2", "--snapshot-dir", "/s", "--snapshot-interval", "-1s"}, nil, "below the minimum"},
		{[]string{"serve"}, nil, `unexpected argument "serve"`},
		{[]string{"--no-such-flag"}, nil, "flag provided but not defined: -no-such-flag"},
	}
	for _, tt := range tests {
		var stderr strings.Builder
		_, err := parseConfig(tt.args, envFrom(tt.env), &stderr)
		var usage usageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("args %q env %v: err %v, want a usage error containing %q", tt.args, tt.env, err, tt.want)
			continue
		}
		if exitCode(err) != 2 {
			t.Errorf("args %q: exit code %d, want 2", tt.args, exitCode(err))
		}
	}
}

func TestConfigHelp(t *testing.T) {
	var stderr strings.Builder
	_, err := parseConfig([]string{"-h"}, envFrom(nil), &stderr)
	if !errors.Is(err, errHelp) || exitCode(err) != 0 {
		t.Fatalf("-h: err %v", err)
	}
	for _, want := range []string{"--data directory  (EVENTIDE_DATA, default ./data)", "--admin host:port  (EVENTIDE_ADMIN, default \"\")",
		"--wal-sync mode  (EVENTIDE_WAL_SYNC, default sync)"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, stderr.String())
		}
	}
}

func TestConfigLogAttrsRedactPasswords(t *testing.T) {
	c, err := parseConfig([]string{"--nats-url", "nats://app:s3cret@n1:4222,nats://n2:4222"}, envFrom(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("eventide starting", c.logAttrs()...)
	if line := b.String(); strings.Contains(line, "s3cret") || !strings.Contains(line, "nats-url=nats://app:xxxxx@n1:4222,nats://n2:4222") ||
		!strings.Contains(line, "data=./data") || strings.Count(line, "\n") != 1 {
		t.Fatalf("log line %q", line)
	}
}

// TestDLQStreamFollowsStream: a deployment that names its own stream gets
// its own dead-letter stream unless it names one, so two deployments on
// one NATS never share dead letters by leaving --dlq-stream at its default.
func TestDLQStreamFollowsStream(t *testing.T) {
	tests := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, "EVENTS_DLQ"},
		{[]string{"--stream", "EVENTS"}, nil, "EVENTS_DLQ"},
		{[]string{"--stream", "CLICKS", "--subjects", "clicks.>"}, nil, "CLICKS_DLQ"},
		{nil, map[string]string{"EVENTIDE_STREAM": "CLICKS", "EVENTIDE_SUBJECTS": "clicks.>"}, "CLICKS_DLQ"},
		{[]string{"--stream", "CLICKS", "--subjects", "clicks.>", "--dlq-stream", "REJECTS"}, nil, "REJECTS"},
	}
	for _, tt := range tests {
		c, err := parseConfig(tt.args, envFrom(tt.env), io.Discard)
		if err != nil {
			t.Fatalf("%v %v: %v", tt.args, tt.env, err)
		}
		if c.Writer.DLQStream != tt.want {
			t.Errorf("%v %v: dead-letter stream %q, want %q", tt.args, tt.env, c.Writer.DLQStream, tt.want)
		}
	}
}

func TestConfigHTTPGuards(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("  file-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(emptyFile, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		args        []string
		env         map[string]string
		wantToken   string
		wantOrigins []string
		wantMax     time.Duration
		wantErr     string // part of the usage error; "" is none
	}{
		{name: "defaults", wantMax: 30 * time.Second},
		{name: "token flag", args: []string{"--http-token", "flag-s3cret"}, wantToken: "flag-s3cret", wantMax: 30 * time.Second},
		{name: "token env", env: map[string]string{"EVENTIDE_HTTP_TOKEN": "env-s3cret"}, wantToken: "env-s3cret", wantMax: 30 * time.Second},
		{name: "token file", args: []string{"--http-token-file", tokenFile}, wantToken: "file-s3cret", wantMax: 30 * time.Second},
		{name: "token file env", env: map[string]string{"EVENTIDE_HTTP_TOKEN_FILE": tokenFile}, wantToken: "file-s3cret", wantMax: 30 * time.Second},
		{name: "both", args: []string{"--http-token", "x", "--http-token-file", tokenFile}, wantErr: "give one"},
		{name: "empty file", args: []string{"--http-token-file", emptyFile}, wantErr: "is empty"},
		{name: "missing file", args: []string{"--http-token-file", filepath.Join(t.TempDir(), "none")}, wantErr: "cannot read the token"},
		{name: "origins", args: []string{"--cors-origins", "https://dash.example.com, http://localhost:3000"},
			wantOrigins: []string{"https://dash.example.com", "http://localhost:3000"}, wantMax: 30 * time.Second},
		{name: "origins env", env: map[string]string{"EVENTIDE_CORS_ORIGINS": "https://a.example"}, wantOrigins: []string{"https://a.example"}, wantMax: 30 * time.Second},
		{name: "origin star", args: []string{"--cors-origins", "*"}, wantErr: "is not an origin"},
		{name: "origin with path", args: []string{"--cors-origins", "https://a.example/"}, wantErr: "is not an origin"},
		{name: "origin without scheme", args: []string{"--cors-origins", "a.example"}, wantErr: "is not an origin"},
		{name: "max timeout", args: []string{"--max-query-timeout", "2m"}, wantMax: 2 * time.Minute},
		{name: "max timeout env", env: map[string]string{"EVENTIDE_MAX_QUERY_TIMEOUT": "5s"}, wantMax: 5 * time.Second},
		{name: "max timeout zero", args: []string{"--max-query-timeout", "0s"}, wantErr: "below the minimum"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig(tt.args, envFrom(tt.env), io.Discard)
			if tt.wantErr != "" {
				if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v (exit code %d), want a usage error with %q", err, exitCode(err), tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.HTTP.Token != tt.wantToken || !slices.Equal(c.HTTP.CORSOrigins, tt.wantOrigins) || c.HTTP.MaxQueryTimeout != tt.wantMax {
				t.Fatalf("token %q origins %q max %s; want %q %q %s", c.HTTP.Token, c.HTTP.CORSOrigins, c.HTTP.MaxQueryTimeout, tt.wantToken, tt.wantOrigins, tt.wantMax)
			}
		})
	}
}

// TestConfigLogAttrsRedactToken: the start-up line never holds the token,
// from the flag or the variable.
func TestConfigLogAttrsRedactToken(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"--http-token", "tok-s3cret"}, nil},
		{nil, map[string]string{"EVENTIDE_HTTP_TOKEN": "tok-s3cret"}},
	} {
		c, err := parseConfig(tt.args, envFrom(tt.env), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		slog.New(slog.NewTextHandler(&b, nil)).Info("eventide starting", c.logAttrs()...)
		if line := b.String(); strings.Contains(line, "tok-s3cret") || !strings.Contains(line, "http-token=REDACTED") {
			t.Fatalf("log line %q", line)
		}
	}
}
