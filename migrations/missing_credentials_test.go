package migrations_test

import (
	"context"
	"encoding/json"
	"testing"

	"kmirror/service"
)

// TestMissingCredentialsMigrationQueuesACLSets: the ACLs a sync created
// before migration 000010 are queued for __mirror_state by it,
// in the shape restore reads; down and up again work.
func TestMissingCredentialsMigrationQueuesACLSets(t *testing.T) {
	m, pool := migratedTo(t, 8) // before 000010 (and any 000009)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
		INSERT INTO mirrors (name, bootstrap_servers) VALUES ('m', 'h:9092'), ('none', 'h:9092');
		INSERT INTO synced_acls (mirror, resource_type, resource_name, pattern_type, principal, host, operation, permission)
		VALUES ('m', 'TOPIC', 'ord', 'PREFIXED', 'User:dave', '*', 'READ', 'ALLOW'),
		       ('m', 'GROUP', 'app', 'LITERAL', 'User:alice', '*', 'READ', 'ALLOW')`); err != nil {
		t.Fatal(err)
	}
	if err := m.Migrate(10); err != nil {
		t.Fatal(err)
	}
	var key string
	var raw []byte
	if err := pool.QueryRow(ctx, `SELECT key, value FROM outbox WHERE published_at IS NULL`).Scan(&key, &raw); err != nil {
		t.Fatalf("one queued set: %v", err)
	}
	var rec service.SyncedACLsRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	if key != service.SyncedACLsKey("m") || rec.Version != service.RecordVersion || rec.Mirror != "m" || len(rec.ACLs) != 2 ||
		rec.ACLs[0] != (service.SyncedACL{ResourceType: "GROUP", ResourceName: "app", PatternType: "LITERAL",
			Principal: "User:alice", Host: "*", Operation: "READ", Permission: "ALLOW"}) {
		t.Fatalf("queued %s = %s", key, raw)
	}
	var missing []string
	if err := pool.QueryRow(ctx, `SELECT missing_credentials FROM mirrors WHERE name = 'm'`).Scan(&missing); err != nil || len(missing) != 0 {
		t.Fatalf("missing_credentials %v %v", missing, err)
	}
	if err := m.Migrate(8); err != nil {
		t.Fatalf("down: %v", err)
	}
	if err := m.Migrate(10); err != nil {
		t.Fatalf("up again: %v", err)
	}
}
