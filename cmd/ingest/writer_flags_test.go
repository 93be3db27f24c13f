package main

import (
	"fmt"
	"io"
	"strings"
	"testing"

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

// --replicas above 1 on a single NATS server is a configuration error.
func TestReplicasUnsupportedExitCode(t *testing.T) {
	err := fmt.Errorf("cannot start writer: %w", writer.ErrReplicasUnsupported)
	if got := exitCode(err); got != 2 {
		t.Errorf("exit code %d, want 2", got)
	}
}
