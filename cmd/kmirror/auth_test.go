package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kmirror/api"
)

// TestServerRefusesAnOpenNonLoopbackAddress: without tokens, `kmirror
// server` serves only loopback unless --insecure-no-auth, which warns.
func TestServerRefusesAnOpenNonLoopbackAddress(t *testing.T) {
	t.Setenv("KMIRROR_API_TOKEN", "")
	t.Setenv("KMIRROR_API_READ_TOKEN", "")
	t.Setenv("KMIRROR_API_TOKENS_FILE", "")
	// Nothing listens there: a server that gets past the check fails at
	// its first database step instead.
	db := "postgres://nobody@127.0.0.1:1/none?connect_timeout=1"
	server := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"server", "--database-url", db}, args...), &out, &errOut)
		return code, errOut.String()
	}
	for _, listen := range []string{"0.0.0.0:0", ":0", "[::]:0", "10.1.2.3:8080", "kmirror.example.com:8080"} {
		if code, stderr := server("--listen", listen); code != 1 || !strings.Contains(stderr, "refusing to serve "+listen+" without API tokens") {
			t.Errorf("--listen %s: exit %d, %s", listen, code, stderr)
		}
	}
	code, stderr := server("--listen", "0.0.0.0:0", "--insecure-no-auth")
	if code != 1 || strings.Contains(stderr, "refusing") || !strings.Contains(stderr, "--insecure-no-auth: the API has no tokens") {
		t.Errorf("--insecure-no-auth: exit %d, %s", code, stderr)
	}
	t.Setenv("KMIRROR_API_TOKEN", "admin-secret")
	if code, stderr := server("--listen", "0.0.0.0:0"); code != 1 || strings.Contains(stderr, "refusing") || strings.Contains(stderr, "insecure") {
		t.Errorf("with a token: exit %d, %s", code, stderr)
	}
	for listen, want := range map[string]bool{"127.0.0.1:8080": true, "[::1]:0": true, "localhost:80": true,
		"127.0.0.2:1": true, "0.0.0.0:8080": false, ":8080": false, "192.168.1.1:80": false, "bad": false} {
		if got := loopback(listen); got != want {
			t.Errorf("loopback(%q) = %v", listen, got)
		}
	}
}

// TestTokenNew: `kmirror token new` prints a token and the tokens-file
// line with its hash, which a server loads as that name and role.
func TestTokenNew(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"token", "new", "--name", "ci", "--role", "operator"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var token, line string
	for _, l := range strings.Split(out.String(), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "kmt_"):
			token = l
		case strings.HasPrefix(l, "ci operator "):
			line = l
		}
	}
	if token == "" || line == "" || strings.Contains(line, token) {
		t.Fatalf("output:\n%s", out.String())
	}
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("# CI\n"+line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KMIRROR_API_TOKEN", "")
	t.Setenv("KMIRROR_API_READ_TOKEN", "read-secret")
	tokens, err := loadTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens.File) != 1 || tokens.File[0] != (api.Token{Name: "ci", Role: api.RoleOperator, Hash: sha256.Sum256([]byte(token))}) ||
		tokens.Read != "read-secret" {
		t.Fatalf("loaded %+v", tokens)
	}
	if code := run(context.Background(), []string{"token", "new", "--name", "ci", "--role", "root"}, &out, &errOut); code != 1 {
		t.Fatalf("role root: exit %d", code)
	}
	if _, err := loadTokens(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("a missing tokens file loaded")
	}
}

// TestCLIFollowsRoles: the CLI sends its token; a viewer may list and
// describe, and is told which role a change needs; an operator may act on
// topics but not create mirrors.
func TestCLIFollowsRoles(t *testing.T) {
	e := newMirrorsEnvWith(t, api.Tokens{Admin: "admin-secret", File: []api.Token{
		{Name: "dash", Role: api.RoleViewer, Hash: sha256.Sum256([]byte("dash-secret"))},
		{Name: "ci", Role: api.RoleOperator, Hash: sha256.Sum256([]byte("ci-secret"))},
	}})
	as := func(token string, args ...string) (int, string, string) {
		t.Helper()
		t.Setenv("KMIRROR_TOKEN", token)
		return e.mirrors(t, args...)
	}
	if code, _, stderr := as("", "--list"); code == 0 || !strings.Contains(stderr, "Bearer token") {
		t.Fatalf("no token: exit %d, %s", code, stderr)
	}
	if code, out, stderr := as("admin-secret", "--create", "--mirror", "m1", "--source-bootstrap", e.source); code != 0 {
		t.Fatalf("admin create: exit %d: %s%s", code, out, stderr)
	}
	if code, out, stderr := as("dash-secret", "--list"); code != 0 || out != "m1\n" {
		t.Fatalf("viewer list: exit %d: %s%s", code, out, stderr)
	}
	if code, _, stderr := as("dash-secret", "--add", "--mirror", "m1", "--topic", "my-topic"); code == 0 ||
		!strings.Contains(stderr, "needs role operator") {
		t.Fatalf("viewer add: exit %d: %s", code, stderr)
	}
	if code, out, stderr := as("ci-secret", "--add", "--mirror", "m1", "--topic", "my-topic"); code != 0 ||
		!strings.Contains(out, "Added 1 topic(s) to mirror m1: [my-topic]") {
		t.Fatalf("operator add: exit %d: %s%s", code, out, stderr)
	}
	if code, _, stderr := as("ci-secret", "--delete", "--mirror", "m1"); code == 0 || !strings.Contains(stderr, "needs role admin") {
		t.Fatalf("operator delete: exit %d: %s", code, stderr)
	}
}

// TestServerHelpListsEverySetting: --help lists the token, TLS and secret
// settings and the environment-only ones, the destination's security
// included.
func TestServerHelpListsEverySetting(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"server", "--help"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"-api-tokens-file", "KMIRROR_API_TOKENS_FILE", "-insecure-no-auth", "-public-metrics",
		"-public-docs", "-api-change-rate", "-api-max-event-streams", "-tls-cert-file", "-secret-key-file",
		"KMIRROR_API_TOKEN ", "KMIRROR_API_READ_TOKEN", "KMIRROR_DESTINATION_SECURITY_PROTOCOL",
		"KMIRROR_DESTINATION_SASL_PASSWORD", "KMIRROR_DESTINATION_TLS_SERVER_NAME"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("server --help lacks %s", want)
		}
	}
}
