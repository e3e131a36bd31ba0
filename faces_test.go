package kmirror_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// faceOf says which of the domain's two faces each user of service may
// name: the API its Control, the workers their Workers. Both are in the
// same package, so the import rules cannot tell them apart.
var faceOf = map[string][]string{
	"api":     {"Control", "NewControl", "Config"},
	"workers": {"Workers", "NewWorkers", "WorkersConfig"},
}

// TestFaces fails when production code of api or workers names the other
// face's type or constructor.
func TestFaces(t *testing.T) {
	faces := map[string]string{} // identifier → the group it belongs to
	for group, ids := range faceOf {
		for _, id := range ids {
			faces[id] = group
		}
	}
	checked := 0
	for group := range faceOf {
		err := filepath.WalkDir(group, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
				hasPrefix(filepath.ToSlash(filepath.Dir(path)), testInfra) != "" {
				return err
			}
			file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			checked++
			ast.Inspect(file, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "service" {
					if owner, ok := faces[sel.Sel.Name]; ok && owner != group {
						t.Errorf("%s names service.%s, the face of %s", path, sel.Sel.Name, owner)
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 20 {
		t.Fatalf("checked only %d files: is the walk rooted at the module?", checked)
	}
}
