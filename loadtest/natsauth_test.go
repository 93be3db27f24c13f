package main

import (
	"io"
	"testing"
)

// TestNATSAuthFlags: the harness takes natsconn's flags, refuses a
// combination natsconn refuses, and never writes the password into the
// report's flags.
func TestNATSAuthFlags(t *testing.T) {
	c, err := parseConfig([]string{"--nats-user", "lt", "--nats-password", "s3cret"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.NATS.User != "lt" || c.NATS.Password != "s3cret" {
		t.Errorf("parsed NATS options %+v", c.NATS)
	}
	if got := c.Flags["nats-password"]; got != "REDACTED" {
		t.Errorf("report flag nats-password = %q, want REDACTED", got)
	}
	if _, err := parseConfig([]string{"--nats-user", "lt"}, io.Discard); err == nil {
		t.Error("--nats-user without --nats-password: no error")
	}
}
