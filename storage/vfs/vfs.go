// Package vfs is the filesystem the storage engine writes through. The
// engine never calls package os directly, so tests can inject a filesystem
// (for example one that fails or counts syncs) and every file operation has
// one place to be audited for durability.
//
// Durability contract: data written to a File is durable only after
// File.Sync (or SyncData) returns nil; a created, renamed or removed name is
// durable only after SyncDir on its directory returns nil.
//
// Default is the operating system's filesystem. NewCrashableMem returns a
// MemFS, an in-memory filesystem that holds that contract to the letter:
// its CrashClone is what a power loss would leave (nothing written after
// the last Sync, no directory entry changed after the last SyncDir), so the
// engine's tests can crash it below the page cache.
package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// File is an open file.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.Closer
	// Sync makes the written data durable (fsync).
	Sync() error
	// Stat returns the file's metadata.
	Stat() (os.FileInfo, error)
	// Truncate changes the file's size.
	Truncate(size int64) error
}

// FS is a filesystem.
type FS interface {
	// Create creates or truncates name for writing.
	Create(name string) (File, error)
	// Open opens name read-only.
	Open(name string) (File, error)
	// OpenReadWrite opens an existing file for reading and writing,
	// positioned at its start.
	OpenReadWrite(name string) (File, error)
	// Remove removes a file.
	Remove(name string) error
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and its parents.
	MkdirAll(dir string, perm os.FileMode) error
	// List returns the names (not paths) of the entries of dir.
	List(dir string) ([]string, error)
	// Stat returns a file's metadata.
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the directory's entries (creations, renames,
	// removals) durable.
	SyncDir(dir string) error
	// Lock takes an exclusive advisory lock on name, creating it if
	// needed, so two processes never open one store. Close releases it.
	Lock(name string) (io.Closer, error)
}

// DataSyncer is implemented by files that can make their written data
// durable without the metadata a later read does not need (fdatasync(2):
// the modification time, but never the size). It is cheaper than Sync when
// the write changed no size, as in a preallocated WAL segment.
type DataSyncer interface {
	SyncData() error
}

// SyncData makes the data written to f durable: with f's SyncData if it
// has one, else with Sync.
func SyncData(f File) error {
	if d, ok := f.(DataSyncer); ok {
		return d.SyncData()
	}
	return f.Sync()
}

// Default is the operating system's filesystem. Its files are *os.File
// (so they also implement io.WriterAt and io.Seeker) with SyncData.
var Default FS = osFS{}

type osFS struct{}

// osFile is an *os.File with SyncData.
type osFile struct{ *os.File }

func wrapOSFile(f *os.File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Create(name string) (File, error) {
	return wrapOSFile(os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644))
}

func (osFS) Open(name string) (File, error) { return wrapOSFile(os.Open(name)) }

func (osFS) OpenReadWrite(name string) (File, error) {
	return wrapOSFile(os.OpenFile(name, os.O_RDWR, 0))
}

func (osFS) Remove(name string) error { return os.Remove(name) }

func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }

func (osFS) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

func (osFS) Stat(name string) (os.FileInfo, error) { return os.Stat(name) }

func (osFS) SyncDir(dir string) error { return syncDir(dir) }

// Lock takes an exclusive lock on name, created if missing, that no other
// process can take until the returned Closer closes it (flock on Unix,
// LockFileEx on Windows; see lock_unix.go and lock_windows.go).
func (osFS) Lock(name string) (io.Closer, error) { return LockFile(name) }

// ErrLocked is the error (wrapped) of a lock another holder has.
var ErrLocked = errors.New("locked by another process")

// LockFile opens name, creating it if missing, and takes an exclusive lock
// on it that lasts until the returned file is closed: FS.Lock for the
// operating system's filesystem, exported for callers that also write
// into the lock file (cmd/ingest names its process there). A lock held
// elsewhere fails with an error wrapping ErrLocked.
func LockFile(name string) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return f, nil
}
