package main

import (
	"os"
	"os/exec"
	"regexp"
	"testing"
)

// TestDocsOutputsIgnored: what the documented commands, run from the
// repository root as the docs say, write there (data directories, load
// test reports) is ignored by git, so a new user following the docs
// never sees it in git status nor commits it by accident.
func TestDocsOutputsIgnored(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	if err := exec.Command(git, "-C", "../..", "rev-parse", "--git-dir").Run(); err != nil {
		t.Skip("not a git checkout")
	}
	output := regexp.MustCompile("--(data|json|html) (?:\\./)?([a-z0-9][a-z0-9._-]*)")
	seen := map[string]bool{}
	for _, doc := range []string{"README.md", "loadtest/README.md", "BENCHMARKS.md", "deploy/README.md"} {
		b, err := os.ReadFile("../../" + doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range output.FindAllStringSubmatch(string(b), -1) {
			path := m[2]
			if m[1] == "data" {
				path += "/" // a directory: check-ignore cannot tell for a path not there
			}
			seen[path] = true
		}
	}
	if !seen["data-a/"] || !seen["report.json"] {
		t.Fatalf("found only %v in the docs' commands; the pattern no longer matches them", seen)
	}
	for path := range seen {
		if err := exec.Command(git, "-C", "../..", "check-ignore", "-q", "--no-index", path).Run(); err != nil {
			t.Errorf("%s, written at the repository root by a documented command, is not ignored by .gitignore", path)
		}
	}
}
