package workers

import (
	"go/ast"
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
	// The per-partition state machine acts through the ports it declares
	// (worker.Ports), never by importing the engine.
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

// TestWorkerActsThroughPorts fails when the per-partition state machine
// reaches past its ports (partition/worker/ports.go): it may not import a
// database driver or call into repo (repo's types are its vocabulary), and
// may not make a Kafka client or read records itself.
func TestWorkerActsThroughPorts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("partition", "worker", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no worker files (%v)", err)
	}
	forbiddenCalls := map[string]bool{"repo": true, "kafkaconn": true, "kadm": true}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "github.com/jackc/pgx") || path == "github.com/twmb/franz-go/pkg/kadm" {
				t.Errorf("%s imports %s; the worker reaches the database and the clusters only through its ports", f, path)
			}
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, ok := sel.X.(*ast.Ident)
			if ok && forbiddenCalls[pkg.Name] && sel.Sel.Name != "SameRecord" {
				t.Errorf("%s calls %s.%s; the worker acts only through its ports", f, pkg.Name, sel.Sel.Name)
			}
			if ok && pkg.Name == "kgo" && sel.Sel.Name == "NewClient" {
				t.Errorf("%s makes a kgo client; the worker acts only through its ports", f)
			}
			return true
		})
	}
}
