package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"kmirror/internal/runtime/secretbox"
	"kmirror/internal/testing/testcert"
	"kmirror/internal/testing/testdb"
	"kmirror/repo"
	"kmirror/service"
)

const (
	registryPassword = "registry-password-5d0e"
	registryToken    = "registry-bearer-token-a9c4"
)

// registrySource is a source whose Schema Registry signs in with basic auth
// and a client certificate.
func registrySource(t *testing.T) (service.SourceInput, string) {
	t.Helper()
	cert, key := testcert.SelfSigned(t)
	return service.SourceInput{BootstrapServers: "kafka:9092",
		SchemaRegistryURLs:     []string{"https://registry-1:8081", "https://registry-2:8081"},
		SchemaRegistryUsername: "sr-key", SchemaRegistryPassword: registryPassword,
		SchemaRegistryTLSCAPEM: cert, SchemaRegistryTLSCertPEM: cert, SchemaRegistryTLSKeyPEM: key,
		SchemaRegistryTLSServerName: "registry.example.com"}, key
}

// TestSchemaRegistrySecretsAtRest: the registry's password, bearer token
// and client key are sealed like sasl_password: refused by a server without
// a key, never in clear in a table (the __mirror_state record says only
// *_set), never handed out, opened by SourceRegistry, re-sealed by a
// rotation.
func TestSchemaRegistrySecretsAtRest(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	ctx := context.Background()
	key1, key2 := newBox(t), newBox(t)
	svc := newSecretsService(t, pool, key1)
	opts := service.WriteOpts{SkipConnectivityCheck: true}
	basic, tlsKey := registrySource(t)
	bearer := service.SourceInput{BootstrapServers: "kafka:9092", SchemaRegistryURLs: []string{"http://registry:8081"},
		SchemaRegistryBearerToken: registryToken}

	keyless := newSecretsService(t, pool, nil)
	for name, tc := range map[string]struct {
		src  service.SourceInput
		want string
	}{
		"basic":  {basic, "source.schema_registry.basic_auth_password and source.schema_registry.tls_key_pem"},
		"bearer": {bearer, "source.schema_registry.bearer_token"},
	} {
		_, err := keyless.CreateMirror(ctx, service.MirrorInput{Name: name, Source: tc.src}, opts)
		if !errors.Is(err, service.ErrSecretKeyRequired) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s without a key: %v, want %q named", name, err, tc.want)
		}
	}
	if n := countRows(t, pool, "mirrors") + countRows(t, pool, "outbox"); n != 0 {
		t.Fatalf("refused creates wrote %d rows", n)
	}

	secrets := []string{registryPassword, registryToken, tlsKey}
	for name, src := range map[string]service.SourceInput{"basic": basic, "bearer": bearer, "none": {BootstrapServers: "kafka:9092"}} {
		m, err := svc.CreateMirror(ctx, service.MirrorInput{Name: name, Source: src}, opts)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(m)
		for _, s := range secrets {
			if strings.Contains(string(got), s) {
				t.Fatalf("%s: the mirror handed out holds a secret: %s", name, got)
			}
		}
	}
	noClearIn(t, pool, secrets...)
	var sealed int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM mirrors WHERE schema_registry_password LIKE 'kmsec:v1:%'
		AND schema_registry_tls_key_pem LIKE 'kmsec:v1:%' OR schema_registry_bearer_token LIKE 'kmsec:v1:%'`).Scan(&sealed); err != nil || sealed != 2 {
		t.Fatalf("%d mirrors with sealed registry secrets (%v)", sealed, err)
	}
	var record string
	if err := pool.QueryRow(ctx, `SELECT value::text FROM outbox WHERE key = 'mirror/basic'`).Scan(&record); err != nil ||
		!strings.Contains(record, `"basic_auth_password_set": true`) || !strings.Contains(record, `"tls_key_pem_set": true`) ||
		!strings.Contains(record, `"https://registry-2:8081"`) {
		t.Fatalf("the basic mirror's __mirror_state record %s (%v)", record, err)
	}
	m, err := svc.GetMirror(ctx, "bearer")
	if r := m.Source.SchemaRegistry; err != nil || r == nil || !r.BearerTokenSet || r.BasicAuthPasswordSet ||
		!slices.Equal(r.URLs, bearer.SchemaRegistryURLs) {
		t.Fatalf("GetMirror: %+v, %v", r, err)
	}
	if m, err := svc.GetMirror(ctx, "none"); err != nil || m.Source.SchemaRegistry != nil {
		t.Fatalf("GetMirror of a mirror without a registry: %+v, %v", m.Source.SchemaRegistry, err)
	}

	check := func(box *secretbox.Keyring) {
		t.Helper()
		w := newSecretsWorkers(t, pool, box)
		for name, want := range map[string]service.SourceInput{"basic": basic, "bearer": bearer} {
			row, err := repo.MirrorsGet(ctx, pool, name)
			if err != nil {
				t.Fatal(err)
			}
			cfg, ok, err := w.SourceRegistry(row)
			if err != nil || !ok || !slices.Equal(cfg.URLs, want.SchemaRegistryURLs) || cfg.Username != want.SchemaRegistryUsername ||
				cfg.Password != want.SchemaRegistryPassword || cfg.BearerToken != want.SchemaRegistryBearerToken ||
				cfg.TLSKeyPEM != want.SchemaRegistryTLSKeyPEM || cfg.TLSCertPEM != want.SchemaRegistryTLSCertPEM ||
				cfg.TLSCAPEM != want.SchemaRegistryTLSCAPEM || cfg.TLSServerName != want.SchemaRegistryTLSServerName {
				t.Fatalf("SourceRegistry(%s) = %v, %t, %v", name, cfg, ok, err)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("SourceRegistry(%s): %v", name, err)
			}
		}
		row, err := repo.MirrorsGet(ctx, pool, "none")
		if err != nil {
			t.Fatal(err)
		}
		if cfg, ok, err := w.SourceRegistry(row); ok || err != nil || len(cfg.URLs) != 0 {
			t.Fatalf("SourceRegistry of a mirror without one: %v, %t, %v", cfg, ok, err)
		}
	}
	check(key1)

	// A patch of a non-secret field keeps the secrets sealed and usable.
	name := "other.example.com"
	basic.SchemaRegistryTLSServerName = name
	if _, err := svc.UpdateMirror(ctx, "basic", service.MirrorPatch{Source: &service.SourcePatch{
		SchemaRegistry: &service.SchemaRegistryPatch{TLSServerName: &name}}}, opts); err != nil {
		t.Fatal(err)
	}
	noClearIn(t, pool, secrets...)
	if n, err := svc.RotateSecrets(ctx, key2); err != nil || n != 3 {
		t.Fatalf("rotate: %d, %v", n, err)
	}
	noClearIn(t, pool, secrets...)
	check(key2)
	if _, err := newSecretsService(t, pool, key1).CheckSecrets(ctx); !errors.Is(err, service.ErrSecretKey) {
		t.Fatalf("the old key after the rotation: %v", err)
	}
	// A keyless server does not store a registry secret given in a patch.
	if _, err := keyless.CreateMirror(ctx, service.MirrorInput{Name: "anonymous", Source: service.SourceInput{
		BootstrapServers: "kafka:9092", SchemaRegistryURLs: []string{"http://registry:8081"}}}, opts); err != nil {
		t.Fatal(err)
	}
	user, pw := "u", "another"
	_, err = keyless.UpdateMirror(ctx, "anonymous", service.MirrorPatch{Source: &service.SourcePatch{
		SchemaRegistry: &service.SchemaRegistryPatch{BasicAuthUsername: &user, BasicAuthPassword: &pw}}}, opts)
	if !errors.Is(err, service.ErrSecretKeyRequired) || !strings.Contains(err.Error(), "source.schema_registry.basic_auth_password") {
		t.Fatalf("a keyless patch of the registry password: %v", err)
	}
}

// TestSchemaRegistryValidation: a bad registry is a validation error naming
// the API field, and nothing is written.
func TestSchemaRegistryValidation(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	svc := newClearSecretsService(t, pool)
	cert, key := testcert.SelfSigned(t)
	for _, tc := range []struct {
		name  string
		src   func(*service.SourceInput)
		field string
	}{
		{"username without urls", func(s *service.SourceInput) { s.SchemaRegistryURLs = nil }, "source.schema_registry.basic_auth_username"},
		{"key without urls", func(s *service.SourceInput) {
			s.SchemaRegistryURLs, s.SchemaRegistryUsername, s.SchemaRegistryPassword = nil, "", ""
			s.SchemaRegistryTLSKeyPEM = key
		}, "source.schema_registry.tls_key_pem"},
		{"no scheme", func(s *service.SourceInput) { s.SchemaRegistryURLs = []string{"registry:8081"} }, "source.schema_registry.urls"},
		{"ftp", func(s *service.SourceInput) { s.SchemaRegistryURLs = []string{"ftp://registry:8081"} }, "source.schema_registry.urls"},
		{"credentials in the url", func(s *service.SourceInput) { s.SchemaRegistryURLs = []string{"http://u:p@registry:8081"} },
			"source.schema_registry.urls"},
		{"password without username", func(s *service.SourceInput) { s.SchemaRegistryUsername = "" },
			"source.schema_registry.basic_auth_username"},
		{"username without password", func(s *service.SourceInput) { s.SchemaRegistryPassword = "" },
			"source.schema_registry.basic_auth_password"},
		{"basic and bearer", func(s *service.SourceInput) { s.SchemaRegistryBearerToken = "t" },
			"source.schema_registry.basic_auth_username"},
		{"bearer with Bearer", func(s *service.SourceInput) {
			s.SchemaRegistryUsername, s.SchemaRegistryPassword, s.SchemaRegistryBearerToken = "", "", "Bearer t"
		}, "source.schema_registry.bearer_token"},
		{"tls without https", func(s *service.SourceInput) {
			s.SchemaRegistryURLs = []string{"http://registry:8081"}
			s.SchemaRegistryTLSServerName = "registry"
		}, "source.schema_registry.urls"},
		{"bad ca", func(s *service.SourceInput) {
			s.SchemaRegistryURLs = []string{"https://registry:8081"}
			s.SchemaRegistryTLSCAPEM = "not a pem"
		}, "source.schema_registry.tls_ca_pem"},
		{"cert without key", func(s *service.SourceInput) {
			s.SchemaRegistryURLs = []string{"https://registry:8081"}
			s.SchemaRegistryTLSCertPEM = cert
		}, "source.schema_registry.tls_key_pem"},
		{"key that is no key", func(s *service.SourceInput) {
			s.SchemaRegistryURLs = []string{"https://registry:8081"}
			s.SchemaRegistryTLSCertPEM, s.SchemaRegistryTLSKeyPEM = cert, cert
		}, "source.schema_registry.tls_key_pem"},
	} {
		src := service.SourceInput{BootstrapServers: "kafka:9092", SchemaRegistryURLs: []string{"http://registry:8081"},
			SchemaRegistryUsername: "u", SchemaRegistryPassword: registryPassword}
		tc.src(&src)
		_, err := svc.CreateMirror(context.Background(), service.MirrorInput{Name: "m", Source: src}, service.WriteOpts{SkipConnectivityCheck: true})
		var ve *service.ValidationError
		if !errors.As(err, &ve) || !slices.ContainsFunc(ve.Fields, func(f service.FieldError) bool { return f.Field == tc.field }) {
			t.Errorf("%s: %v, want a validation error of %s", tc.name, err, tc.field)
		} else if strings.Contains(err.Error(), registryPassword) || strings.Contains(err.Error(), key) {
			t.Errorf("%s: the error quotes a secret: %v", tc.name, err)
		}
	}
	if n := countRows(t, pool, "mirrors"); n != 0 {
		t.Fatalf("%d mirrors written by invalid creates", n)
	}
}

// TestSchemaRegistryPatch: a patch adds a registry, replaces its fields one
// by one, and removes it whole with an empty urls list.
func TestSchemaRegistryPatch(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	ctx := context.Background()
	svc := newSecretsService(t, pool, newBox(t))
	opts := service.WriteOpts{SkipConnectivityCheck: true}
	if _, err := svc.CreateMirror(ctx, service.MirrorInput{Name: "m", Source: service.SourceInput{BootstrapServers: "kafka:9092"}}, opts); err != nil {
		t.Fatal(err)
	}
	patch := func(p service.SchemaRegistryPatch) (service.Mirror, error) {
		return svc.UpdateMirror(ctx, "m", service.MirrorPatch{Source: &service.SourcePatch{SchemaRegistry: &p}}, opts)
	}
	str := func(s string) *string { return &s }
	urls := func(u ...string) *[]string { return &u }

	// Settings without URLs are refused.
	var ve *service.ValidationError
	if _, err := patch(service.SchemaRegistryPatch{BasicAuthUsername: str("u")}); !errors.As(err, &ve) ||
		ve.Fields[0].Field != "source.schema_registry.basic_auth_username" {
		t.Fatalf("a username without urls: %v", err)
	}
	// Add.
	m, err := patch(service.SchemaRegistryPatch{URLs: urls("http://registry:8081"), BasicAuthUsername: str("u"),
		BasicAuthPassword: str(registryPassword)})
	if r := m.Source.SchemaRegistry; err != nil || r == nil || r.BasicAuthUsername != "u" || !r.BasicAuthPasswordSet {
		t.Fatalf("add: %+v, %v", r, err)
	}
	// Replace the URLs; the credentials stay.
	m, err = patch(service.SchemaRegistryPatch{URLs: urls("http://a:8081", "http://b:8081")})
	if r := m.Source.SchemaRegistry; err != nil || !slices.Equal(r.URLs, []string{"http://a:8081", "http://b:8081"}) ||
		!r.BasicAuthPasswordSet {
		t.Fatalf("replace the urls: %+v, %v", r, err)
	}
	// Switch to a bearer token: "" clears basic auth.
	m, err = patch(service.SchemaRegistryPatch{BasicAuthUsername: str(""), BasicAuthPassword: str(""), BearerToken: str(registryToken)})
	if r := m.Source.SchemaRegistry; err != nil || r.BasicAuthUsername != "" || r.BasicAuthPasswordSet || !r.BearerTokenSet {
		t.Fatalf("switch to a bearer token: %+v, %v", r, err)
	}
	// A bearer token beside basic auth is refused, and changes nothing.
	if _, err := patch(service.SchemaRegistryPatch{BasicAuthUsername: str("u"), BasicAuthPassword: str("p")}); !errors.As(err, &ve) {
		t.Fatalf("basic auth beside a bearer token: %v", err)
	}
	// Removing the registry takes nothing else.
	if _, err := patch(service.SchemaRegistryPatch{URLs: urls(), BearerToken: str("t")}); !errors.As(err, &ve) ||
		ve.Fields[0].Field != "source.schema_registry.bearer_token" {
		t.Fatalf("remove with a token: %v", err)
	}
	// Remove: every column cleared.
	m, err = patch(service.SchemaRegistryPatch{URLs: urls()})
	if err != nil || m.Source.SchemaRegistry != nil {
		t.Fatalf("remove: %+v, %v", m.Source.SchemaRegistry, err)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT num_nonnulls(schema_registry_urls, schema_registry_username, schema_registry_password,
		schema_registry_bearer_token, schema_registry_tls_ca_pem, schema_registry_tls_cert_pem, schema_registry_tls_key_pem,
		schema_registry_tls_server_name) FROM mirrors WHERE name = 'm'`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d registry columns left after the removal (%v)", left, err)
	}
}

