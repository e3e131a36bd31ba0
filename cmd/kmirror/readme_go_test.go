package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEGoBlocks: every ```go block of README.md runs against a fake
// server that answers one FAILED partition with error "boom", wrapped in a
// main function with a ctx, and prints that error: a block once printed the
// *string's address instead. The block is handed to `go run` as an overlay
// for a package that does not exist on disk, so nothing is written into the
// tree; a change of the generated client that breaks a block fails here.
func TestREADMEGoBlocks(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)\n```go\n(.*?)\n```").FindAllStringSubmatch(string(data), -1)
	if len(blocks) == 0 {
		t.Fatal("README.md has no go block")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"partitions":[{"mirror":"demo","topic":"orders","destination_topic":"orders","partition":0,` +
			`"state":"FAILED","error":"boom","retry_attempt":0,"lost_records":0,"lease_live":true}]}`))
	}))
	defer srv.Close()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	imports := regexp.MustCompile(`\b(client|fmt|context)\.`)
	for i, b := range blocks {
		body := b[1]
		var uses []string
		seen := map[string]bool{}
		for _, m := range imports.FindAllStringSubmatch(body, -1) {
			seen[m[1]] = true
		}
		for _, imp := range [][2]string{{"client", `"kmirror/openapi/client"`}, {"fmt", `"fmt"`}} {
			if seen[imp[0]] {
				uses = append(uses, imp[1])
			}
		}
		src := "package main\n\nimport (\n\t\"context\"\n\t" + strings.Join(uses, "\n\t") + "\n)\n\n" +
			"func main() {\n\tctx := context.Background()\n\t_ = ctx\n" +
			strings.ReplaceAll(body, "http://127.0.0.1:8080", srv.URL) + "\n}\n"
		dir := t.TempDir()
		file := filepath.Join(dir, "main.go")
		if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {
			filepath.Join(root, "internal", "readmegoblock", "main.go"): file}})
		if err := os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("go", "run", "-overlay", filepath.Join(dir, "overlay.json"), "./internal/readmegoblock")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("README.md go block %d does not run: %v\n%s\n%s", i+1, err, out, src)
		} else if !strings.Contains(string(out), "boom") || strings.Contains(string(out), "0xc") {
			t.Errorf("README.md go block %d printed %q: want the partition's error, boom, not a pointer", i+1, out)
		}
	}
}
