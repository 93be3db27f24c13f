package bucket_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/eventide/eventide/"

// TestNoStorageImports keeps bucket/ pure: no package under it (tests
// included) may import the storage engine, directly or through another
// package of this module. Code that reads or writes storage belongs in
// catalog/.
func TestNoStorageImports(t *testing.T) {
	root, err := filepath.Abs("..") // the module root: this test runs in bucket/
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	err = filepath.WalkDir(filepath.Join(root, "bucket"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		rel, _ := filepath.Rel(root, dir)
		if path := storagePath(t, root, filepath.ToSlash(rel), true, map[string]bool{}); path != nil {
			t.Errorf("%s imports the storage engine: %s", rel, strings.Join(path, " -> "))
		}
	}
}

// storagePath returns the import chain from the package in dir (relative
// to root) to storage/, or nil when there is none. withTests includes the
// package's _test.go files (only for the packages under bucket/ itself).
func storagePath(t *testing.T, root, dir string, withTests bool, seen map[string]bool) []string {
	t.Helper()
	if dir == "storage" || strings.HasPrefix(dir, "storage/") {
		return []string{dir}
	}
	if seen[dir] {
		return nil
	}
	seen[dir] = true
	files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !withTests && strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatalf("cannot parse %s: %v", f, err)
		}
		for _, imp := range parsed.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil || !strings.HasPrefix(p, module) {
				continue
			}
			if path := storagePath(t, root, strings.TrimPrefix(p, module), false, seen); path != nil {
				return append([]string{dir + " (" + filepath.Base(f) + ")"}, path...)
			}
		}
	}
	return nil
}
