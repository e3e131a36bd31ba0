package kmirror_test

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

// layers orders every package of the module from the bottom up. A package
// may import packages of lower layers, and packages of its own layer only
// under the same prefix (a role's own sub-packages: workers/imports_test.go
// says which siblings each worker role may use). A package is matched by its
// longest prefix.
var layers = [][]string{
	// The domain's vocabulary: words every layer may use.
	{"internal/vocabulary"},
	// The Kafka stack (connections, batch fetch and produce, record
	// batches), the other runtime components, and what the binary embeds or
	// generates, none of which knows the domain's tables.
	{"internal/kafka", "internal/runtime", "internal/devenv", "internal/tools", "migrations", "openapi", "web"},
	{"repo"},
	{"service"},
	// The two faces of the domain's users: neither imports the other.
	{"workers", "api"},
	{"cmd"},
}

// testInfra may import anything, and nothing but tests and other test
// infrastructure may import it.
var testInfra = []string{"internal/testing", "workers/workertest"}

// forbidden are imports the layers would allow but the design does not:
// the API takes no repo types (docs/design.md, "Layers").
var forbidden = map[string][]string{
	"api": {"repo"},
}

// TestLayers fails when a package imports one above it or beside it in
// another group, when production code imports test infrastructure or the
// testing package, and when a package has no layer.
func TestLayers(t *testing.T) {
	imports := modulePackages(t)
	if len(imports) < 20 {
		t.Fatalf("found only %d packages: is the walk rooted at the module?", len(imports))
	}
	for pkg, deps := range imports {
		if hasPrefix(pkg, testInfra) != "" {
			continue
		}
		rank, group := layerOf(pkg)
		if rank < 0 {
			t.Errorf("package %s has no layer in layers", pkg)
			continue
		}
		for _, dep := range deps {
			if dep == "testing" {
				t.Errorf("%s imports testing outside its tests: the binary would link it", pkg)
				continue
			}
			local, ok := strings.CutPrefix(dep, "kmirror/")
			if !ok {
				continue
			}
			if hasPrefix(local, testInfra) != "" {
				t.Errorf("%s imports test infrastructure %s", pkg, local)
				continue
			}
			if hasPrefix(local, forbidden[group]) != "" {
				t.Errorf("%s imports %s, which its layer forbids", pkg, local)
				continue
			}
			depRank, depGroup := layerOf(local)
			if depRank < rank || (depRank == rank && depGroup == group) {
				continue
			}
			t.Errorf("%s (layer %d, %s) imports %s (layer %d, %s): an import runs up or across a layer",
				pkg, rank, group, local, depRank, depGroup)
		}
	}
}

// layerOf returns a package's layer and the prefix that placed it there,
// or -1.
func layerOf(pkg string) (int, string) {
	rank, best := -1, ""
	for i, layer := range layers {
		if p := hasPrefix(pkg, layer); len(p) > len(best) {
			rank, best = i, p
		}
	}
	return rank, best
}

// hasPrefix returns the longest of prefixes that is pkg or a parent of it.
func hasPrefix(pkg string, prefixes []string) string {
	best := ""
	for _, p := range prefixes {
		if (pkg == p || strings.HasPrefix(pkg, p+"/")) && len(p) > len(best) {
			best = p
		}
	}
	return best
}

// modulePackages maps each package directory that has non-test Go files to
// the imports of those files.
func modulePackages(t *testing.T) map[string][]string {
	t.Helper()
	pkgs := map[string][]string{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
			return filepath.SkipDir
		}
		files, err := filepath.Glob(filepath.Join(path, "*.go"))
		if err != nil {
			return err
		}
		files = slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, "_test.go") })
		if len(files) == 0 {
			return nil
		}
		pkg := filepath.ToSlash(path)
		pkgs[pkg] = []string{}
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			file, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range file.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				pkgs[pkg] = append(pkgs[pkg], p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}
