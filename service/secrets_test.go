package service_test

import (
	"context"
	"crypto/rand"
	"errors"
	"kmirror/internal/testing/testcert"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/runtime/secretbox"
	"kmirror/internal/testing/testdb"
	"kmirror/repo"
	"kmirror/service"
)

// TestSecretsAtRest: with a key, a source's SASL password and TLS key are
// stored encrypted (no table holds them in clear), open for connecting,
// and a ciphertext copied to another mirror does not decrypt. A server
// without the key, or with another, fails its start-up check naming the
// mirror. Rotation re-encrypts everything in one transaction, and seals
// secrets stored before encryption was set up.
func TestSecretsAtRest(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	ctx := context.Background()
	key1, key2 := newBox(t), newBox(t)
	cert, tlsKey := testcert.SelfSigned(t)
	const password = "pw-hunter2-5f1c"
	svc := newSecretsService(t, pool, key1)
	create := func(svc *service.Control, name string) {
		t.Helper()
		if _, err := svc.CreateMirror(ctx, service.MirrorInput{Name: name, Source: service.SourceInput{
			BootstrapServers: "h:1", SecurityProtocol: "SASL_SSL", SASLMechanism: "PLAIN", SASLUsername: "u",
			SASLPassword: password, TLSCertPEM: cert, TLSKeyPEM: tlsKey}}, service.WriteOpts{SkipConnectivityCheck: true}); err != nil {
			t.Fatal(err)
		}
	}
	create(svc, "m1")
	create(svc, "m2")
	noClearSecret(t, pool, password, tlsKey)

	conn := sourceConn(t, key1, pool, "m1")
	if conn.Security.SASLPassword != password || conn.Security.TLSKeyPEM != tlsKey {
		t.Fatal("SourceConn does not open the secrets")
	}
	// A patch of the certificate alone is checked against the stored key,
	// in clear, and leaves the secrets sealed.
	if _, err := svc.UpdateMirror(ctx, "m1", service.MirrorPatch{Source: &service.SourcePatch{TLSCertPEM: &cert}},
		service.WriteOpts{SkipConnectivityCheck: true}); err != nil {
		t.Fatalf("patch the certificate: %v", err)
	}
	noClearSecret(t, pool, password, tlsKey)
	if c := sourceConn(t, key1, pool, "m1"); c.Security.SASLPassword != password {
		t.Fatal("the password does not open after a patch")
	}

	// m2's sealed password copied into m1's row: bound to m2, it does not open.
	if _, err := pool.Exec(ctx, `UPDATE mirrors SET sasl_password = (SELECT sasl_password FROM mirrors WHERE name = 'm2') WHERE name = 'm1'`); err != nil {
		t.Fatal(err)
	}
	m1, _ := repo.MirrorsGet(ctx, pool, "m1")
	if _, err := newSecretsWorkers(t, pool, key1).SourceConn(m1); !errors.Is(err, service.ErrSecretKey) || !strings.Contains(err.Error(), "mirror m1") {
		t.Fatalf("a ciphertext moved to another mirror: %v", err)
	}
	// A rotation that cannot open a secret changes nothing.
	before := rawSecrets(t, pool)
	if _, err := svc.RotateSecrets(ctx, key2); err == nil {
		t.Fatal("rotation over a secret that does not open succeeded")
	}
	if after := rawSecrets(t, pool); after != before {
		t.Fatal("a failed rotation changed rows")
	}
	if _, err := pool.Exec(ctx, `DELETE FROM mirrors WHERE name = 'm1'`); err != nil {
		t.Fatal(err)
	}

	// Start-up check: no key, another key, the right key.
	if _, err := newSecretsService(t, pool, nil).CheckSecrets(ctx); !errors.Is(err, service.ErrSecretKey) ||
		!strings.Contains(err.Error(), "KMIRROR_SECRET_KEY_FILE") || !strings.Contains(err.Error(), "mirror m2") {
		t.Fatalf("without the key: %v", err)
	}
	if _, err := newSecretsService(t, pool, key2).CheckSecrets(ctx); !errors.Is(err, service.ErrSecretKey) {
		t.Fatalf("with another key: %v", err)
	}
	if clear, err := svc.CheckSecrets(ctx); err != nil || len(clear) != 0 {
		t.Fatalf("with the key: %v in clear, %v", clear, err)
	}

	// A secret stored before encryption was set up (or with
	// --insecure-store-secrets-in-clear): reported by name, then sealed by
	// the rotation with the rest.
	create(newClearSecretsService(t, pool), "m3")
	if clear, err := svc.CheckSecrets(ctx); err != nil || !slices.Equal(clear, []string{"m3"}) {
		t.Fatalf("with one mirror in clear: %v in clear, %v", clear, err)
	}
	if n, err := svc.RotateSecrets(ctx, key2); err != nil || n != 4 {
		t.Fatalf("rotate: %d, %v", n, err)
	}
	noClearSecret(t, pool, password, tlsKey)
	if _, err := svc.CheckSecrets(ctx); !errors.Is(err, service.ErrSecretKey) {
		t.Fatalf("the old key after the rotation: %v", err)
	}
	for _, name := range []string{"m2", "m3"} {
		if c := sourceConn(t, key2, pool, name); c.Security.SASLPassword != password || c.Security.TLSKeyPEM != tlsKey {
			t.Fatalf("%s does not open under the new key", name)
		}
	}
}

