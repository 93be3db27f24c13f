package target

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The spawned server's environment drops the harness's EVENTIDE_*
// variables and takes --spawn-env's over inherited ones: checked with a
// real child process's view of it.
func TestServerEnv(t *testing.T) {
	envPath, err := exec.LookPath("env")
	if err != nil {
		t.Skip("no env command:", err)
	}
	inherited := []string{"PATH=/usr/bin:/bin", "GOMAXPROCS=2", "EVENTIDE_DATA=/somewhere", "KEEP=1"}
	cmd := exec.Command(envPath)
	cmd.Env = serverEnv(inherited, []string{"GOMAXPROCS=4", "GOGC=200"})
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(string(out))
	for _, want := range []string{"GOMAXPROCS=4", "GOGC=200", "KEEP=1"} {
		if !slices.Contains(got, want) {
			t.Errorf("child's environment %v lacks %s", got, want)
		}
	}
	for _, kv := range got {
		if kv == "GOMAXPROCS=2" || strings.HasPrefix(kv, "EVENTIDE_") {
			t.Errorf("child's environment %v holds %s", got, kv)
		}
	}
}
