package api_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"kmirror/api"
	"kmirror/internal/runtime/secretbox"
	"kmirror/internal/testing/testcert"
)

// newKeyring is a fresh one-key keyring.
func newKeyring(t *testing.T) *secretbox.Keyring {
	t.Helper()
	k, err := secretbox.ParseKeys([]byte(newKeyText(t)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newKeyText(t *testing.T) string {
	t.Helper()
	text, err := secretbox.NewKeyText()
	if err != nil {
		t.Fatal(err)
	}
	return text + "\n"
}

// TestSecretKeyRequired: a server without a key refuses a create or patch
// that sets a SASL password or TLS key, dry run or not, with a problem that
// says how to set a key, and writes nothing. What sets no secret passes.
func TestSecretKeyRequired(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOpts{noSecretKey: true})
	const password = "pw-never-in-clear-7c1e"
	dir := t.TempDir()
	testcert.WritePair(t, filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem"), 1)
	certPEM, _ := os.ReadFile(filepath.Join(dir, "c.pem"))
	keyPEM, _ := os.ReadFile(filepath.Join(dir, "k.pem"))
	sasl := map[string]any{"bootstrap_servers": e.bootstrap, "security_protocol": "SASL_PLAINTEXT",
		"sasl_mechanism": "PLAIN", "sasl_username": "alice", "sasl_password": password}
	mtls := map[string]any{"bootstrap_servers": e.bootstrap, "security_protocol": "SSL",
		"tls_cert_pem": string(certPEM), "tls_key_pem": string(keyPEM)}
	refused := func(r response, field string) {
		t.Helper()
		p := wantProblem(t, r, http.StatusConflict, "secret-key-required",
			"kmirror secrets new-key", "KMIRROR_SECRET_KEY_FILE", field)
		if strings.Contains(string(r.body), password) || strings.Contains(string(r.body), "PRIVATE KEY") {
			t.Fatalf("the problem echoes the secret: %+v", p)
		}
	}

	before := e.snapshot(t)
	for _, q := range []string{"", "?dry_run=true", "?skip_connectivity_check=true"} {
		refused(e.do(t, "POST", "/v1/mirrors"+q, map[string]any{"name": "sec", "source": sasl}), "source.sasl_password")
		refused(e.do(t, "POST", "/v1/mirrors"+q, map[string]any{"name": "sec", "source": mtls}), "source.tls_key_pem")
	}
	e.unchanged(t, before)

	e.createMirror(t, "plain")
	before = e.snapshot(t)
	for _, q := range []string{"", "?dry_run=true"} {
		refused(e.do(t, "PATCH", "/v1/mirrors/plain"+q, map[string]any{"source": sasl}), "source.sasl_password")
		refused(e.do(t, "PATCH", "/v1/mirrors/plain"+q, map[string]any{"source": mtls}), "source.tls_key_pem")
	}
	e.unchanged(t, before)
	ok(t, e.do(t, "PATCH", "/v1/mirrors/plain", map[string]any{"config": map[string]any{"topics.include": "orders"}}),
		http.StatusOK, nil)
	if strings.Contains(e.logs.String(), password) {
		t.Fatal("the server log holds the password")
	}
}

// TestInsecureStoreSecretsInClear: --insecure-store-secrets-in-clear stores
// a secret as given, unsealed, on a server without a key.
func TestInsecureStoreSecretsInClear(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOpts{noSecretKey: true, insecureClearSecrets: true})
	var m api.Mirror
	ok(t, e.do(t, "POST", "/v1/mirrors?skip_connectivity_check=true", map[string]any{"name": "sec", "source": map[string]any{
		"bootstrap_servers": e.bootstrap, "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
		"sasl_username": "alice", "sasl_password": "as-given"}}), http.StatusCreated, &m)
	var stored string
	if err := e.pool.QueryRow(t.Context(), `SELECT sasl_password FROM mirrors WHERE name = 'sec'`).Scan(&stored); err != nil ||
		stored != "as-given" || !m.Source.SASLPasswordSet {
		t.Fatalf("stored %q (%v), set %v", stored, err, m.Source.SASLPasswordSet)
	}
}

// TestSecretKeyRotationWithoutRestart: after `kmirror secrets rotate`
// re-sealed a mirror's password under a key the server has not loaded,
// PATCH and topics:add?dry_run=true answer 503 secret-key-unavailable with
// Retry-After (not 500) and write nothing; once the key file holds the new
// key the server reads it and both succeed, with no restart. A file of two
// keys opens secrets sealed under either.
func TestSecretKeyRotationWithoutRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "secret.key")
	oldKey, newKey := newKeyText(t), newKeyText(t)
	if err := os.WriteFile(keyFile, []byte(oldKey), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := secretbox.OpenKeyFile(keyFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, envOpts{secrets: keys})
	secure, err := kfake.NewCluster(kfake.SeedTopics(1, "secure"), kfake.EnableSASL(), kfake.Superuser("PLAIN", "alice", "right-pw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(secure.Close)
	ok(t, e.do(t, "POST", "/v1/mirrors", map[string]any{"name": "sasl", "source": map[string]any{
		"bootstrap_servers": strings.Join(secure.ListenAddrs(), ","), "security_protocol": "SASL_PLAINTEXT",
		"sasl_mechanism": "PLAIN", "sasl_username": "alice", "sasl_password": "right-pw"}}), http.StatusCreated, nil)

	next, err := secretbox.ParseKeys([]byte(newKey))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := e.svc.RotateSecrets(t.Context(), next); err != nil || n != 1 {
		t.Fatalf("rotate: %d %v", n, err)
	}
	patch := func() response {
		return e.do(t, "PATCH", "/v1/mirrors/sasl", map[string]any{"config": map[string]any{"topics.include": "secure"}})
	}
	addDry := func() response {
		return e.do(t, "POST", "/v1/mirrors/sasl/topics:add?dry_run=true", map[string]any{"topic": "secure"})
	}
	before := e.snapshot(t)
	for name, r := range map[string]response{"PATCH": patch(), "topics:add?dry_run": addDry()} {
		wantProblem(t, r, http.StatusServiceUnavailable, "secret-key-unavailable", "mirror sasl", next.ID(), "KMIRROR_SECRET_KEY_FILE")
		if r.header.Get("Retry-After") == "" {
			t.Errorf("%s: no Retry-After", name)
		}
	}
	e.unchanged(t, before)

	// The operator writes the new key above the old one; the server finds
	// the change by itself.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go keys.Watch(ctx, 10*time.Millisecond, nil)
	if err := os.WriteFile(keyFile, []byte(newKey+oldKey), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for r := addDry(); r.status != http.StatusOK; r = addDry() {
		if r.status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("after the key file changed: %s", r)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var res api.TopicsResult
	ok(t, addDry(), http.StatusOK, &res)
	if !slices.Equal(res.Topics, []string{"secure"}) {
		t.Fatalf("dry run added %v", res.Topics)
	}
	ok(t, patch(), http.StatusOK, nil)
	// The patch kept the password as the rotation sealed it.
	var stored string
	if err := e.pool.QueryRow(t.Context(), `SELECT sasl_password FROM mirrors WHERE name = 'sasl'`).Scan(&stored); err != nil ||
		secretbox.KeyID(stored) != next.ID() {
		t.Fatalf("stored under %q (%v), want %s", secretbox.KeyID(stored), err, next.ID())
	}
}
