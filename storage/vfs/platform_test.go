package vfs

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLockFile: a second lock of a held file fails with ErrLocked, in the
// same process (flock locks are per open file description), and the lock
// is free again once the first holder closes it.
func TestLockFile(t *testing.T) {
	name := filepath.Join(t.TempDir(), "LOCK")
	first, err := Default.Lock(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Default.Lock(name); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), name) {
		t.Fatalf("second lock: %v, want ErrLocked naming %s", err, name)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Default.Lock(name)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again.Close()

	mem := NewCrashableMem()
	if err := mem.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	held, err := mem.Lock("/d/LOCK")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := mem.Lock("/d/LOCK"); !errors.Is(err, ErrLocked) {
		t.Fatalf("MemFS second lock: %v, want ErrLocked", err)
	}
}

// TestBuildsForWindows type-checks this package, the one that holds the
// engine's platform-specific file calls (locks, directory syncs,
// allocated sizes), for Windows: its Unix calls once kept the engine from
// building there. It runs the go command (about 20 s with a cold build
// cache, for the standard library's Windows build), so not with -short.
func TestBuildsForWindows(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go vet for GOOS=windows")
	}
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	cmd := exec.Command(gocmd, "vet", ".")
	cmd.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GOOS=windows go vet: %v\n%s", err, out)
	}
}
