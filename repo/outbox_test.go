package repo_test

import (
	"context"
	"testing"

	"kmirror/internal/testing/testdb"
	"kmirror/repo"
)

// The relay's poll for unpublished outbox rows must use the partial index
// on them even as a prepared statement's generic plan, or every poll walks
// all the rows ever published.
func TestOutboxListUnpublishedUsesItsIndex(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	if _, err := pool.Exec(ctx, `INSERT INTO mirrors (name, bootstrap_servers) VALUES ('m', 'h:1')`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO outbox (mirror, key, value, published_at)
		SELECT 'm', 'k' || g, '{}', now() FROM generate_series(1, 2000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO outbox (mirror, key, value) VALUES ('m', 'new', '{}')`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE outbox`); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = conn.Exec(ctx, `RESET plan_cache_mode`) }()
	scans := func() int64 {
		t.Helper()
		var n int64
		if _, err := conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, `SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'outbox_unpublished_idx'`).
			Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := scans()
	for range 3 {
		rows, err := repo.OutboxList(ctx, conn, repo.OutboxListParams{UnpublishedOnly: true, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0].Key != "new" {
			t.Fatalf("unpublished rows %+v, want the one", rows)
		}
	}
	if got := scans() - before; got < 3 {
		t.Errorf("the unpublished index was scanned %d times for 3 polls", got)
	}
	all, err := repo.OutboxList(ctx, conn, repo.OutboxListParams{Mirror: "m", Limit: 5000})
	if err != nil || len(all) != 2001 {
		t.Fatalf("all rows: %d, %v", len(all), err)
	}
}
