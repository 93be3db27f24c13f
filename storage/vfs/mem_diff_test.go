package vfs

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

var memDiffSeed = flag.Uint64("memfs.seed", 0, "seed of TestMemMatchesDefault (0 = random)")

// TestMemMatchesDefault applies one random sequence of file operations to
// the operating system's filesystem and to a MemFS and requires the same
// outcome of each (success or failure, bytes read, names listed, sizes):
// the crash tests are only as good as MemFS's likeness to the real thing.
func TestMemMatchesDefault(t *testing.T) {
	seed := *memDiffSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -memfs.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	osRoot := t.TempDir()
	mem := NewCrashableMem()
	type side struct {
		fs    FS
		root  string
		files map[string]File
	}
	sides := []*side{{fs: Default, root: osRoot, files: map[string]File{}}, {fs: mem, root: "/", files: map[string]File{}}}
	for _, s := range sides {
		if err := s.fs.MkdirAll(filepath.Join(s.root, "d"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	names := []string{"a", "b", "c", "d/x", "d/y"}
	defer func() {
		for _, s := range sides {
			for _, f := range s.files {
				f.Close()
			}
		}
	}()
	for op := 0; op < 3000; op++ {
		name := names[rng.IntN(len(names))]
		other := names[rng.IntN(len(names))]
		data := make([]byte, rng.IntN(300))
		for i := range data {
			if rng.IntN(3) > 0 {
				data[i] = byte('a' + rng.IntN(26))
			}
		}
		off := int64(rng.IntN(600))
		kind := rng.IntN(9)
		var results []string
		for _, s := range sides {
			path := filepath.Join(s.root, name)
			f := s.files[name]
			var res string
			switch kind {
			case 0:
				if f != nil {
					f.Close()
				}
				nf, err := s.fs.Create(path)
				delete(s.files, name)
				if err == nil {
					s.files[name] = nf
				}
				res = fmt.Sprintf("create err=%v", err != nil)
			case 1:
				if f == nil {
					res = "no file"
					break
				}
				n, err := f.Write(data)
				res = fmt.Sprintf("write %d %v", n, err)
			case 2:
				if f == nil {
					res = "no file"
					break
				}
				n, err := f.(io.WriterAt).WriteAt(data, off)
				res = fmt.Sprintf("writeat %d %v", n, err)
			case 3:
				if f == nil {
					res = "no file"
					break
				}
				err := f.Truncate(off)
				res = fmt.Sprintf("truncate %v", err)
			case 4:
				if f == nil {
					res = "no file"
					break
				}
				res = fmt.Sprintf("sync %v", SyncData(f))
			case 5:
				err := s.fs.Rename(path, filepath.Join(s.root, other))
				if err == nil && name != other {
					if old := s.files[other]; old != nil {
						old.Close()
					}
					s.files[other] = s.files[name]
					delete(s.files, name)
					if s.files[other] == nil {
						delete(s.files, other)
					}
				}
				res = fmt.Sprintf("rename err=%v", err != nil)
			case 6:
				err := s.fs.Remove(path)
				if f != nil {
					f.Close()
					delete(s.files, name)
				}
				res = fmt.Sprintf("remove err=%v", err != nil)
			case 7:
				a, err1 := s.fs.List(s.root)
				b, err2 := s.fs.List(filepath.Join(s.root, "d"))
				a = slices.DeleteFunc(a, func(n string) bool { return n == "d" })
				slices.Sort(a)
				slices.Sort(b)
				res = fmt.Sprintf("list %v %v %v %v", a, b, err1 != nil, err2 != nil)
			default:
				r, err := s.fs.Open(path)
				if err != nil {
					res = "open err"
					break
				}
				got, err := io.ReadAll(r)
				r.Close()
				fi, serr := s.fs.Stat(path)
				size := int64(-1)
				if serr == nil {
					size = fi.Size()
				}
				res = fmt.Sprintf("read %q %v size %d", got, err, size)
			}
			results = append(results, res)
		}
		if results[0] != results[1] {
			t.Fatalf("seed %d: op %d (kind %d on %s, other %s, off %d, %d bytes):\n os:  %s\n mem: %s", seed, op, kind, name, other, off, len(data), results[0], results[1])
		}
	}
}

// TestEmptyWriteDoesNotExtend: a write of no bytes at an offset past the
// end of a file (its handle's position after a truncate, or WriteAt)
// leaves its size alone, on the operating system's filesystem and on
// MemFS alike. MemFS extended the file to the offset (found by
// TestMemMatchesDefault, seed 1795491374460245692).
func TestEmptyWriteDoesNotExtend(t *testing.T) {
	for name, fs := range map[string]FS{"default": Default, "mem": NewCrashableMem()} {
		dir := "/"
		if fs == Default {
			dir = t.TempDir()
		}
		path := filepath.Join(dir, "f")
		f, err := fs.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("0123456789")); err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(3); err != nil {
			t.Fatal(err)
		}
		if n, err := f.Write(nil); n != 0 || err != nil {
			t.Fatalf("%s: empty write: %d, %v", name, n, err)
		}
		if n, err := f.(io.WriterAt).WriteAt(nil, 100); n != 0 || err != nil {
			t.Fatalf("%s: empty WriteAt: %d, %v", name, n, err)
		}
		fi, err := fs.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() != 3 {
			t.Errorf("%s: size %d after empty writes past the end, want 3", name, fi.Size())
		}
		f.Close()
	}
}
