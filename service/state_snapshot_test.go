package service_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/internal/testing/testdb"
	"kmirror/service"
)

// TestQueueStateSnapshotOrdersAfterWritersInFlight: a snapshot taken while
// a mirror change and an ACL-set change are being written waits for both,
// reads what they committed and queues its rows after theirs, so the
// newest outbox row of each key still carries its newest value.
func TestQueueStateSnapshotOrdersAfterWritersInFlight(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := testdb.Pool(t)
	acl := func(principal string) string {
		return `INSERT INTO synced_acls (mirror, resource_type, resource_name, pattern_type, principal, host, operation, permission)
			VALUES ('m', 'TOPIC', 'orders', 'LITERAL', '` + principal + `', '*', 'READ', 'ALLOW')`
	}
	for _, sql := range []string{
		`INSERT INTO mirrors (name, bootstrap_servers) VALUES ('m', 'h:1'), ('n', 'h:1')`,
		`INSERT INTO mirror_topics (mirror, topic, desired_state) VALUES ('m', 'orders', 'mirroring')`,
		`INSERT INTO mirror_partitions (mirror, topic, partition) VALUES ('m', 'orders', 0), ('m', 'orders', 1)`,
		acl("User:alice"),
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}

	// Two writers in flight, as the service writes: a change of mirror n
	// under its row lock, and a change of m's ACL set without it (its
	// foreign key takes a FOR KEY SHARE lock on m's row, which FOR UPDATE
	// would block, hence two mirrors).
	mirrorWriter, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = mirrorWriter.Rollback(ctx) }()
	aclWriter, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = aclWriter.Rollback(ctx) }()
	for _, sql := range []string{
		`SELECT 1 FROM mirrors WHERE name = 'n' FOR UPDATE`,
		`UPDATE mirrors SET config = '{"retention.ms": "1000"}' WHERE name = 'n'`,
		`INSERT INTO outbox (mirror, key, value) VALUES ('n', 'mirror/n', '{"writer": "mirror"}')`,
	} {
		if _, err := mirrorWriter.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	for _, sql := range []string{acl("User:bob"),
		`INSERT INTO outbox (mirror, key, value) VALUES ('m', 'acls/m', '{"writer": "acls"}')`} {
		if _, err := aclWriter.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}

	type result struct {
		q   service.StateSnapshotQueued
		err error
	}
	done := make(chan result, 1)
	go func() {
		q, err := service.QueueStateSnapshot(ctx, pool)
		done <- result{q, err}
	}()
	waitLockWait(t, ctx, pool, "transactionid", "tuple") // on the mirror row
	if err := mirrorWriter.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitLockWait(t, ctx, pool, "relation") // on the ACL table
	if err := aclWriter.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	want := service.StateSnapshotQueued{Mirrors: 2, Topics: 1, ACLSets: 1, Partitions: 2, FirstID: res.q.FirstID}
	if res.q != want || res.q.Records() != 4 {
		t.Fatalf("queued %+v, want %+v", res.q, want)
	}

	// The newest row of each key is the snapshot's, with the writers'
	// values; a mirror's rows go mirror, topics, ACL set, and mirrors go
	// by name.
	newest := map[string]struct {
		id    int64
		value []byte
	}{}
	rows, err := pool.Query(ctx, `SELECT DISTINCT ON (key) key, id, value FROM outbox ORDER BY key, id DESC`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var key string
		var row struct {
			id    int64
			value []byte
		}
		if err := rows.Scan(&key, &row.id, &row.value); err != nil {
			t.Fatal(err)
		}
		newest[key] = row
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	order := []string{"mirror/m", "topic/m/orders", "acls/m", "mirror/n"}
	for i, key := range order {
		row, ok := newest[key]
		if !ok || row.id < res.q.FirstID {
			t.Fatalf("the newest row of %s is %d, before the snapshot's first %d", key, row.id, res.q.FirstID)
		}
		if i > 0 && row.id < newest[order[i-1]].id {
			t.Fatalf("%s queued before %s", key, order[i-1])
		}
	}
	var n service.MirrorRecord
	if err := json.Unmarshal(newest["mirror/n"].value, &n); err != nil || n.Config["retention.ms"] != "1000" {
		t.Fatalf("mirror/n = %s (%v), want the committed config", newest["mirror/n"].value, err)
	}
	var a service.SyncedACLsRecord
	if err := json.Unmarshal(newest["acls/m"].value, &a); err != nil || len(a.ACLs) != 2 {
		t.Fatalf("acls/m = %s (%v), want alice's and bob's ACLs", newest["acls/m"].value, err)
	}
	if _, ok := newest["acls/n"]; ok {
		t.Fatal("a mirror without synced ACLs got a set")
	}
}

// waitLockWait waits until a session of the database waits for a lock of
// one of the types (pg_locks.locktype).
func waitLockWait(t *testing.T, ctx context.Context, pool *pgxpool.Pool, types ...string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
			WHERE NOT l.granted AND a.datname = current_database() AND l.locktype = ANY($1)`, types).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session waits for a lock of type %v", types)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