// TestSchemaRegistryRestore: a restore lists the registry's secrets as
// missing credentials, and the mirror is ready once a patch sets them.
func TestSchemaRegistryRestore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := testdb.Pool(t)
	svc := newClearSecretsService(t, pool)
	opts := service.WriteOpts{SkipConnectivityCheck: true}
	src, key := registrySource(t)
	if _, err := svc.CreateMirror(ctx, service.MirrorInput{Name: "m", Source: src}, opts); err != nil {
		t.Fatal(err)
	}
	fresh := testdb.Pool(t)
	restored := newClearSecretsService(t, fresh)
	res, err := restored.Restore(ctx, published(t, pool))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{service.CredentialSchemaRegistryPassword, service.CredentialSchemaRegistryTLSKey}
	if len(res.NeedCredentials) != 1 || !slices.Equal(res.NeedCredentials[0].Missing, want) {
		t.Fatalf("restore needs %+v, want %v", res.NeedCredentials, want)
	}
	m, err := restored.GetMirror(ctx, "m")
	if r := m.Source.SchemaRegistry; err != nil || m.State != service.MirrorNeedsCredentials || r == nil ||
		!slices.Equal(r.URLs, src.SchemaRegistryURLs) || r.BasicAuthUsername != "sr-key" || r.TLSCertPEM != src.SchemaRegistryTLSCertPEM {
		t.Fatalf("restored mirror %+v (%+v), %v", m, m.Source.SchemaRegistry, err)
	}
	// The key goes with its certificate: a patch without it is refused.
	pw := registryPassword
	var ve *service.ValidationError
	if _, err = restored.UpdateMirror(ctx, "m", service.MirrorPatch{Source: &service.SourcePatch{
		SchemaRegistry: &service.SchemaRegistryPatch{BasicAuthPassword: &pw}}}, opts); !errors.As(err, &ve) {
		t.Fatalf("the password alone: %v", err)
	}
	m, err = restored.UpdateMirror(ctx, "m", service.MirrorPatch{Source: &service.SourcePatch{
		SchemaRegistry: &service.SchemaRegistryPatch{BasicAuthPassword: &pw, TLSKeyPEM: &key}}}, opts)
	if err != nil || m.State != service.MirrorReady || len(m.MissingCredentials) != 0 {
		t.Fatalf("after the password and key: %s %v, %v", m.State, m.MissingCredentials, err)
	}
}