func newBox(t *testing.T) *secretbox.Keyring {
	t.Helper()
	key := make([]byte, secretbox.KeySize)
	_, _ = rand.Read(key)
	b, err := secretbox.New(key)
	if err != nil {
		t.Fatal(err)
	}
	k, err := secretbox.NewKeyring(b)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// newSecretsService is a service with keys (none when box is nil).
func newSecretsService(t *testing.T, pool *pgxpool.Pool, box *secretbox.Keyring) *service.Control {
	t.Helper()
	return newSecretsServiceWith(t, service.Config{Pool: pool, Secrets: box})
}

// newClearSecretsService is a server without a key started with
// --insecure-store-secrets-in-clear.
func newClearSecretsService(t *testing.T, pool *pgxpool.Pool) *service.Control {
	t.Helper()
	return newSecretsServiceWith(t, service.Config{Pool: pool, InsecureClearSecrets: true})
}

func newSecretsServiceWith(t *testing.T, cfg service.Config) *service.Control {
	t.Helper()
	cfg.Catalog = service.CatalogFunc(func(context.Context, kafkaconn.Config) (map[string]int32, error) { return nil, nil })
	svc, err := service.NewControl(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// newSecretsWorkers is the workers' face of a server with keys (none when
// box is nil): the face that opens secrets to connect.
func newSecretsWorkers(t *testing.T, pool *pgxpool.Pool, box *secretbox.Keyring) *service.Workers {
	t.Helper()
	cfg := service.WorkersConfig{Pool: pool}
	if box != nil {
		cfg.Secrets = box
	}
	w, err := service.NewWorkers(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// sourceConn opens mirror name's source as a worker of a server with keys
// box does.
func sourceConn(t *testing.T, box *secretbox.Keyring, pool *pgxpool.Pool, name string) kafkaconn.Config {
	t.Helper()
	m, err := repo.MirrorsGet(context.Background(), pool, name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := newSecretsWorkers(t, pool, box).SourceConn(m)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// noClearSecret reads every row of every table that could hold a source
// secret and fails when one holds a secret, or its key's base64 body, in
// clear.
func noClearSecret(t *testing.T, pool *pgxpool.Pool, secrets ...string) {
	t.Helper()
	for _, table := range []string{"mirrors", "outbox", "events", "mirror_topics"} {
		var all string
		if err := pool.QueryRow(context.Background(), `SELECT coalesce(string_agg(x::text, '|'), '') FROM `+table+` x`).Scan(&all); err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets {
			probe := s
			if lines := strings.Split(s, "\n"); len(lines) > 2 {
				probe = lines[1] // a line of the PEM body
			}
			if strings.Contains(all, probe) {
				t.Fatalf("table %s holds a secret in clear", table)
			}
		}
	}
	var sealed int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM mirrors
		WHERE sasl_password LIKE 'kmsec:v1:%' AND tls_key_pem LIKE 'kmsec:v1:%'`).Scan(&sealed); err != nil || sealed == 0 {
		t.Fatalf("%d mirrors with sealed secrets (%v)", sealed, err)
	}
}

func rawSecrets(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var s string
	if err := pool.QueryRow(context.Background(), `SELECT string_agg(name || sasl_password || tls_key_pem, '|' ORDER BY name) FROM mirrors`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSecretKeyRequired: a server without a key refuses a request that sets
// a source secret, dry run or not, and writes nothing; other requests pass,
// and a mirror stored in clear before keys were required stays patchable.
// --insecure-store-secrets-in-clear stores them as given.
func TestSecretKeyRequired(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	ctx := context.Background()
	keyless := newSecretsService(t, pool, nil)
	sasl := service.SourceInput{BootstrapServers: "h:1", SecurityProtocol: "SASL_PLAINTEXT", SASLMechanism: "PLAIN",
		SASLUsername: "u", SASLPassword: "pw-required-1"}
	for _, dry := range []bool{true, false} {
		_, err := keyless.CreateMirror(ctx, service.MirrorInput{Name: "m1", Source: sasl},
			service.WriteOpts{DryRun: dry, SkipConnectivityCheck: true})
		if !errors.Is(err, service.ErrSecretKeyRequired) || !strings.Contains(err.Error(), "kmirror secrets new-key") ||
			!strings.Contains(err.Error(), "KMIRROR_SECRET_KEY_FILE") || !strings.Contains(err.Error(), "source.sasl_password") ||
			strings.Contains(err.Error(), "pw-required-1") {
			t.Fatalf("dry run %v: %v", dry, err)
		}
	}
	if n := countRows(t, pool, "mirrors") + countRows(t, pool, "events") + countRows(t, pool, "outbox"); n != 0 {
		t.Fatalf("a refused create wrote %d rows", n)
	}

	// A mirror stored in clear by an earlier version: still patchable
	// without a secret, refused with one, and its secret may be removed.
	create := func(svc *service.Control, name string) {
		t.Helper()
		if _, err := svc.CreateMirror(ctx, service.MirrorInput{Name: name, Source: sasl},
			service.WriteOpts{SkipConnectivityCheck: true}); err != nil {
			t.Fatal(err)
		}
	}
	create(newClearSecretsService(t, pool), "legacy")
	if raw := legacyRow(t, pool); !strings.Contains(raw, "pw-required-1") {
		t.Fatalf("--insecure-store-secrets-in-clear did not store as given: %q", raw)
	}
	opts := service.WriteOpts{SkipConnectivityCheck: true}
	user, pw := "v", "pw-required-2"
	if _, err := keyless.UpdateMirror(ctx, "legacy", service.MirrorPatch{Source: &service.SourcePatch{SASLUsername: &user}}, opts); err != nil {
		t.Fatalf("a patch without a secret: %v", err)
	}
	before := legacyRow(t, pool)
	for _, dry := range []bool{true, false} {
		opts.DryRun = dry
		if _, err := keyless.UpdateMirror(ctx, "legacy", service.MirrorPatch{Source: &service.SourcePatch{SASLPassword: &pw}}, opts); !errors.Is(err, service.ErrSecretKeyRequired) {
			t.Fatalf("dry run %v: a patch that sets the password: %v", dry, err)
		}
	}
	if legacyRow(t, pool) != before {
		t.Fatal("a refused patch changed the row")
	}

	// A secret sealed under a key this server lacks: the data plane gets a
	// clear ErrSecretKeyUnavailable, with no key at all or with another.
	key1 := newBox(t)
	create(newSecretsService(t, pool, key1), "sealed")
	m, err := repo.MirrorsGet(ctx, pool, "sealed")
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]*service.Workers{"no key": newSecretsWorkers(t, pool, nil), "another key": newSecretsWorkers(t, pool, newBox(t))} {
		if _, err := w.SourceConn(m); !errors.Is(err, service.ErrSecretKeyUnavailable) || !strings.Contains(err.Error(), "mirror sealed") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func countRows(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func legacyRow(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var s string
	if err := pool.QueryRow(context.Background(), `SELECT m::text FROM mirrors m WHERE name = 'legacy'`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}
