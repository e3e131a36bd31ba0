package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestBinaryDoesNotLinkTesting: no package of the kmirror binary imports
// the testing package, directly or through a dependency (test helpers take
// small interfaces instead of testing.TB).
func TestBinaryDoesNotLinkTesting(t *testing.T) {
	t.Parallel()
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 || !slices.Contains(deps, "kmirror/api") {
		t.Fatalf("go list -deps listed %d packages, without kmirror/api: not the binary's", len(deps))
	}
	if slices.Contains(deps, "testing") {
		importers, _ := exec.CommandContext(t.Context(), "go", "list", "-deps", "-f",
			`{{.ImportPath}}{{range .Imports}}{{if eq . "testing"}} imports testing{{end}}{{end}}`, ".").Output()
		var who []string
		for _, l := range strings.Split(string(importers), "\n") {
			if strings.HasSuffix(l, " imports testing") {
				who = append(who, strings.TrimSuffix(l, " imports testing"))
			}
		}
		t.Errorf("the binary links the testing package, imported by %v", who)
	}
}
