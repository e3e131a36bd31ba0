package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kmirror/internal/runtime/secretbox"
	"kmirror/internal/testing/testdb"
	"kmirror/repo"
	"kmirror/service"
)

// TestSecretsRotateAndStartupCheck: `kmirror secrets rotate` re-encrypts
// the stored secrets under the new key, and `kmirror server` then refuses
// to start with the old key, or with none, saying which mirror needs it.
func TestSecretsRotateAndStartupCheck(t *testing.T) {
	ctx := context.Background()
	dbURL := testdb.New(t)
	dir := t.TempDir()
	keyFile := func(name string) string {
		var out, errOut bytes.Buffer
		if code := run(ctx, []string{"secrets", "new-key"}, &out, &errOut); code != 0 {
			t.Fatalf("new-key: %d %s", code, errOut.String())
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, out.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	old, next := keyFile("old"), keyFile("new")
	box, err := secretbox.LoadKeyFile(old)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := repo.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	svc, err := service.NewControl(service.Config{Pool: pool, Catalog: service.KafkaCatalog(time.Second), Secrets: box})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateMirror(ctx, service.MirrorInput{Name: "m1", Source: service.SourceInput{
		BootstrapServers: "h:1", SecurityProtocol: "SASL_PLAINTEXT", SASLMechanism: "PLAIN", SASLUsername: "u",
		SASLPassword: "pw-rotate-secret"}}, service.WriteOpts{SkipConnectivityCheck: true}); err != nil {
		t.Fatal(err)
	}

	t.Setenv("KMIRROR_DATABASE_URL", dbURL)
	t.Setenv("KMIRROR_SECRET_KEY_FILE", old)
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"secrets", "rotate", "--new-key-file", next}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "Re-encrypted 1 secret(s)") {
		t.Fatalf("rotate: exit %d: %s%s", code, out.String(), errOut.String())
	}
	for key, want := range map[string]string{old: "sealed under key", "": "has no key"} {
		t.Setenv("KMIRROR_SECRET_KEY_FILE", key)
		out.Reset()
		errOut.Reset()
		code := run(ctx, []string{"server", "--listen", "127.0.0.1:0"}, &out, &errOut)
		if code != 1 || !strings.Contains(errOut.String(), "stored source secrets") ||
			!strings.Contains(errOut.String(), "mirror m1") || !strings.Contains(errOut.String(), want) {
			t.Errorf("server with key %q: exit %d: %s", key, code, errOut.String())
		}
		if strings.Contains(errOut.String(), "pw-rotate-secret") {
			t.Error("the secret reached the output")
		}
	}
}
