package target

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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

// ModuleRoot finds this repository's root from inside it, and refuses
// another module (where building ./cmd/ingest would fail with the go
// command's error, not one that says what to do).
func TestModuleRoot(t *testing.T) {
	root, err := ModuleRoot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", "ingest")); err != nil {
		t.Fatalf("ModuleRoot %s: %v", root, err)
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "go.mod"), []byte("module example.com/other\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(other)
	if _, err := ModuleRoot(context.Background()); err == nil || !strings.Contains(err.Error(), "is not github.com/eventide/eventide") {
		t.Fatalf("ModuleRoot in another module: %v, want an error naming the module wanted", err)
	}
}
