package openapi

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// sdkTest is the npm folder with the linter and the TypeScript client
// generator, relative to this package.
const sdkTest = "sdk-test"

// TestOpenAPILint lints openapi.json with Redocly's CLI (the recommended
// rules, every warning an error, and those the repository's redocly.yaml
// adds), as a bare `redocly lint openapi/openapi.json` from the root does,
// and fails on any problem it reports.
//
// It needs node and `npm ci --prefix openapi/sdk-test`. Without them it
// skips, unless KMIRROR_OPENAPI_TESTS=required (as .ci/run sets), when it
// fails.
func TestOpenAPILint(t *testing.T) {
	requireNodeTools(t, sdkTest)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin, err := filepath.Abs(filepath.Join(sdkTest, "node_modules", ".bin", "redocly"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, "lint", "openapi/openapi.json")
	cmd.Dir = ".." // the root, where redocly.yaml is found as a user's lint finds it
	cmd.Env = nodeEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("redocly lint: %v\n%s", err, out.String())
	}
	t.Logf("redocly lint:\n%s", out.String())
}

// requireNodeTools skips the test when node or the npm packages of dir
// (a folder with a package.json, installed with npm ci) are missing,
// unless KMIRROR_OPENAPI_TESTS=required, when it fails it.
func requireNodeTools(t testing.TB, dir string) {
	t.Helper()
	missing := ""
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node is not installed"
	} else if _, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err != nil {
		missing = "the npm packages of " + dir + " are not installed (npm ci --prefix openapi/sdk-test)"
	}
	if missing == "" {
		return
	}
	if os.Getenv("KMIRROR_OPENAPI_TESTS") == "required" {
		t.Fatalf("cannot run: %s", missing)
	}
	t.Skipf("skipped: %s (KMIRROR_OPENAPI_TESTS=required makes this a failure)", missing)
}

// nodeEnv is the environment for the npm tools: this one, without their
// update notices and telemetry (they would reach for the network).
func nodeEnv() []string {
	return append(os.Environ(), "REDOCLY_SUPPRESS_NOTIFICATIONS=true", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true",
		"REDOCLY_TELEMETRY=off", "NO_UPDATE_NOTIFIER=1", "NO_COLOR=1")
}
