// Package testdb gives each integration test its own migrated PostgreSQL
// database, cloned from a template that is migrated once per test binary
// (coder's approach: a clone is a file copy, far cheaper than migrating).
//
// Packages using it are expected to have
//
//	func TestMain(m *testing.M) { os.Exit(testdb.Main(m)) }
//
// so the server and template are removed when the tests end. Without it New
// still works: a server it started is stopped by pgserver's watchdog when the
// test binary exits, but a template on an external server is left behind.
//
// The server is the one at KMIRROR_TEST_DATABASE_URL (a superuser URL; the
// database in it is only used for CREATE/DROP DATABASE) or, when that is
// unset, a throw-away server started from the local PostgreSQL binaries.
package testdb

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/internal/devenv/pgserver"
	"kmirror/migrations"
)

// EnvURL names the variable pointing tests at an existing server.
const EnvURL = "KMIRROR_TEST_DATABASE_URL"

// adminTimeout bounds each CREATE/DROP DATABASE.
const adminTimeout = 30 * time.Second

var (
	setupOnce sync.Once
	env       *environment
	setupErr  error

	// cloneMu serialises clones: Postgres refuses to copy a template that
	// another session (including a concurrent clone) is using.
	cloneMu sync.Mutex
	seq     atomic.Int64
)

// Main runs the tests, then drops the template and stops the server New set
// up, if it did. Its result is the exit code for os.Exit.
func Main(m *testing.M) int {
	code := m.Run()
	if env != nil {
		if err := env.close(); err != nil {
			fmt.Fprintln(os.Stderr, "testdb:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// New creates a fresh database migrated to the latest schema and returns its
// URL. The database is dropped when the test ends, forcibly disconnecting any
// session still open.
func New(t testing.TB) string {
	t.Helper()
	setupOnce.Do(func() { env, setupErr = setup() })
	if setupErr != nil {
		t.Fatalf("testdb: %v", setupErr)
	}
	name := fmt.Sprintf("kmirror_test_%s_%d", env.procID, seq.Add(1))
	if err := env.clone(name); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	t.Cleanup(func() {
		if err := env.drop(name); err != nil {
			t.Errorf("testdb: %v", err)
		}
	})
	return env.url(name)
}

// Pool returns a pool on a fresh database from New, closed when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dbURL := New(t)
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatalf("testdb: open pool: %v", err)
	}
	t.Cleanup(pool.Close) // runs before New's drop: cleanups are LIFO
	return pool
}

// environment is the per-process server, admin pool and template.
type environment struct {
	server   *pgserver.Server // nil when using EnvURL
	base     *url.URL         // server URL; Path is replaced per database
	admin    *pgxpool.Pool    // on the base URL's database, never the template
	template string
	procID   string // pid plus random: CI containers often share pids
}

func setup() (*environment, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	e := &environment{template: "kmirror_tpl", procID: fmt.Sprintf("%d_%08x", os.Getpid(), rand.Uint32())}
	raw := os.Getenv(EnvURL)
	if raw == "" {
		s, err := pgserver.Start(ctx, pgserver.Config{})
		if err != nil {
			return nil, fmt.Errorf("%w (or set %s)", err, EnvURL)
		}
		e.server = s
		raw = s.URL("postgres")
	} else {
		// Test binaries run in parallel against a shared server, one
		// template each.
		e.template = "kmirror_tpl_" + e.procID
	}
	ok := false
	defer func() {
		if !ok {
			_ = e.close()
		}
	}()

	var err error
	if e.base, err = url.Parse(raw); err != nil || (e.base.Scheme != "postgres" && e.base.Scheme != "postgresql") {
		return nil, fmt.Errorf("%s must be a postgres:// URL", EnvURL) // not echoed: may hold a password
	}
	if e.admin, err = pgxpool.New(ctx, raw); err != nil {
		return nil, fmt.Errorf("connect to %s: %w", e.base.Redacted(), err)
	}
	if err := e.createTemplate(ctx); err != nil {
		return nil, err
	}
	ok = true
	return e, nil
}

// createTemplate builds the template and then closes it to connections, so
// no stray session can make a clone fail.
func (e *environment) createTemplate(ctx context.Context) error {
	tpl := pgx.Identifier{e.template}.Sanitize()
	if _, err := e.admin.Exec(ctx, "CREATE DATABASE "+tpl); err != nil {
		return fmt.Errorf("create template %s: %w", e.template, err)
	}
	if err := migrations.Up(e.url(e.template)); err != nil {
		return fmt.Errorf("migrate template %s: %w", e.template, err)
	}
	// Not IS_TEMPLATE too: Postgres refuses to drop a template database.
	if _, err := e.admin.Exec(ctx, "ALTER DATABASE "+tpl+" ALLOW_CONNECTIONS false"); err != nil {
		return fmt.Errorf("seal template %s: %w", e.template, err)
	}
	return nil
}

func (e *environment) clone(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	cloneMu.Lock()
	defer cloneMu.Unlock()
	sql := fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", pgx.Identifier{name}.Sanitize(), pgx.Identifier{e.template}.Sanitize())
	if _, err := e.admin.Exec(ctx, sql); err != nil {
		return fmt.Errorf("create database %s from %s: %w", name, e.template, err)
	}
	return nil
}

func (e *environment) drop(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if _, err := e.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// close drops the template from an external server, or stops ours (which
// takes the template with it).
func (e *environment) close() error {
	var err error
	if e.admin != nil {
		if e.server == nil {
			err = e.drop(e.template)
		}
		e.admin.Close()
	}
	if e.server != nil {
		if stopErr := e.server.Stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}
	return err
}

// url is the server URL with database in place of the original one.
func (e *environment) url(database string) string {
	u := *e.base
	u.Path = "/" + database
	u.RawPath = ""
	return u.String()
}
