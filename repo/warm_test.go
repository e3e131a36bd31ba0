package repo_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"

	"kmirror/internal/testing/testdb"
	"kmirror/repo"
)

// TestWarmConnPreparesAndWritesNothing: a warmed connection has the state
// change statement prepared before any partition uses it, and warming it
// changed no row, even in a database holding partitions, events and outbox
// records.
func TestWarmConnPreparesAndWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := fenceWorld(t)
	counts := func() string {
		var s string
		if err := pool.QueryRow(ctx, `SELECT format('events=%s outbox=%s runs=%s', (SELECT count(*) FROM events),
			(SELECT count(*) FROM outbox), (SELECT count(*) FROM offset_map_runs))`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before, rows := snapshot(t, pool), counts()

	conn, err := pgx.Connect(ctx, pool.Config().ConnConfig.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	prepared := func() int {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements
			WHERE statement LIKE '%upd AS (%UPDATE mirror_partitions%'
			  AND statement NOT LIKE '%pg_prepared_statements%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := prepared(); n != 0 {
		t.Fatalf("a fresh connection has %d state change statements prepared", n)
	}
	repo.WarmConn(ctx, conn)
	if n := prepared(); n != 1 {
		t.Fatalf("after WarmConn, %d state change statements are prepared; want 1", n)
	}
	if after, afterRows := snapshot(t, pool), counts(); after != before || afterRows != rows {
		t.Fatalf("WarmConn changed the database:\n%s %s\n%s %s", before, rows, after, afterRows)
	}
}

// TestWarmPoolWithoutTheSchema: warming is best effort; where kmirror's
// tables are not found (here a search_path without them) the pool's
// connections still work.
func TestWarmPoolWithoutTheSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, err := url.Parse(testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", "pg_catalog")
	u.RawQuery = q.Encode()
	pool, err := repo.OpenWith(ctx, u.String(), repo.OpenParams{DefaultMaxConns: 2, Warm: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var one int
	if err := pool.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 on a warmed pool of an empty database: %d, %v", one, err)
	}
}
