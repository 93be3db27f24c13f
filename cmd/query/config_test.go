package main

import (
	"flag"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func noEnv(string) (string, bool) { return "", false }

func TestConfig(t *testing.T) {
	c, err := parseConfig(nil, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Owners, []string{DefaultNodeID}) || c.NodeTimeout != 2*time.Second || c.HTTP.MaxQueryTimeout != 30*time.Second {
		t.Errorf("defaults: owners %v, node timeout %s, max query timeout %s", c.Owners, c.NodeTimeout, c.HTTP.MaxQueryTimeout)
	}
	env := map[string]string{"EVENTIDE_SHARDS": "4", "EVENTIDE_OWNERS": "0-1=a,2-3=b", "EVENTIDE_HTTP_TOKEN": "s3cret",
		"EVENTIDE_NATS_USER": "q", "EVENTIDE_NATS_PASSWORD": "nats-s3cret", "EVENTIDE_NATS_URL": "nats://u:url-s3cret@127.0.0.1:4222"}
	c, err = parseConfig([]string{"--node-timeout", "300ms"}, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Owners, []string{"a", "a", "b", "b"}) || c.NodeTimeout != 300*time.Millisecond || c.HTTP.Token != "s3cret" ||
		c.NATS.User != "q" || c.NATS.Password != "nats-s3cret" || c.NATS.URL != env["EVENTIDE_NATS_URL"] {
		t.Errorf("from env: owners %v, node timeout %s, token %q, NATS %+v", c.Owners, c.NodeTimeout, c.HTTP.Token, c.NATS)
	}
	for _, a := range c.logAttrs() {
		if strings.Contains(a.(interface{ String() string }).String(), "s3cret") {
			t.Errorf("log attributes show the token: %v", a)
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--shards", "4", "--owners", "0-2=a"}, "without an owner"},
		{[]string{"--shards", "4"}, ""}, // every shard on local
		{[]string{"--node-timeout", "0s"}, "--node-timeout"},
		{[]string{"--timeline-ttl", "-1h"}, "--timeline-ttl -1h0m0s: want a positive duration"},
		{[]string{"--node-timeout", "soon"}, `invalid value "soon" for flag -node-timeout: not a duration such as 100ms, 5m or 24h`},
		{[]string{"--shutdown-timeout", "x"}, `invalid value "x" for flag -shutdown-timeout: not a duration such as 100ms, 5m or 24h`},
		{[]string{"--timelines=maybe"}, `invalid boolean value "maybe" for -timelines: want true or false`},
		{[]string{"--cors-origins", "https://x.example/"}, "--cors-origins"},
		{[]string{"extra"}, "unexpected argument"},
		{[]string{"--nats-user", "a", "--nats-token", "t"}, "--nats-token"},
		{[]string{"--nats-tls-cert", "c.pem"}, "--nats-tls-key"},
	} {
		_, err := parseConfig(tt.args, noEnv, io.Discard)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%v: %v", tt.args, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want an error containing %q", tt.args, err, tt.want)
		}
	}
}

// TestReadmeFlagTable: README's table of cmd/query's flags lists exactly
// the flags it has, and a row of one flag whose default is a literal
// (in backticks) gives the flag's real default.
func TestReadmeFlagTable(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "`go run ./cmd/query -h` lists its flags")
	if !ok {
		t.Fatal("README.md has no table of cmd/query's flags")
	}
	table, _, _ = strings.Cut(table, "\n\n## ")
	c, err := parseConfig(nil, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	flagName := regexp.MustCompile("`--([a-z-]+)`")
	listed := map[string]bool{}
	for line := range strings.Lines(table) {
		cols := strings.Split(strings.TrimSpace(line), " | ")
		if !strings.HasPrefix(line, "| `--") || len(cols) != 3 {
			continue
		}
		names := flagName.FindAllStringSubmatch(cols[0], -1)
		for _, m := range names {
			listed[m[1]] = true
			if c.fs.Lookup(m[1]) == nil {
				t.Errorf("README lists --%s, which cmd/query does not have", m[1])
			}
		}
		literal, ok := strings.CutPrefix(cols[1], "`")
		if len(names) != 1 || !ok {
			continue // several flags, or a default in words
		}
		f := c.fs.Lookup(names[0][1])
		if f == nil {
			continue
		}
		def, _, _ := strings.Cut(literal, "`")
		v := f.Value
		if err := v.Set(def); err != nil || v.String() != f.DefValue {
			t.Errorf("README gives --%s the default %q; the flag's is %q (%v)", f.Name, def, f.DefValue, err)
		}
	}
	c.fs.VisitAll(func(f *flag.Flag) {
		if !listed[f.Name] && f.Name != "version" {
			t.Errorf("README's table of cmd/query's flags lacks --%s", f.Name)
		}
	})
	if len(listed) < 20 {
		t.Errorf("parsed only %d flags from README's table", len(listed))
	}
}
