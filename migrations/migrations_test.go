package migrations_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"kmirror/internal/testing/testdb"
	"kmirror/migrations"
	"kmirror/repo"
)

func TestMain(m *testing.M) { os.Exit(testdb.Main(m)) }

// TestPoolSettingsInTheURL: pgx documents pool settings as URL parameters;
// the migrations must not pass them to the server, and the pool must obey.
func TestPoolSettingsInTheURL(t *testing.T) {
	u := testdb.New(t)
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	u += sep + "pool_max_conns=3&pool_min_conns=1"
	if err := migrations.Up(u); err != nil {
		t.Fatalf("migrations with pool settings in the URL: %v", err)
	}
	pool, err := repo.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if got := pool.Config().MaxConns; got != 3 {
		t.Fatalf("pool max conns %d, want 3", got)
	}
}
