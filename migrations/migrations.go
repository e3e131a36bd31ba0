// Package migrations holds kmirror's schema as embedded SQL and applies it
// with golang-migrate at server start.
package migrations

import (
	"embed"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers pgx5://
	"github.com/golang-migrate/migrate/v4/source/iofs"
)

//go:embed *.sql
var files embed.FS

// Up applies every pending migration to the database at databaseURL
// (a postgres:// or postgresql:// URL). No pending migration is success.
func Up(databaseURL string) error {
	src, err := iofs.New(files, ".")
	if err != nil {
		return fmt.Errorf("open embedded migrations: %w", err)
	}
	m, err := migrate.NewWithSourceInstance("iofs", src, driverURL(databaseURL))
	if err != nil {
		return fmt.Errorf("connect for migrations: %w", err)
	}
	defer m.Close()
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("apply migrations: %w", err)
	}
	return nil
}

// driverURL rewrites a libpq-style URL to the scheme golang-migrate's pgx/v5
// driver registers, without pgxpool's own settings (pool_max_conns, ...):
// the driver would pass them to the server as run-time parameters, which
// it refuses ("unrecognized configuration parameter").
func driverURL(raw string) string {
	for _, p := range []string{"postgresql://", "postgres://"} {
		if strings.HasPrefix(raw, p) {
			raw = "pgx5://" + strings.TrimPrefix(raw, p)
			break
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return raw // golang-migrate reports it
	}
	q := u.Query()
	for k := range q {
		if strings.HasPrefix(k, "pool_") {
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}
