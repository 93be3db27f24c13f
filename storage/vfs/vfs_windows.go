//go:build windows

package vfs

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/windows"
)

// lockFile takes an exclusive LockFileEx lock on the first byte of f; a
// second lock of the same file fails at once (LOCKFILE_FAIL_IMMEDIATELY)
// with ErrLocked until f is closed or the process exits.
func lockFile(f *os.File) error {
	var ol windows.Overlapped
	if err := windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol); err != nil {
		if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
			return fmt.Errorf("%w: %w", ErrLocked, err)
		}
		return err
	}
	return nil
}

// syncDir does nothing on Windows: a directory cannot be opened for
// flushing there, and NTFS journals its metadata (names created, renamed
// and removed) itself; Go's os package and Pebble's vfs do the same.
func syncDir(string) error { return nil }

// AllocatedSize reports that the allocated size is not known here: Windows'
// FileInfo does not carry it (the caller uses the file's size).
func AllocatedSize(os.FileInfo) (int64, bool) { return 0, false }
