package workers

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// allowedSiblings are the worker packages each role may import (outside its
// tests), as its doc.go says: the roles barely touch, and where one needs
// another it declares a small interface instead.
var allowedSiblings = map[string][]string{
	"heartbeat":         nil,
	"lease":             nil,
	"partition":         {"lease", "partition/metrics", "partition/worker"},
	"partition/metrics": nil,
	// The per-partition state machine reaches the engine only through
	// worker.Engine, never by importing it.
	"partition/worker": {"lease", "partition/metrics"},
	"metadatasync":     {"lease"},
	"statetopic":       nil,
}

// TestRoleImports fails when a worker package imports a sibling that its
// doc.go does not allow, or imports api, and when a worker package has no
// rule here (workertest, the tests' harness, imports them all).
func TestRoleImports(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || path == "." {
			return err
		}
		if path == "workertest" {
			return filepath.SkipDir
		}
		src, _ := filepath.Glob(filepath.Join(path, "*.go"))
		src = slices.DeleteFunc(src, func(f string) bool { return strings.HasSuffix(f, "_test.go") })
		if _, ok := allowedSiblings[filepath.ToSlash(path)]; len(src) > 0 && !ok {
			t.Errorf("package %s has no entry in allowedSiblings", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for pkg, allowed := range allowedSiblings {
		files, err := filepath.Glob(filepath.Join(pkg, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", pkg, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			file, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range file.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if path == "kmirror/api" {
					t.Errorf("%s imports kmirror/api", f)
				}
				sib, ok := strings.CutPrefix(path, "kmirror/workers/")
				if !ok {
					continue
				}
				if !slices.Contains(allowed, sib) {
					t.Errorf("%s imports %s; %s may import only %v of its siblings", f, path, pkg, allowed)
				}
			}
		}
	}
}
