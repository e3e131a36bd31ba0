package migrations_test

import (
	"context"
	"testing"
)

// TestSchemaRegistryMigration: after 000027 a mirror takes a source Schema
// Registry, its settings only with its URLs and basic auth apart from a
// bearer token, and a restore may list the registry's secrets as missing.
// Down (with no registry stored) and up again work.
func TestSchemaRegistryMigration(t *testing.T) {
	t.Parallel()
	m, pool := migratedTo(t, 26)
	ctx := context.Background()
	exec := func(sql string) error {
		_, err := pool.Exec(ctx, sql)
		return err
	}
	if err := exec(`INSERT INTO mirrors (name, bootstrap_servers) VALUES ('before', 'h:9092')`); err != nil {
		t.Fatal(err)
	}
	if err := m.Migrate(27); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sql string
		ok  bool
	}{
		{`INSERT INTO mirrors (name, bootstrap_servers, schema_registry_urls, schema_registry_username, schema_registry_password,
			schema_registry_tls_cert_pem, schema_registry_tls_key_pem, missing_credentials)
			VALUES ('basic', 'h:9092', '{https://r:8081}', 'u', 'p', 'c', 'k',
			'{schema_registry.basic_auth_password,schema_registry.tls_key_pem}')`, true},
		{`INSERT INTO mirrors (name, bootstrap_servers, schema_registry_urls, schema_registry_bearer_token, missing_credentials)
			VALUES ('bearer', 'h:9092', '{http://r:8081}', 't', '{schema_registry.bearer_token}')`, true},
		{`INSERT INTO mirrors (name, bootstrap_servers, schema_registry_username) VALUES ('no-urls', 'h:9092', 'u')`, false},
		{`INSERT INTO mirrors (name, bootstrap_servers, schema_registry_urls) VALUES ('empty-urls', 'h:9092', '{}')`, false},
		{`INSERT INTO mirrors (name, bootstrap_servers, schema_registry_urls, schema_registry_username, schema_registry_bearer_token)
			VALUES ('both', 'h:9092', '{http://r:8081}', 'u', 't')`, false},
		{`INSERT INTO mirrors (name, bootstrap_servers, missing_credentials) VALUES ('other', 'h:9092', '{schema_registry.url}')`, false},
	} {
		if err := exec(tc.sql); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%t", tc.sql, err, tc.ok)
		}
	}
	if err := exec(`DELETE FROM mirrors WHERE name <> 'before'`); err != nil {
		t.Fatal(err)
	}
	if err := m.Migrate(26); err != nil {
		t.Fatalf("down: %v", err)
	}
	if err := m.Migrate(27); err != nil {
		t.Fatalf("up again: %v", err)
	}
}
