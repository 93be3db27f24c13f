//go:build unix

package vfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockFile takes an exclusive flock on f. The lock is advisory and per
// open file description: a second lock of the same file, in this process
// or another, fails with ErrLocked until f is closed; the kernel drops it
// when the process exits, however it exits.
func lockFile(f *os.File) error {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("%w: %w", ErrLocked, err)
		}
		return err
	}
	return nil
}

// syncDir fsyncs the directory, which makes the names created, renamed
// and removed in it durable.
func syncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}

// AllocatedSize returns the bytes the filesystem allocated to the file fi
// describes (its blocks), which is less than its size for a sparse file;
// ok is false when fi does not say (an in-memory file).
func AllocatedSize(fi os.FileInfo) (n int64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int64(st.Blocks) * 512, true
}
