package vfs

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// MemFS is an in-memory filesystem that keeps, next to what was written,
// what a crash would leave: the data of each file as of its last
// Sync/SyncData, and the entries of each directory as of its last SyncDir.
// CrashClone returns the filesystem a machine would find after losing
// power at that instant (as Pebble's crashable MemFS with strict
// durability), so a test can show a missing fsync, which killing a
// process never shows (the page cache survives a SIGKILL).
//
// What is durable, exactly:
//   - a file's bytes and size, as of its last Sync or SyncData (the same
//     here: fdatasync also makes a changed size durable);
//   - a directory's entries (files created, renamed in or out, removed;
//     subdirectories made), as of its last SyncDir. MkdirAll's new
//     directories are entries of their parents like files: they survive
//     a crash only once the parent is synced. The root always exists.
//
// A file that is durable under no name is gone after a crash, whatever was
// synced to it. Paths are cleaned, slash-separated and absolute ("/db").
// All methods are safe for concurrent use (one mutex guards the tree).
type MemFS struct {
	mu    sync.Mutex
	root  *memNode
	locks map[*memNode]bool
}

// memNode is a file (data) or a directory (entries).
type memNode struct {
	dir bool

	// A directory's entries now and as of its last SyncDir.
	entries, syncedEntries map[string]*memNode

	// A file's content now and as of its last Sync; dirty lists the byte
	// ranges of cur written since (cur may be shorter than size: the rest
	// reads as zeros, so a preallocated WAL segment costs only what was
	// written).
	cur, synced memContent
	dirty       []memSpan
	modTime     time.Time
}

type memContent struct {
	buf  []byte
	size int64
}

type memSpan struct{ from, to int64 }

// NewCrashableMem returns an empty MemFS holding only the root directory.
func NewCrashableMem() *MemFS {
	return &MemFS{root: newMemDir(), locks: map[*memNode]bool{}}
}

func newMemDir() *memNode {
	return &memNode{dir: true, entries: map[string]*memNode{}, syncedEntries: map[string]*memNode{}}
}

// CrashClone returns the filesystem as a crash right now would leave it.
// With rng nil, exactly the durable state: every unsynced write and every
// directory change not followed by a SyncDir is lost. With an rng, some of
// what was not yet durable may have reached the disk anyway, as the kernel
// writes back dirty pages on its own: per directory, either the synced or
// the current entries; per file, the synced content plus, perhaps, the
// unsynced writes below a random offset (a prefix of the file, as a
// sequential writeback would leave, never a hole before synced data).
// m stays usable (a DB still open on it may be closed; nothing it does
// reaches the clone).
func (m *MemFS) CrashClone(rng *rand.Rand) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	clones := map[*memNode]*memNode{}
	var cloneNode func(n *memNode) *memNode
	cloneNode = func(n *memNode) *memNode {
		if c, ok := clones[n]; ok {
			return c
		}
		var c *memNode
		if n.dir {
			c = newMemDir()
			clones[n] = c
			src := n.syncedEntries
			if rng != nil && rng.IntN(2) == 0 {
				src = n.entries
			}
			for name, child := range src {
				cc := cloneNode(child)
				c.entries[name], c.syncedEntries[name] = cc, cc
			}
			return c
		}
		content := memContent{buf: append([]byte(nil), n.synced.buf...), size: n.synced.size}
		if rng != nil && rng.IntN(2) == 0 && n.cur.size > 0 {
			limit := rng.Int64N(n.cur.size + 1)
			for _, s := range n.dirty {
				from, to := s.from, min(s.to, limit, int64(len(n.cur.buf)))
				if from >= to {
					continue
				}
				if int64(len(content.buf)) < to {
					content.buf = append(content.buf, make([]byte, to-int64(len(content.buf)))...)
				}
				copy(content.buf[from:to], n.cur.buf[from:to])
			}
			content.size = max(content.size, min(limit, n.cur.size))
			if int64(len(content.buf)) > content.size {
				content.buf = content.buf[:content.size]
			}
		}
		c = &memNode{cur: content, synced: memContent{buf: append([]byte(nil), content.buf...), size: content.size}, modTime: n.modTime}
		clones[n] = c
		return c
	}
	return &MemFS{root: cloneNode(m.root), locks: map[*memNode]bool{}}
}

