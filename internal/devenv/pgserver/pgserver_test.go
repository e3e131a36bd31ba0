package pgserver

import (
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestStartStop(t *testing.T) {
	ctx := t.Context()
	s, err := Start(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })

	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
	conn.Close(ctx)

	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", s.port)); err == nil {
		c.Close()
		t.Errorf("port %d still accepts connections after Stop", s.port)
	}
	if _, err := os.Stat(s.baseDir); !os.IsNotExist(err) {
		t.Errorf("dir %s still there after Stop: %v", s.baseDir, err)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// A given Dir survives Stop and its cluster is reused by the next Start.
func TestStartReusesDir(t *testing.T) {
	ctx := t.Context()
	dir, err := os.MkdirTemp("", "kmirror-pgserver-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // the postgres user must reach it when we are root
		t.Fatal(err)
	}

	exec := func(sql string) {
		t.Helper()
		s, err := Start(ctx, Config{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := s.Stop(); err != nil {
				t.Fatal(err)
			}
		}()
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	exec("CREATE TABLE kept (id int)")
	exec("SELECT * FROM kept")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("Dir removed by Stop: %v", err)
	}
}
