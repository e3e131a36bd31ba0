package workers

import (
	"go/parser"
	"go/token"
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
	"lease":             nil,
	"partition":         {"lease", "partition/metrics", "partition/produce"},
	"partition/metrics": nil,
	"partition/produce": nil,
	"metadatasync":      {"lease"},
	"statetopic":        nil,
}

// TestRoleImports fails when a worker package imports a sibling that its
// doc.go does not allow, or imports api.
func TestRoleImports(t *testing.T) {
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