func memPathError(op, path string, err error) error {
	return &os.PathError{Op: op, Path: path, Err: err}
}

// splitPath returns the cleaned path's elements; the root has none.
func splitPath(name string) ([]string, error) {
	clean := filepath.ToSlash(filepath.Clean(name))
	if !strings.HasPrefix(clean, "/") {
		return nil, fmt.Errorf("memfs: path %q is not absolute", name)
	}
	if clean == "/" {
		return nil, nil
	}
	return strings.Split(clean[1:], "/"), nil
}

// parentLocked returns the directory holding name and name's last element.
func (m *MemFS) parentLocked(op, name string) (*memNode, string, error) {
	parts, err := splitPath(name)
	if err != nil {
		return nil, "", memPathError(op, name, err)
	}
	if len(parts) == 0 {
		return nil, "", memPathError(op, name, errors.New("memfs: the root has no parent"))
	}
	d := m.root
	for _, p := range parts[:len(parts)-1] {
		next, ok := d.entries[p]
		if !ok {
			return nil, "", memPathError(op, name, os.ErrNotExist)
		}
		if !next.dir {
			return nil, "", memPathError(op, name, errors.New("memfs: not a directory"))
		}
		d = next
	}
	return d, parts[len(parts)-1], nil
}

func (m *MemFS) nodeLocked(op, name string) (*memNode, error) {
	parts, err := splitPath(name)
	if err != nil {
		return nil, memPathError(op, name, err)
	}
	if len(parts) == 0 {
		return m.root, nil
	}
	d, base, err := m.parentLocked(op, name)
	if err != nil {
		return nil, err
	}
	n, ok := d.entries[base]
	if !ok {
		return nil, memPathError(op, name, os.ErrNotExist)
	}
	return n, nil
}

// Create creates or truncates name. The truncation of an existing file is
// a write like any other: lost at a crash until synced.
func (m *MemFS) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parentLocked("create", name)
	if err != nil {
		return nil, err
	}
	n, ok := d.entries[base]
	if ok {
		if n.dir {
			return nil, memPathError("create", name, errors.New("memfs: is a directory"))
		}
		n.truncateLocked(0)
	} else {
		n = &memNode{modTime: time.Now()}
		d.entries[base] = n
	}
	return &memFile{fs: m, node: n, name: name, writable: true}, nil
}

// Open opens name read-only.
func (m *MemFS) Open(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.nodeLocked("open", name)
	if err != nil {
		return nil, err
	}
	return &memFile{fs: m, node: n, name: name}, nil
}

// OpenReadWrite opens an existing file for reading and writing.
func (m *MemFS) OpenReadWrite(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.nodeLocked("open", name)
	if err != nil {
		return nil, err
	}
	if n.dir {
		return nil, memPathError("open", name, errors.New("memfs: is a directory"))
	}
	return &memFile{fs: m, node: n, name: name, writable: true}, nil
}

// Remove removes a file or an empty directory.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parentLocked("remove", name)
	if err != nil {
		return err
	}
	n, ok := d.entries[base]
	if !ok {
		return memPathError("remove", name, os.ErrNotExist)
	}
	if n.dir && len(n.entries) > 0 {
		return memPathError("remove", name, errors.New("memfs: directory not empty"))
	}
	delete(d.entries, base)
	return nil
}

// Rename atomically replaces newname with oldname.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	od, obase, err := m.parentLocked("rename", oldname)
	if err != nil {
		return err
	}
	n, ok := od.entries[obase]
	if !ok {
		return memPathError("rename", oldname, os.ErrNotExist)
	}
	nd, nbase, err := m.parentLocked("rename", newname)
	if err != nil {
		return err
	}
	if old, ok := nd.entries[nbase]; ok && old.dir {
		return memPathError("rename", newname, errors.New("memfs: is a directory"))
	}
	delete(od.entries, obase)
	nd.entries[nbase] = n
	return nil
}

