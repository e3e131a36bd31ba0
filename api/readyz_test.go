package api_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/api"
	"kmirror/internal/syncbuf"
	"kmirror/service"
)

// TestReadyzSaysNothingOfTheDatabase: /readyz answers anyone, so with
// Postgres down its 503 names neither the database's user, its name nor its
// address; it has Retry-After as the API's other 503s do, and the server log
// keeps the details for the operator.
func TestReadyzSaysNothingOfTheDatabase(t *testing.T) {
	t.Parallel()
	// A port nothing listens on: every connection attempt is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const user, database = "readyzuser", "readyzdatabase"
	pool, err := pgxpool.New(context.Background(), "postgres://"+user+"@"+addr+"/"+database+"?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	svc, err := service.New(service.Config{Pool: pool, Catalog: service.KafkaCatalog(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	h, err := api.NewHandler(api.Config{Service: svc, Pool: pool, Logger: log, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(string(body), "urn:kmirror:problem:database-unavailable") ||
		!strings.Contains(string(body), "database unavailable") {
		t.Fatalf("/readyz: %d, Retry-After %q, body %s; want 503 database-unavailable with Retry-After",
			resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	_, port, _ := net.SplitHostPort(addr)
	for _, secret := range []string{user, database, addr, port} {
		if strings.Contains(string(body), secret) {
			t.Errorf("/readyz answers %q to anyone: %s", secret, body)
		}
	}
	if l := logs.String(); !strings.Contains(l, "readiness") || !strings.Contains(l, port) {
		t.Errorf("the log does not keep the reason the database did not answer:\n%s", l)
	}
}
