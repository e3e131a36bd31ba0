package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMirrorsSchemaRegistry: --create names the source's Schema Registry,
// its password from a file and its bearer token from the environment (never
// the command line); describe shows its URLs and how kmirror signs in, no
// secret; bad settings come back named by their API field.
func TestMirrorsSchemaRegistry(t *testing.T) {
	e := newMirrorsEnv(t)
	const password, token = "registry-password-cli-8e1", "registry-token-cli-44b"
	pw := filepath.Join(t.TempDir(), "registry-password")
	if err := os.WriteFile(pw, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Read only for a registry with no username, and not needed here.
	t.Setenv("KMIRROR_SOURCE_SCHEMA_REGISTRY_BEARER_TOKEN", token)
	e.mustMirrors(t, "Created mirror basic.\n", "--create", "--mirror", "basic", "--source-bootstrap", e.source,
		"--schema-registry-url", "http://registry-1:8081, http://registry-2:8081", "--schema-registry-username", "sr-key",
		"--schema-registry-password-file", pw)
	e.mustMirrors(t, "Created mirror bearer.\n", "--create", "--mirror", "bearer", "--source-bootstrap", e.source,
		"--schema-registry-url", "http://registry:8081")

	ctx := context.Background()
	var urls []string
	var stored string
	if err := e.pool.QueryRow(ctx, `SELECT schema_registry_urls, schema_registry_password FROM mirrors WHERE name = 'basic'`).
		Scan(&urls, &stored); err != nil || !slices.Equal(urls, []string{"http://registry-1:8081", "http://registry-2:8081"}) ||
		!strings.HasPrefix(stored, "kmsec:") {
		t.Fatalf("stored basic registry %v %q (%v)", urls, stored, err)
	}
	var bearerSet, passwordSet bool
	if err := e.pool.QueryRow(ctx, `SELECT schema_registry_bearer_token LIKE 'kmsec:%', schema_registry_password IS NOT NULL
		FROM mirrors WHERE name = 'bearer'`).Scan(&bearerSet, &passwordSet); err != nil || !bearerSet || passwordSet {
		t.Fatalf("stored bearer registry: token sealed %t, password %t (%v)", bearerSet, passwordSet, err)
	}

	for name, want := range map[string]string{
		"basic":  "Mirror basic schema registry: http://registry-1:8081,http://registry-2:8081 (basic auth as sr-key)\n",
		"bearer": "Mirror bearer schema registry: http://registry:8081 (bearer token)\n",
	} {
		code, out, errOut := e.mirrors(t, "--describe", "--mirror", name)
		want += "Schemas of " + name + ": none synced yet (the sync runs on servers started with --destination-schema-registry-url)\n"
		if code != 0 || !strings.HasSuffix(out, "\n"+want) || strings.Contains(out, password) || strings.Contains(out, token) {
			t.Fatalf("describe %s: exit %d\n%s%s", name, code, out, errOut)
		}
	}

	e.wantFailure(t, 1, []string{"Error: invalid input: ", "source.schema_registry.basic_auth_username"},
		"--create", "--mirror", "no-url", "--source-bootstrap", e.source, "--schema-registry-username", "u")
	e.wantFailure(t, 1, []string{"Error: invalid input: ", "source.schema_registry.urls"},
		"--create", "--mirror", "bad-url", "--source-bootstrap", e.source, "--schema-registry-url", "registry:8081")
	e.wantFailure(t, 1, []string{"Error: --schema-registry-ca-file: "},
		"--create", "--mirror", "no-ca", "--source-bootstrap", e.source, "--schema-registry-url", "https://registry:8081",
		"--schema-registry-ca-file", pw+".missing")
	e.wantFailure(t, 2, []string{"--schema-registry-url"}, "--list", "--schema-registry-url", "http://registry:8081")
}
