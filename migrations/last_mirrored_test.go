package migrations_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestLastMirroredMigration: 000015 gives each existing partition the end
// of its offset map as its last mirrored offsets (none without a map); down
// and up again work.
func TestLastMirroredMigration(t *testing.T) {
	t.Parallel()
	m, pool := migratedTo(t, 14)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO mirrors (name, bootstrap_servers) VALUES ('m', 'h:9092')`,
		`INSERT INTO mirror_topics (mirror, topic, desired_state) VALUES ('m', 't', 'stopped')`,
		`INSERT INTO mirror_partitions (mirror, topic, partition, state, src_next, dst_next)
			VALUES ('m', 't', 0, 'STOPPED', 1236, 1230), ('m', 't', 1, 'MIRRORING', 0, 0)`,
		`INSERT INTO offset_map_runs (mirror, topic, partition, src_start, dst_start, count)
			VALUES ('m', 't', 0, 0, 0, 1000), ('m', 't', 0, 1005, 1000, 230)`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	check := func() {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT partition, last_mirrored_src, last_mirrored_dst FROM mirror_partitions ORDER BY partition`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got []string
		for rows.Next() {
			var p int32
			var s, d *int64
			if err := rows.Scan(&p, &s, &d); err != nil {
				t.Fatal(err)
			}
			if s == nil || d == nil {
				got = append(got, fmt.Sprintf("%d: none", p))
			} else {
				got = append(got, fmt.Sprintf("%d: %d→%d", p, *s, *d))
			}
		}
		if want := "0: 1234→1229, 1: none"; strings.Join(got, ", ") != want {
			t.Fatalf("last mirrored %q, want %q", strings.Join(got, ", "), want)
		}
	}
	if err := m.Migrate(15); err != nil {
		t.Fatal(err)
	}
	check()
	if _, err := pool.Exec(ctx, `UPDATE mirror_partitions SET last_mirrored_src = 3 WHERE partition = 1`); err == nil {
		t.Fatal("a source offset without its destination offset was stored")
	}
	if err := m.Migrate(14); err != nil {
		t.Fatalf("down: %v", err)
	}
	if err := m.Migrate(15); err != nil {
		t.Fatalf("up again: %v", err)
	}
	check()
}
