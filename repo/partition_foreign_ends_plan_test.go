package repo

import (
	"context"
	"encoding/json"
	"testing"

	"kmirror/internal/testing/testdb"
)

// TestStaleForeignEndsPlan: an instance that holds every partition (10,000
// here) reads no partition row looking for other instances' stale ends,
// however many stopped or long dead instances the table remembers.
func TestStaleForeignEndsPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.Pool(t)
	for _, sql := range []string{
		`INSERT INTO instances (id, session_epoch, session_expires_at) VALUES ('a', 1, now() + interval '1 hour')`,
		`INSERT INTO mirrors (name, bootstrap_servers) VALUES ('m', 'h:1')`,
		`INSERT INTO mirror_topics (mirror, topic, desired_state) VALUES ('m', 'big', 'mirroring')`,
		`INSERT INTO mirror_partitions (mirror, topic, partition, state, lease_owner, lease_epoch, lease_session)
			SELECT 'm', 'big', p, 'MIRRORING', 'a', 1, 1 FROM generate_series(0, 9999) p`,
		`ANALYZE mirror_partitions`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	plan := func() (loops, rows float64, raw string) {
		t.Helper()
		var out []struct {
			Plan json.RawMessage `json:"Plan"`
		}
		if err := pool.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+staleForeignEndsSQL, "a", int64(3_000_000)).Scan(&out); err != nil {
			t.Fatal(err)
		}
		loops, rows = relationReads(t, out[0].Plan, "mirror_partitions")
		return loops, rows, string(out[0].Plan)
	}
	if loops, _, raw := plan(); loops != 0 {
		t.Fatalf("with one instance, mirror_partitions was read %v times: %s", loops, raw)
	}
	// Instances stopped, or dead for long (their leases taken over), add
	// nothing.
	if _, err := pool.Exec(ctx, `INSERT INTO instances (id, stopped_at) VALUES ('stopped', now());
		INSERT INTO instances (id, session_epoch, session_expires_at) VALUES ('dead', 1, now() - interval '2 minutes')`); err != nil {
		t.Fatal(err)
	}
	if loops, _, raw := plan(); loops != 0 {
		t.Fatalf("with only stopped or long dead others, mirror_partitions was read %v times: %s", loops, raw)
	}
}

// relationReads sums the loops and rows of the plan nodes that read
// relation.
func relationReads(t *testing.T, plan json.RawMessage, relation string) (loops, rows float64) {
	t.Helper()
	var node struct {
		Relation string            `json:"Relation Name"`
		Loops    float64           `json:"Actual Loops"`
		Rows     float64           `json:"Actual Rows"`
		Plans    []json.RawMessage `json:"Plans"`
	}
	if err := json.Unmarshal(plan, &node); err != nil {
		t.Fatal(err)
	}
	if node.Relation == relation {
		loops, rows = node.Loops, node.Rows
	}
	for _, p := range node.Plans {
		l, r := relationReads(t, p, relation)
		loops, rows = loops+l, rows+r
	}
	return loops, rows
}
