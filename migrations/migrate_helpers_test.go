package migrations_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/internal/testing/testdb"
)

// migratedTo gives a test a database of its own at schema version, from the
// files that are embedded, with the migrator (to move it on) and a pool;
// both close at cleanup.
func migratedTo(t *testing.T, version uint) (*migrate.Migrate, *pgxpool.Pool) {
	t.Helper()
	u := testdb.New(t)
	src, err := iofs.New(os.DirFS("."), ".")
	if err != nil {
		t.Fatal(err)
	}
	m, err := migrate.NewWithSourceInstance("iofs", src, "pgx5://"+strings.TrimPrefix(u, "postgres://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if err := m.Migrate(version); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return m, pool
}