// MkdirAll creates a directory and its parents.
func (m *MemFS) MkdirAll(dir string, _ os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	parts, err := splitPath(dir)
	if err != nil {
		return memPathError("mkdir", dir, err)
	}
	d := m.root
	for _, p := range parts {
		next, ok := d.entries[p]
		if !ok {
			next = newMemDir()
			d.entries[p] = next
		} else if !next.dir {
			return memPathError("mkdir", dir, errors.New("memfs: not a directory"))
		}
		d = next
	}
	return nil
}

// List returns the names of dir's entries, sorted.
func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.nodeLocked("readdir", dir)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, memPathError("readdir", dir, errors.New("memfs: not a directory"))
	}
	names := make([]string, 0, len(n.entries))
	for name := range n.entries {
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// Stat returns a file's metadata.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.nodeLocked("stat", name)
	if err != nil {
		return nil, err
	}
	return n.infoLocked(filepath.Base(name)), nil
}

// SyncDir makes dir's current entries durable.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.nodeLocked("sync", dir)
	if err != nil {
		return err
	}
	if !n.dir {
		return memPathError("sync", dir, errors.New("memfs: not a directory"))
	}
	n.syncedEntries = make(map[string]*memNode, len(n.entries))
	for name, child := range n.entries {
		n.syncedEntries[name] = child
	}
	return nil
}

// Lock creates name if needed and holds it until the returned Closer is
// closed; a second Lock of a held name fails.
func (m *MemFS) Lock(name string) (io.Closer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parentLocked("lock", name)
	if err != nil {
		return nil, err
	}
	n, ok := d.entries[base]
	if !ok {
		n = &memNode{modTime: time.Now()}
		d.entries[base] = n
	}
	if m.locks[n] {
		return nil, memPathError("lock", name, ErrLocked)
	}
	m.locks[n] = true
	return memUnlocker{fs: m, node: n}, nil
}

type memUnlocker struct {
	fs   *MemFS
	node *memNode
}

func (u memUnlocker) Close() error {
	u.fs.mu.Lock()
	defer u.fs.mu.Unlock()
	delete(u.fs.locks, u.node)
	return nil
}

func (n *memNode) infoLocked(name string) os.FileInfo {
	if n.dir {
		return memFileInfo{name: name, dir: true}
	}
	return memFileInfo{name: name, size: n.cur.size, modTime: n.modTime}
}

func (n *memNode) markDirty(from, to int64) {
	if k := len(n.dirty); k > 0 && n.dirty[k-1].to == from {
		n.dirty[k-1].to = to // sequential appends stay one span
		return
	}
	n.dirty = append(n.dirty, memSpan{from, to})
}

func (n *memNode) truncateLocked(size int64) {
	if int64(len(n.cur.buf)) > size {
		n.cur.buf = n.cur.buf[:size]
	}
	n.cur.size = size
	n.modTime = time.Now()
}

// writeAtLocked writes p at off. Zeros past the written part of the
// buffer are not stored: they read back as zeros anyway.
func (n *memNode) writeAtLocked(p []byte, off int64) {
	if len(p) == 0 {
		// write(2) of nothing changes nothing: a file truncated below
		// the offset is not extended to it.
		return
	}
	end := off + int64(len(p))
	stored := p
	if have := int64(len(n.cur.buf)); end > have {
		trimmed := len(p)
		for trimmed > 0 && off+int64(trimmed) > have && p[trimmed-1] == 0 {
			trimmed--
		}
		stored = p[:trimmed]
	}
	if sEnd := off + int64(len(stored)); sEnd > int64(len(n.cur.buf)) {
		n.cur.buf = append(n.cur.buf, make([]byte, sEnd-int64(len(n.cur.buf)))...)
	}
	if len(stored) > 0 {
		copy(n.cur.buf[off:], stored)
	}
	n.cur.size = max(n.cur.size, end)
	n.markDirty(off, end)
	n.modTime = time.Now()
}

