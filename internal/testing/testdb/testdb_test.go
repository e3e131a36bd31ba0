package testdb

import (
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// Two parallel tests each insert a mirror into their own database, wait for
// each other, and must then see only their own row.
func TestIsolation(t *testing.T) {
	var inserted sync.WaitGroup
	inserted.Add(2)
	for _, name := range []string{"alpha", "beta"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			pool := Pool(t)

			_, err := pool.Exec(ctx, `INSERT INTO mirrors (name, bootstrap_servers) VALUES ($1, 'localhost:9092')`, name)
			inserted.Done()
			if err != nil {
				t.Fatalf("insert into migrated mirrors table: %v", err)
			}
			waitOrTimeout(t, &inserted)

			rows, err := pool.Query(ctx, `SELECT name FROM mirrors`)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for rows.Next() {
				var n string
				if err := rows.Scan(&n); err != nil {
					t.Fatal(err)
				}
				names = append(names, n)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if len(names) != 1 || names[0] != name {
				t.Errorf("mirrors = %v, want only %q", names, name)
			}
		})
	}
}

// waitOrTimeout waits for the other test; with -parallel 1 it never comes,
// and the check still runs, just without the overlap.
func waitOrTimeout(t *testing.T, wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Log("other test did not insert within 10s; checking without overlap")
	}
}

// New's database is dropped at cleanup even with sessions still open.
func TestDropsDatabase(t *testing.T) {
	var dbURL string
	ok := t.Run("inner", func(t *testing.T) {
		dbURL = New(t)
		// An open session must not block the drop.
		if err := Pool(t).Ping(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
	if !ok {
		return
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	var exists bool
	if err := env.admin.QueryRow(t.Context(), `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Errorf("database %s still exists after its test ended", name)
	}
}
