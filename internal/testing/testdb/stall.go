package testdb

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Stall injects a database stall for fault benchmarks: it runs lockSQL
// (say, SELECT ... FOR UPDATE) in a transaction, holds the locks for d,
// then rolls back. Writers of the locked rows wait meanwhile.
func Stall(tb testing.TB, pool *pgxpool.Pool, lockSQL string, d time.Duration) {
	tb.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := tx.Exec(ctx, lockSQL); err != nil {
		tb.Fatal(err)
	}
	time.Sleep(d) // the stall itself
	if err := tx.Rollback(ctx); err != nil {
		tb.Fatal(err)
	}
}