// TestSchemaSyncConfig: the schema sync keys are checked when set, and
// SchemaSyncConfigOf fills their defaults.
func TestSchemaSyncConfig(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	svc := newClearSecretsService(t, pool)
	for _, tc := range []struct {
		key, value string
		ok         bool
	}{
		{service.CfgSchemaSyncIntervalMs, "999", false},
		{service.CfgSchemaSyncIntervalMs, "1000", true},
		{service.CfgSchemaSyncIntervalMs, "86400000", true},
		{service.CfgSchemaSyncIntervalMs, "86400001", false},
		{service.CfgSchemaSyncIntervalMs, "10s", false},
		{service.CfgSchemaSubjectsInclude, "com\\.example\\..*", true},
		{service.CfgSchemaSubjectsInclude, "(unclosed", false},
		{service.CfgSchemaRegistryContext, "", true},
		{service.CfgSchemaRegistryContext, ".east", true},
		{service.CfgSchemaRegistryContext, ".east-1.a_b", true},
		{service.CfgSchemaRegistryContext, "east", false},
		{service.CfgSchemaRegistryContext, ".", false},
		{service.CfgSchemaRegistryContext, ".ea:st", false},
		{service.CfgSchemaRegistryContext, ".ea/st", false},
		{service.CfgSchemaRegistryContext, ".ea st", false},
		{service.CfgSchemaRegistryContext, "." + strings.Repeat("x", service.MaxRegistryContext), false},
	} {
		_, err := svc.CreateMirror(context.Background(), service.MirrorInput{Name: "m", Source: service.SourceInput{BootstrapServers: "kafka:9092"},
			Config: map[string]string{tc.key: tc.value}}, service.WriteOpts{SkipConnectivityCheck: true, DryRun: true})
		var ve *service.ValidationError
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s=%q: %v", tc.key, tc.value, err)
		case !tc.ok && (!errors.As(err, &ve) || ve.Fields[0].Field != "config."+tc.key):
			t.Errorf("%s=%q: %v, want a validation error of config.%s", tc.key, tc.value, err, tc.key)
		}
	}

	if got, want := service.SchemaSyncConfigOf(nil), (service.SchemaSyncConfig{Interval: 10 * time.Second}); got != want {
		t.Errorf("defaults: %+v, want %+v", got, want)
	}
	set := map[string]string{service.CfgSchemaSyncIntervalMs: "60000", service.CfgSchemaSubjectsInclude: "shared\\..*",
		service.CfgSchemaRegistryContext: ".east"}
	if got, want := service.SchemaSyncConfigOf(set), (service.SchemaSyncConfig{Interval: time.Minute, SubjectRegex: "shared\\..*",
		Context: ".east"}); got != want {
		t.Errorf("set: %+v, want %+v", got, want)
	}
	// A row written by hand with bad values reads as the defaults.
	bad := map[string]string{service.CfgSchemaSyncIntervalMs: "5", service.CfgSchemaSubjectsInclude: "(",
		service.CfgSchemaRegistryContext: "east"}
	if got, want := service.SchemaSyncConfigOf(bad), (service.SchemaSyncConfig{Interval: 10 * time.Second}); got != want {
		t.Errorf("bad values: %+v, want %+v", got, want)
	}
	eff := service.EffectiveConfig(nil)
	if eff[service.CfgSchemaSyncIntervalMs] != "10000" || eff[service.CfgSchemaSubjectsInclude] != "" || eff[service.CfgSchemaRegistryContext] != "" {
		t.Errorf("effective config: %v", eff)
	}
}
