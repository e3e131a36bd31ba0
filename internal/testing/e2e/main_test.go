package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"kmirror/internal/testing/testdb"
)

var (
	binDir    string
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kmirror-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	binDir = dir
	code := testdb.Main(m)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// kmirrorBinary builds the kmirror command once per test binary and returns
// its path.
func kmirrorBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		goCmd, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("the go command is needed to build kmirror: %w", err)
			return
		}
		out := filepath.Join(binDir, "kmirror")
		cmd := exec.Command(goCmd, "build", "-o", out, "kmirror/cmd/kmirror")
		if b, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build kmirror/cmd/kmirror: %v\n%s", err, b)
			return
		}
		binPath = out
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}
