package main

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/eventide/eventide/writer"
)

func TestWriterFlags(t *testing.T) {
	c, err := parseConfig([]string{"--allow-types", "click,view", "--fetch-max-bytes", "1048576"}, envFrom(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Writer.AllowTypes, ",") != "click,view" || c.Writer.FetchMaxBytes != 1<<20 {
		t.Fatalf("AllowTypes %v, FetchMaxBytes %d", c.Writer.AllowTypes, c.Writer.FetchMaxBytes)
	}
	c, err = parseConfig(nil, envFrom(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Writer.FetchMaxBytes != writer.DefaultFetchBytes || len(c.Writer.AllowTypes) != 0 {
		t.Fatalf("defaults: AllowTypes %v, FetchMaxBytes %d", c.Writer.AllowTypes, c.Writer.FetchMaxBytes)
	}
}

// --fetch-linger: 5ms by default, a duration as given, and 0 turns the
// linger off (the writer's zero value would mean its default).
func TestFetchLingerFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, writer.DefaultFetchLinger},
		{[]string{"--fetch-linger", "12ms"}, 12 * time.Millisecond},
		{[]string{"--fetch-linger", "0"}, -1},
	} {
		c, err := parseConfig(tc.args, envFrom(nil), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if c.Writer.FetchLinger != tc.want {
			t.Errorf("%v: FetchLinger %v, want %v", tc.args, c.Writer.FetchLinger, tc.want)
		}
	}
	if _, err := parseConfig([]string{"--fetch-linger", "-1ms"}, envFrom(nil), io.Discard); err == nil {
		t.Error("--fetch-linger -1ms accepted")
	}
}

// --replicas above 1 on a single NATS server is a configuration error.
func TestReplicasUnsupportedExitCode(t *testing.T) {
	err := fmt.Errorf("cannot start writer: %w", writer.ErrReplicasUnsupported)
	if got := exitCode(err); got != 2 {
		t.Errorf("exit code %d, want 2", got)
	}
}