func (n *memNode) syncLocked() {
	if len(n.synced.buf) > len(n.cur.buf) {
		// The current content is zeros past its buffer: so is the
		// synced one, once written back.
		n.synced.buf = n.synced.buf[:len(n.cur.buf)]
	}
	for _, s := range n.dirty {
		to := min(s.to, int64(len(n.cur.buf)))
		if s.from >= to {
			continue
		}
		if int64(len(n.synced.buf)) < to {
			n.synced.buf = append(n.synced.buf, make([]byte, to-int64(len(n.synced.buf)))...)
		}
		copy(n.synced.buf[s.from:to], n.cur.buf[s.from:to])
	}
	if int64(len(n.synced.buf)) > n.cur.size {
		n.synced.buf = n.synced.buf[:n.cur.size]
	}
	n.synced.size = n.cur.size
	n.dirty = n.dirty[:0]
}

func (n *memNode) readAtLocked(p []byte, off int64) (int, error) {
	if off >= n.cur.size {
		return 0, io.EOF
	}
	k := min(int64(len(p)), n.cur.size-off)
	for i := range p[:k] {
		p[i] = 0
	}
	if off < int64(len(n.cur.buf)) {
		copy(p[:k], n.cur.buf[off:])
	}
	if k < int64(len(p)) {
		return int(k), io.EOF
	}
	return int(k), nil
}

// memFile is an open MemFS file. Like *os.File it can also write at an
// offset and seek.
type memFile struct {
	fs       *MemFS
	node     *memNode
	name     string
	pos      int64
	writable bool
	closed   bool
}

var errMemClosed = errors.New("memfs: file already closed")

func (f *memFile) check(op string, write bool) error {
	if f.closed {
		return memPathError(op, f.name, errMemClosed)
	}
	if write && !f.writable {
		return memPathError(op, f.name, errors.New("memfs: file opened read-only"))
	}
	if f.node.dir && (write || op == "read") {
		return memPathError(op, f.name, errors.New("memfs: is a directory"))
	}
	return nil
}

func (f *memFile) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	n, err := f.node.readAtLocked(p, f.pos)
	f.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	return f.node.readAtLocked(p, off)
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	f.node.writeAtLocked(p, f.pos)
	f.pos += int64(len(p))
	return len(p), nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, memPathError("write", f.name, errors.New("memfs: negative offset"))
	}
	f.node.writeAtLocked(p, off)
	return len(p), nil
}

func (f *memFile) Seek(offset int64, whence int) (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("seek", false); err != nil {
		return 0, err
	}
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = f.pos + offset
	case io.SeekEnd:
		abs = f.node.cur.size + offset
	default:
		return 0, memPathError("seek", f.name, fmt.Errorf("memfs: bad whence %d", whence))
	}
	if abs < 0 {
		return 0, memPathError("seek", f.name, errors.New("memfs: negative position"))
	}
	f.pos = abs
	return abs, nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return memPathError("close", f.name, errMemClosed)
	}
	f.closed = true
	return nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync", false); err != nil {
		return err
	}
	if !f.node.dir {
		f.node.syncLocked()
	}
	return nil
}

// SyncData is Sync: here the size is always made durable with the data.
func (f *memFile) SyncData() error { return f.Sync() }

func (f *memFile) Stat() (os.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return nil, memPathError("stat", f.name, errMemClosed)
	}
	return f.node.infoLocked(filepath.Base(f.name)), nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return memPathError("truncate", f.name, errors.New("memfs: negative size"))
	}
	f.node.truncateLocked(size)
	return nil
}

type memFileInfo struct {
	name    string
	size    int64
	dir     bool
	modTime time.Time
}

func (i memFileInfo) Name() string { return i.name }
func (i memFileInfo) Size() int64  { return i.size }
func (i memFileInfo) Mode() os.FileMode {
	if i.dir {
		return os.ModeDir | 0o755
	}
	return 0o644
}
func (i memFileInfo) ModTime() time.Time { return i.modTime }
func (i memFileInfo) IsDir() bool        { return i.dir }
func (i memFileInfo) Sys() any           { return nil }
