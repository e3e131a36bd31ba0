package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDockerfileBuildStage runs the Dockerfile's build command as its build
// stage does, with the source tree as its context, and checks what the
// runtime stage promises of the binary it gets: the version given as
// VERSION, and a server on the image's listen address (KMIRROR_LISTEN from
// the Dockerfile's ENV) that refuses to start without API tokens. What it
// cannot check here is the base images themselves: no image registry can be
// reached where kmirror is built, so the image has not been built whole.
//
// It rebuilds every package with -trimpath, minutes of both cores, which
// would starve the suite's timing-sensitive tests running beside it: so
// .ci/run runs it on its own, before the suite, with
// KMIRROR_DOCKERFILE_BUILD=1, and the suite skips it.
func TestDockerfileBuildStage(t *testing.T) {
	if os.Getenv("KMIRROR_DOCKERFILE_BUILD") != "1" {
		t.Skip("run by .ci/run on its own (KMIRROR_DOCKERFILE_BUILD=1): it rebuilds every package")
	}
	raw, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	build := regexp.MustCompile(`(?m)^RUN (CGO_ENABLED=0 go build .*)$`).FindStringSubmatch(text)
	if build == nil {
		t.Fatal("the Dockerfile's build stage has no `RUN CGO_ENABLED=0 go build` line")
	}
	listen := regexp.MustCompile(`(?m)^ENV KMIRROR_LISTEN=(\S+)$`).FindStringSubmatch(text)
	if listen == nil {
		t.Fatal("the Dockerfile sets no KMIRROR_LISTEN")
	}
	out := t.TempDir()
	// The stage's own command line, with its ARG and output path filled in.
	line := strings.ReplaceAll(build[1], "${VERSION}", "9.9.9-image-check")
	line = strings.ReplaceAll(line, "/out/kmirror", filepath.Join(out, "kmirror"))
	cmd := exec.Command("bash", "-c", line)
	cmd.Dir = "../.."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, b)
	}
	bin := filepath.Join(out, "kmirror")
	if b, err := exec.Command(bin, "version").CombinedOutput(); err != nil || strings.TrimSpace(string(b)) != "kmirror 9.9.9-image-check" {
		t.Fatalf("kmirror version: %q, %v; want the VERSION the build was given", b, err)
	}
	srv := exec.Command(bin, "server")
	srv.Env = append(os.Environ(), "KMIRROR_LISTEN="+listen[1], "KMIRROR_API_TOKEN=", "KMIRROR_API_TOKENS_FILE=",
		"KMIRROR_DATABASE_URL=postgres://nobody@127.0.0.1:1/none")
	b, err := srv.CombinedOutput()
	if err == nil || !strings.Contains(string(b), "without API tokens") {
		t.Fatalf("the image's server on %s without tokens: %v\n%s; want a refusal to start", listen[1], err, b)
	}
}
