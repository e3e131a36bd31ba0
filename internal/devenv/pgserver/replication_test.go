package pgserver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"kmirror/repo"
)

// TestStandbyTakesOver: a synchronous standby holds what the primary
// committed, refuses writes until promoted, and a multi-host URL asking for
// a read-write session finds it once the primary has crashed and it is
// promoted.
func TestStandbyTakesOver(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	primary, err := Start(ctx, Config{Settings: map[string]string{
		// remote_apply: a commit returns once the standby replayed it, so a
		// read there sees it ("on" waits for its flush only, and a read
		// could come first: "relation t does not exist", issue 46).
		"synchronous_standby_names": "*", "synchronous_commit": "remote_apply"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = primary.Stop() })
	standby, err := primary.StartStandby(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = standby.Stop() })

	both := "postgres://postgres@" + primary.Addr() + "," + standby.Addr() +
		"/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2"
	exec := func(url, sql string) error {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer c.Close(context.Background())
		_, err = c.Exec(ctx, sql)
		return err
	}
	if err := exec(both, "CREATE TABLE t (v int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	// Synchronous: the commit returned once the standby had applied it.
	c, err := pgx.Connect(ctx, standby.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 1 {
		t.Fatalf("the standby has %d rows (%v), want the primary's 1", n, err)
	}
	if _, err := c.Exec(ctx, "INSERT INTO t VALUES (2)"); err == nil {
		t.Fatal("the standby took a write before its promotion")
	}
	c.Close(ctx)
	for _, s := range []struct {
		srv      *Server
		writable bool
	}{{primary, true}, {standby, false}} {
		pool, err := repo.Open(ctx, s.srv.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		err = repo.PingWritable(ctx, pool)
		pool.Close()
		if s.writable && err != nil || !s.writable && !errors.Is(err, repo.ErrUnavailable) {
			t.Fatalf("PingWritable on the server on %s: %v, want writable %v", s.srv.Addr(), err, s.writable)
		}
	}

	if err := primary.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	if err := exec(both, "SELECT 1"); err == nil {
		t.Fatal("a read-write session was found with the primary down and the standby not promoted")
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := exec(both, "INSERT INTO t VALUES (3)")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no read-write session 10 s after the promotion: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := primary.Stop(); err != nil {
		t.Fatalf("Stop after Crash: %v", err)
	}
}
