package cli_test

import (
	"slices"
	"testing"

	"github.com/eventide/eventide/cmd/internal/cli"
	"github.com/eventide/eventide/cmd/internal/httpflags"
)

// TestSecretFlagsNameTheHTTPToken: cli cannot import httpflags (httpflags
// uses cli's flag values), so it names the token flag itself; this keeps
// the two the same.
func TestSecretFlagsNameTheHTTPToken(t *testing.T) {
	if !slices.Contains(cli.SecretFlags, httpflags.SecretFlag) {
		t.Errorf("cli.SecretFlags %v lacks httpflags.SecretFlag %q: the token would be logged", cli.SecretFlags, httpflags.SecretFlag)
	}
}
