package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/eventide/eventide/storage/vfs"
)

// dataLockName is the lock file in --data. It is not storage's LOCK (in
// <data>/storage): that one is taken only after the embedded NATS server
// has opened <data>/nats, too late to keep a second process away from it.
const dataLockName = "eventide.lock"

// errDataDirInUse is returned when another process holds the data
// directory's lock: exit code 3.
var errDataDirInUse = errors.New("data directory in use")

// dataDirLock is the exclusive lock on <data>/eventide.lock (flock on
// Unix, LockFileEx on Windows: vfs.LockFile). The kernel
// drops it when the process exits, however it exits, so a crash never
// leaves a stale lock behind.
type dataDirLock struct{ f *os.File }

// lockDataDir creates dir if needed and takes its lock, writing this
// process's id into the lock file so the next one can name the holder.
func lockDataDir(dir string) (*dataDirLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create data directory: %w", err)
	}
	name := filepath.Join(dir, dataLockName)
	f, err := vfs.LockFile(name)
	if err != nil {
		if errors.Is(err, vfs.ErrLocked) {
			holder := "another process"
			if b, rerr := os.ReadFile(name); rerr == nil {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
					holder = fmt.Sprintf("process %d", pid)
				}
			}
			return nil, fmt.Errorf("%w: %s is locked by %s (its %s); stop that process or give this one another --data",
				errDataDirInUse, dir, holder, dataLockName)
		}
		return nil, fmt.Errorf("cannot lock data directory %s: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		// The pid only improves the next process's message; a failure to
		// write it does not matter.
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dataDirLock{f}, nil
}

// unlock releases the lock; closing the file drops the flock.
func (l *dataDirLock) unlock() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("cannot release the data directory's lock: %w", err)
	}
	return nil
}
